package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// MemcachedConfig configures memcached text-protocol load. One session is
// one operation, so the seed's "memslap --test set --concurrency 4
// --execute-number 100000" is Profile{Concurrency: 4, Ops: 100000} with
// Mix {set: 1}.
type MemcachedConfig struct {
	Addr      string             // host:port
	Mix       map[string]float64 // operation weights: "get", "set"; default set only
	Keys      int                // key space; default 10000
	ValueSize int                // bytes per value; default 100
	KeyPrefix string             // default "ctrperf:"
	Dial      Dialer
	Seed      uint64
}

// MemcachedDriver is the memcached load driver.
type MemcachedDriver struct {
	cfg    MemcachedConfig
	labels []string
	cum    []float64 // cumulative weights in labels order
	value  []byte
	hits   atomic.Int64
	misses atomic.Int64
}

var _ Driver = (*MemcachedDriver)(nil)

// ParseMix parses "set=1,get=9" into weights.
func ParseMix(s string) (map[string]float64, error) {
	mix := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		if !ok {
			w = "1"
		}
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return nil, fmt.Errorf("mix %q: weight of %s: %w", s, name, err)
		}
		mix[strings.TrimSpace(name)] = f
	}
	return mix, nil
}

// NewMemcached validates the configuration and returns the driver.
func NewMemcached(cfg MemcachedConfig) (*MemcachedDriver, error) {
	if cfg.Addr == "" {
		return nil, fmt.Errorf("memcached: no address")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("memcached address %q: %w", cfg.Addr, err)
	}
	if len(cfg.Mix) == 0 {
		cfg.Mix = map[string]float64{"set": 1}
	}
	if cfg.Keys == 0 {
		cfg.Keys = 10000
	}
	if cfg.ValueSize == 0 {
		cfg.ValueSize = 100
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "ctrperf:"
	}
	switch {
	case cfg.Keys < 0:
		return nil, fmt.Errorf("memcached: key space %d is negative", cfg.Keys)
	case cfg.ValueSize < 0 || cfg.ValueSize > 1<<20:
		return nil, fmt.Errorf("memcached: value size %d outside 0..1MiB (memcached's default item limit)", cfg.ValueSize)
	case len(cfg.KeyPrefix)+10 > 250:
		return nil, fmt.Errorf("memcached: key prefix %q too long (keys are at most 250 bytes)", cfg.KeyPrefix)
	}
	d := &MemcachedDriver{cfg: cfg}
	for name := range cfg.Mix {
		d.labels = append(d.labels, name)
	}
	sort.Strings(d.labels)
	var sum float64
	for _, name := range d.labels {
		w := cfg.Mix[name]
		if name != "get" && name != "set" {
			return nil, fmt.Errorf("memcached mix: unknown operation %q (get, set)", name)
		}
		if w < 0 {
			return nil, fmt.Errorf("memcached mix: weight of %s is negative (%v)", name, w)
		}
		sum += w
		d.cum = append(d.cum, sum)
	}
	if sum == 0 {
		return nil, fmt.Errorf("memcached mix: all weights are zero")
	}
	// A printable value so that a packet capture reads well.
	d.value = bytes.Repeat([]byte("x"), cfg.ValueSize)
	if d.cfg.Dial == nil {
		var nd net.Dialer
		d.cfg.Dial = nd.DialContext
	}
	return d, nil
}

// Labels are the operations of the mix with a positive weight.
func (d *MemcachedDriver) Labels() []string { return d.labels }

// Metrics reports get hits and misses of the measured window.
func (d *MemcachedDriver) Metrics() map[string]float64 {
	if d.hits.Load()+d.misses.Load() == 0 {
		return nil
	}
	return map[string]float64{"get_hits": float64(d.hits.Load()), "get_misses": float64(d.misses.Load())}
}

// NewVU returns a VU that dials on first use.
func (d *MemcachedDriver) NewVU(id int) (VU, error) {
	return &mcVU{d: d, rng: rand.New(rand.NewPCG(d.cfg.Seed, uint64(id)+1)), key: make([]byte, 0, 64)}, nil
}

type mcVU struct {
	d    *MemcachedDriver
	rng  *rand.Rand
	conn net.Conn
	cr   countingReader
	br   *bufio.Reader
	bw   *bufio.Writer
	key  []byte
}

func (v *mcVU) Close() error {
	if v.conn == nil {
		return nil
	}
	err := v.conn.Close()
	v.conn = nil
	return err
}

func (v *mcVU) Run(ctx context.Context, s Session, rec Recorder) bool {
	d := v.d
	x := v.rng.Float64() * d.cum[len(d.cum)-1]
	op := d.labels[len(d.labels)-1]
	for i, c := range d.cum {
		if x < c {
			op = d.labels[i]
			break
		}
	}
	v.key = strconv.AppendInt(append(v.key[:0], d.cfg.KeyPrefix...), int64(v.rng.IntN(d.cfg.Keys)), 10)
	n, hit, err := v.do(ctx, op, s.Timeout)
	end := time.Now()
	kind := classify(err)
	if err != nil && ctx.Err() != nil {
		kind = kindCanceled
	}
	rec.Observe(op, end.Sub(s.Due), n, kind)
	if kind == "" && op == "get" {
		if !isWarmup(rec) {
			if hit {
				d.hits.Add(1)
			} else {
				d.misses.Add(1)
			}
		}
	}
	return kind == ""
}

func (v *mcVU) do(ctx context.Context, op string, timeout time.Duration) (n int64, hit bool, err error) {
	deadline := time.Now().Add(timeout)
	if v.conn == nil {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err := v.d.cfg.Dial(dctx, "tcp", v.d.cfg.Addr)
		cancel()
		if err != nil {
			return 0, false, fmt.Errorf("dial %s: %w", v.d.cfg.Addr, err)
		}
		v.conn = c
		v.cr = countingReader{r: c}
		if v.br == nil {
			v.br = bufio.NewReaderSize(&v.cr, 4096+v.d.cfg.ValueSize)
			v.bw = bufio.NewWriterSize(c, 4096+v.d.cfg.ValueSize)
		} else {
			v.br.Reset(&v.cr)
			v.bw.Reset(c)
		}
	}
	// The hook gets this connection, not v.conn: a failed exchange closes
	// it and clears v.conn while a cancel may be running the hook.
	conn := v.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer stop()
	before := v.cr.n - int64(v.br.Buffered())
	hit, err = v.exchange(op, deadline)
	n = v.cr.n - int64(v.br.Buffered()) - before
	if err != nil {
		_ = v.Close()
	}
	return n, hit, err
}

func (v *mcVU) exchange(op string, deadline time.Time) (hit bool, err error) {
	if err := v.conn.SetDeadline(deadline); err != nil {
		return false, err
	}
	w := v.bw
	switch op {
	case "set":
		w.WriteString("set ")
		w.Write(v.key)
		w.WriteString(" 0 0 ")
		w.WriteString(strconv.Itoa(len(v.d.value)))
		w.WriteString("\r\n")
		w.Write(v.d.value)
		w.WriteString("\r\n")
	case "get":
		w.WriteString("get ")
		w.Write(v.key)
		w.WriteString("\r\n")
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	line, err := readLine(v.br)
	if err != nil {
		return false, err
	}
	if err := serverError(line); err != nil {
		return false, err
	}
	switch op {
	case "set":
		if !bytes.Equal(line, []byte("STORED")) {
			return false, &protocolError{kind: KindProtocol, msg: "set answered " + quote(line)}
		}
		return false, nil
	default: // get
		if bytes.Equal(line, []byte("END")) {
			return false, nil
		}
		size, err := parseValueLine(line, v.key)
		if err != nil {
			return false, err
		}
		if _, err := v.br.Discard(size + 2); err != nil {
			return false, err
		}
		end, err := readLine(v.br)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(end, []byte("END")) {
			return false, &protocolError{kind: KindProtocol, msg: "get value not followed by END but " + quote(end)}
		}
		return true, nil
	}
}

// readLine returns one \r\n-terminated line without the terminator.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, &protocolError{kind: KindProtocol, msg: "line not terminated by \\r\\n: " + quote(line)}
	}
	return line[:len(line)-2], nil
}

// serverError recognises the protocol's three error replies.
func serverError(line []byte) error {
	switch {
	case bytes.Equal(line, []byte("ERROR")),
		bytes.HasPrefix(line, []byte("CLIENT_ERROR")),
		bytes.HasPrefix(line, []byte("SERVER_ERROR")):
		return &protocolError{kind: KindServer, msg: string(line)}
	}
	return nil
}

// parseValueLine parses "VALUE <key> <flags> <bytes> [<cas>]" and returns
// the data size.
func parseValueLine(line, key []byte) (int, error) {
	f := bytes.Fields(line)
	if len(f) < 4 || !bytes.Equal(f[0], []byte("VALUE")) {
		return 0, &protocolError{kind: KindProtocol, msg: "get answered " + quote(line)}
	}
	if !bytes.Equal(f[1], key) {
		return 0, &protocolError{kind: KindProtocol, msg: fmt.Sprintf("get %s answered for key %s", key, f[1])}
	}
	size, err := strconv.Atoi(string(f[3]))
	if err != nil || size < 0 {
		return 0, &protocolError{kind: KindProtocol, msg: "bad value size in " + quote(line)}
	}
	return size, nil
}

// countingReader counts the bytes received on the wire.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

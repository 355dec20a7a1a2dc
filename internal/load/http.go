package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dialer opens a connection; engine.Target.Dialer() supplies one that dials
// from a network namespace.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// HTTPConfig configures the HTTP driver.
type HTTPConfig struct {
	// BaseURL is http://host:port[/prefix]. Without a scenario its path is
	// the one URL every session GETs.
	BaseURL  string
	Scenario *Scenario
	Dial     Dialer // nil: net.Dialer
	Seed     uint64 // for {{rand}}
}

// HTTPDriver speaks HTTP/1.1 over one keep-alive connection per VU.
//
// It writes requests and parses responses itself instead of going through
// http.Transport: the Transport's two goroutines per connection, its
// connection pool and its header maps cost more CPU per request than a
// static-file server spends, and a load generator that is the bottleneck
// lies. A request costs one write and one read system call (see wire), one
// deadline timer and no allocation when the step neither extracts nor
// receives cookies.
type HTTPDriver struct {
	base    *url.URL
	prefix  string // base path without the trailing slash, prepended to step paths
	addr    string // host:port to dial
	steps   []compiledStep
	headers map[string]string
	dial    Dialer
	seed    uint64
	// noLoop keeps closed loops on one goroutine per VU even when the
	// scenario fits the event loops (evloop.go); tests run both.
	noLoop bool
	// plainDial: connections come from net.Dialer, so they are sockets
	// the event loops can take over. A Dialer of the caller's may return
	// any net.Conn.
	plainDial bool
}

// testNoLoop makes every driver keep to the goroutine path: TestMain runs
// the package's tests once with and once without the event loops.
var testNoLoop bool

var _ Driver = (*HTTPDriver)(nil)

// NewHTTP validates the URL and scenario and returns the driver.
func NewHTTP(cfg HTTPConfig) (*HTTPDriver, error) {
	u, err := ParseTargetURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	d := &HTTPDriver{base: u, dial: cfg.Dial, seed: cfg.Seed}
	d.addr = u.Host
	if u.Port() == "" {
		d.addr = net.JoinHostPort(u.Hostname(), "80")
	}
	sc := cfg.Scenario
	if sc == nil {
		sc = SingleGET(u.RequestURI())
	} else {
		d.prefix = strings.TrimSuffix(u.EscapedPath(), "/")
	}
	d.steps, err = compileScenario(sc)
	if err != nil {
		return nil, err
	}
	d.headers = sc.Headers
	if d.dial == nil {
		var nd net.Dialer
		d.dial = nd.DialContext
		d.plainDial = true
	}
	d.noLoop = testNoLoop
	return d, nil
}

// ParseTargetURL checks that raw is an http URL with a host.
func ParseTargetURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("target URL %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("target URL %q: scheme must be http (got %q); ctrperf measures plain HTTP/1.1", raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("target URL %q has no host", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("target URL %q: port %q is not a TCP port", raw, p)
		}
	}
	return u, nil
}

// Labels are the step labels in scenario order.
func (d *HTTPDriver) Labels() []string {
	l := make([]string, len(d.steps))
	for i, s := range d.steps {
		l[i] = s.Label
	}
	return l
}

// NewVU returns a VU; it dials lazily so that a refused connection is a
// measured error, not a setup failure.
func (d *HTTPDriver) NewVU(id int) (VU, error) {
	return &httpVU{d: d, id: id, rng: rand.New(rand.NewPCG(d.seed, uint64(id)))}, nil
}

type httpVU struct {
	d     *HTTPDriver
	id    int
	rng   *rand.Rand
	conn  net.Conn // written under mu, read by the cancel hook under mu
	w     wire
	br    *bufio.Reader
	reuse bool // the connection has served a request already
	buf   bytes.Buffer
	resp  response

	// One cancel hook per VU and context instead of one per request: a
	// context.AfterFunc per request was half of the generator's
	// allocations. When the context ends, the hook interrupts a blocked
	// read by setting the connection's deadline in the past.
	mu       sync.Mutex
	hookDone <-chan struct{}
	hookStop func() bool
}

// watch makes sure that the end of ctx interrupts this VU's I/O.
func (v *httpVU) watch(ctx context.Context) {
	done := ctx.Done()
	if done == v.hookDone {
		return
	}
	if v.hookStop != nil {
		v.hookStop()
		v.hookStop = nil
	}
	v.hookDone = done
	if done != nil {
		v.hookStop = context.AfterFunc(ctx, v.interrupt)
	}
}

// interrupt runs when the VU's context ends. The context's Err is set
// before it runs, so exchange, which checks Err after setting its own
// deadline, either sees the end or has its deadline poisoned here.
func (v *httpVU) interrupt() {
	v.mu.Lock()
	if v.conn != nil {
		_ = v.conn.SetDeadline(aLongTimeAgo)
	}
	v.mu.Unlock()
}

// closeConn closes the connection; the next request dials a new one.
func (v *httpVU) closeConn() error {
	v.mu.Lock()
	c := v.conn
	v.conn = nil
	v.mu.Unlock()
	v.w = wire{}
	if c != nil {
		return c.Close()
	}
	return nil
}

func (v *httpVU) Close() error {
	if v.hookStop != nil {
		v.hookStop()
		v.hookStop, v.hookDone = nil, nil
	}
	return v.closeConn()
}

// Run runs the scenario once. See the package comment for when each
// step's latency clock starts.
func (v *httpVU) Run(ctx context.Context, s Session, rec Recorder) bool {
	var (
		jar  *cookiejar.Jar
		vars map[string]string
	)
	if v.d.needVars() {
		vars = map[string]string{
			"vu":      strconv.Itoa(v.id),
			"session": strconv.FormatInt(s.ID, 10),
			"rand":    strconv.FormatUint(v.rng.Uint64()%1_000_000_000, 10),
		}
	}
	v.watch(ctx)
	start := s.Due
	for i := range v.d.steps {
		st := &v.d.steps[i]
		if st.Think > 0 {
			t := time.NewTimer(st.Think)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			start = time.Now()
		}
		res := v.do(ctx, st, vars, &jar, s.Timeout)
		end := time.Now()
		kind := classify(res.err)
		if kind == "" {
			kind = statusKind(res.status, st.Expect)
		}
		if kind == "" {
			for _, x := range st.extract {
				m := x.re.FindSubmatch(res.body)
				if m == nil {
					kind = KindExtract
					break
				}
				vars[x.name] = string(m[1])
			}
		}
		rec.Observe(st.Label, end.Sub(start), res.bytes, kind)
		if kind != "" {
			// Later steps depend on this one (cookies, extracted values).
			return false
		}
		start = end
	}
	return true
}

func (d *HTTPDriver) needVars() bool {
	for _, st := range d.steps {
		if len(st.extract) > 0 || strings.Contains(st.Path, "{{") || strings.Contains(st.Body, "{{") {
			return true
		}
		for _, f := range st.Form {
			if strings.Contains(f, "{{") {
				return true
			}
		}
		for _, h := range st.Headers {
			if strings.Contains(h, "{{") {
				return true
			}
		}
	}
	for _, h := range d.headers {
		if strings.Contains(h, "{{") {
			return true
		}
	}
	return false
}

type httpResult struct {
	status int
	bytes  int64
	body   []byte // only when the step extracts
	err    error
}

const maxRedirects = 10

// aLongTimeAgo is a deadline in the past: setting it interrupts a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

func (v *httpVU) do(ctx context.Context, st *compiledStep, vars map[string]string, jar **cookiejar.Jar, timeout time.Duration) httpResult {
	var total int64
	method, u, body, contentType := v.d.stepRequest(st, vars)
	deadline := time.Now().Add(timeout)
	for hop := 0; ; hop++ {
		resp, n, err := v.roundTrip(ctx, method, u, body, contentType, st, vars, *jar, deadline, len(st.extract) > 0)
		total += n
		if err != nil {
			return httpResult{bytes: total, err: err}
		}
		if cs := resp.Cookies(); len(cs) > 0 {
			if *jar == nil {
				*jar, _ = cookiejar.New(nil) // cannot fail without options
			}
			(*jar).SetCookies(u, cs)
		}
		next := redirectTarget(resp, u, st.follow)
		if next == nil || hop == maxRedirects {
			return httpResult{status: resp.StatusCode, bytes: total, body: resp.Body}
		}
		if resp.StatusCode == http.StatusSeeOther || ((resp.StatusCode == http.StatusFound || resp.StatusCode == http.StatusMovedPermanently) && method == http.MethodPost) {
			method, body, contentType = http.MethodGet, nil, ""
		}
		u = next
	}
}

// stepRequest is what a step asks for: method, URL, body and its content type.
func (d *HTTPDriver) stepRequest(st *compiledStep, vars map[string]string) (method string, u *url.URL, body []byte, contentType string) {
	method = st.Method
	u = &url.URL{Scheme: "http", Host: d.base.Host}
	pathAndQuery := d.prefix + expand(st.Path, vars)
	if i := strings.IndexByte(pathAndQuery, '?'); i >= 0 {
		u.Path, u.RawQuery = pathAndQuery[:i], pathAndQuery[i+1:]
	} else {
		u.Path = pathAndQuery
	}
	switch {
	case len(st.Form) > 0:
		form := url.Values{}
		for k, val := range st.Form {
			form.Set(k, expand(val, vars))
		}
		body = []byte(form.Encode())
		contentType = "application/x-www-form-urlencoded"
	case st.Body != "":
		body = []byte(expand(st.Body, vars))
	}
	return method, u, body, contentType
}

// redirectTarget returns where to go next, or nil to stop. Redirects are
// followed only to the same host: the generator never dials anything but its
// target.
func redirectTarget(resp *response, cur *url.URL, follow bool) *url.URL {
	if !follow {
		return nil
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil
	}
	loc := resp.Location
	if loc == "" {
		return nil
	}
	next, err := cur.Parse(loc)
	if err != nil || next.Host != cur.Host || next.Scheme != "http" {
		return nil
	}
	return next
}

// roundTrip sends one request on the VU's connection, dialing if needed,
// and retries once on a fresh connection when a reused keep-alive
// connection turns out to be closed before any byte of the answer arrived.
func (v *httpVU) roundTrip(ctx context.Context, method string, u *url.URL, body []byte, contentType string, st *compiledStep, vars map[string]string, jar *cookiejar.Jar, deadline time.Time, keepBody bool) (*response, int64, error) {
	for attempt := 0; ; attempt++ {
		if err := v.ensureConn(ctx, deadline); err != nil {
			return nil, 0, err
		}
		reused := v.reuse
		n, err := v.exchange(ctx, method, u, body, contentType, st, vars, jar, deadline, keepBody)
		if err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", context.Canceled, err)
		}
		if err == nil {
			v.reuse = true
			if v.resp.Close {
				_ = v.closeConn()
			}
			return &v.resp, n, nil
		}
		_ = v.closeConn()
		k := classify(err)
		if reused && n == 0 && attempt == 0 && (k == KindEOF || k == KindReset) {
			continue
		}
		return nil, n, err
	}
}

func (v *httpVU) ensureConn(ctx context.Context, deadline time.Time) error {
	if v.conn != nil {
		return nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	c, err := v.d.dial(dctx, "tcp", v.d.addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", v.d.addr, err)
	}
	v.mu.Lock()
	v.conn = c
	v.mu.Unlock()
	v.w = newWire(c)
	if v.br == nil {
		v.br = bufio.NewReaderSize(&v.w, 16<<10)
	} else {
		v.br.Reset(&v.w)
	}
	v.reuse = false
	return nil
}

// exchange writes the request and reads the whole response.
func (v *httpVU) exchange(ctx context.Context, method string, u *url.URL, body []byte, contentType string, st *compiledStep, vars map[string]string, jar *cookiejar.Jar, deadline time.Time, keepBody bool) (int64, error) {
	// The read deadline only: the request is written without blocking
	// (see wire), and the wire sets the write deadline itself on the rare
	// path where a write may block. One timer to move per request, not two.
	if err := v.conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	v.w.deadline = deadline
	// After the deadline is set: a cancel hook that ran before has
	// already made Err non-nil, one that runs later poisons the deadline.
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b := &v.buf
	v.d.writeRequest(b, method, u, body, contentType, st, vars, jar)
	before := v.w.n - int64(v.br.Buffered())
	if v.br.Buffered() > 0 {
		// Bytes the server sent ahead of this request (a protocol error
		// the parser will report): readResponse may not read from the
		// wire at all, so the request goes out first.
		if err := v.w.send(b.Bytes()); err != nil {
			return 0, err
		}
	} else {
		v.w.pending = b.Bytes()
	}
	err := readResponse(v.br, method, keepBody, &v.resp)
	if err == nil && len(v.w.pending) > 0 {
		// Cannot happen: a response is read only after the request left.
		err = &protocolError{kind: KindProtocol, msg: "response before the request was sent"}
	}
	v.w.pending = nil
	return v.w.n - int64(v.br.Buffered()) - before, err
}

// writeRequest puts the whole request (head and body) in b.
func (d *HTTPDriver) writeRequest(b *bytes.Buffer, method string, u *url.URL, body []byte, contentType string, st *compiledStep, vars map[string]string, jar *cookiejar.Jar) {
	b.Reset()
	b.WriteString(method)
	b.WriteByte(' ')
	b.WriteString(u.RequestURI())
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(u.Host)
	b.WriteString("\r\nUser-Agent: ctrperf-load\r\n")
	writeHeaders(b, d.headers, vars)
	writeHeaders(b, st.Headers, vars)
	if jar != nil {
		if cs := jar.Cookies(u); len(cs) > 0 {
			b.WriteString("Cookie: ")
			for i, c := range cs {
				if i > 0 {
					b.WriteString("; ")
				}
				b.WriteString(c.Name)
				b.WriteByte('=')
				b.WriteString(c.Value)
			}
			b.WriteString("\r\n")
		}
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		if contentType != "" && st.Headers["Content-Type"] == "" {
			b.WriteString("Content-Type: ")
			b.WriteString(contentType)
			b.WriteString("\r\n")
		}
		b.WriteString("Content-Length: ")
		b.WriteString(strconv.Itoa(len(body)))
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
}

func writeHeaders(b *bytes.Buffer, h map[string]string, vars map[string]string) {
	if len(h) == 0 {
		return
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(expand(h[k], vars))
		b.WriteString("\r\n")
	}
}

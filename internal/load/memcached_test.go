package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/results"
)

// fakeMemcached speaks enough of the text protocol for the driver: set and
// get against a map, or a fixed error reply for every command.
type fakeMemcached struct {
	ln    net.Listener
	mu    sync.Mutex
	data  map[string][]byte
	reply string // if set, answered to every command instead
}

func startFakeMemcached(t *testing.T, reply string) *fakeMemcached {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMemcached{ln: ln, data: map[string][]byte{}, reply: reply}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); f.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return f
}

func (f *fakeMemcached) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return
		}
		if fields[0] == "set" {
			n, _ := strconv.Atoi(fields[4])
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(br, buf); err != nil {
				return
			}
			if f.reply == "" {
				f.mu.Lock()
				f.data[fields[1]] = buf[:n]
				f.mu.Unlock()
			}
		}
		if f.reply != "" {
			fmt.Fprint(c, f.reply+"\r\n")
			continue
		}
		switch fields[0] {
		case "set":
			fmt.Fprint(c, "STORED\r\n")
		case "get":
			f.mu.Lock()
			v, ok := f.data[fields[1]]
			f.mu.Unlock()
			if ok {
				fmt.Fprintf(c, "VALUE %s 0 %d\r\n%s\r\n", fields[1], len(v), v)
			}
			fmt.Fprint(c, "END\r\n")
		default:
			fmt.Fprint(c, "ERROR\r\n")
		}
	}
}

func TestMemcachedSetThenGet(t *testing.T) {
	f := startFakeMemcached(t, "")
	addr := f.ln.Addr().String()
	// memslap --test set --concurrency 4 --execute-number 1000, scaled down.
	set, err := NewMemcached(MemcachedConfig{Addr: addr, Keys: 50, ValueSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), set, Profile{Concurrency: 4, Ops: 1000, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	op := m.Operations["set"]
	if op == nil || op.Count != 1000 || op.ErrorCount() != 0 {
		t.Fatalf("set = %+v, want exactly 1000 sets without errors", op)
	}
	h, _ := results.DecodeHistogram(op.Histogram)
	if h.TotalCount() != 1000 || m.Metrics["elapsed_s"] <= 0 || m.Metrics["throughput_per_s"] <= 0 {
		t.Errorf("histogram %d values, metrics %v", h.TotalCount(), m.Metrics)
	}
	f.mu.Lock()
	stored := len(f.data)
	for k, v := range f.data {
		if !strings.HasPrefix(k, "ctrperf:") || len(v) != 32 {
			t.Errorf("stored %q = %d bytes", k, len(v))
		}
	}
	f.mu.Unlock()
	if stored == 0 || stored > 50 {
		t.Errorf("%d keys stored, want within the key space of 50", stored)
	}

	// With every key of the (smaller) space set, gets hit; a mix gives both labels.
	get, err := NewMemcached(MemcachedConfig{Addr: addr, Keys: 1, ValueSize: 32, Mix: map[string]float64{"get": 9, "set": 1}})
	if err != nil {
		t.Fatal(err)
	}
	m, err = Run(context.Background(), get, Profile{Concurrency: 2, Ops: 200, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g, s := m.Operations["get"], m.Operations["set"]
	if g.Count+s.Count != 200 || g.Count < s.Count {
		t.Errorf("get %d set %d, want 200 in total, mostly gets", g.Count, s.Count)
	}
	if m.Metrics["get_hits"] != float64(g.Count) || g.ErrorCount() != 0 {
		t.Errorf("hits %v of %d gets, errors %v", m.Metrics["get_hits"], g.Count, g.Errors)
	}
	if g.Bytes <= s.Bytes {
		t.Errorf("get bytes %d should exceed set replies %d (values come back)", g.Bytes, s.Bytes)
	}
}

func TestMemcachedErrorReplies(t *testing.T) {
	tests := []struct {
		desc, reply, want string
	}{
		{"server out of memory", "SERVER_ERROR out of memory storing object", KindServer},
		{"unknown command", "ERROR", KindServer},
		{"not what set answers", "NOT_STORED", KindProtocol},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := startFakeMemcached(t, tc.reply)
			d, err := NewMemcached(MemcachedConfig{Addr: f.ln.Addr().String()})
			if err != nil {
				t.Fatal(err)
			}
			m, err := Run(context.Background(), d, Profile{Concurrency: 1, Ops: 5, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if op := m.Operations["set"]; op.Errors[tc.want] != 5 {
				t.Errorf("errors %v, want 5 of %s", op.Errors, tc.want)
			}
		})
	}
}

func TestMemcachedConfig(t *testing.T) {
	tests := []struct {
		desc    string
		cfg     MemcachedConfig
		wantErr string
	}{
		{"defaults", MemcachedConfig{Addr: "127.0.0.1:11211"}, ""},
		{"no address", MemcachedConfig{}, "no address"},
		{"address without port", MemcachedConfig{Addr: "127.0.0.1"}, "address"},
		{"unknown operation", MemcachedConfig{Addr: "a:1", Mix: map[string]float64{"delete": 1}}, "unknown operation"},
		{"all weights zero", MemcachedConfig{Addr: "a:1", Mix: map[string]float64{"get": 0}}, "zero"},
		{"value too big", MemcachedConfig{Addr: "a:1", ValueSize: 2 << 20}, "value size"},
	}
	for _, tc := range tests {
		_, err := NewMemcached(tc.cfg)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tc.desc, err, tc.wantErr)
		}
	}
	mix, err := ParseMix("set=1, get=9")
	if err != nil || mix["set"] != 1 || mix["get"] != 9 {
		t.Errorf("ParseMix = %v, %v", mix, err)
	}
	if _, err := ParseMix("get=x"); err == nil {
		t.Error("ParseMix accepted a non-numeric weight")
	}
}

func TestParseValueLine(t *testing.T) {
	tests := []struct {
		desc, line, key string
		size            int
		bad             bool
	}{
		{"value", "VALUE k 0 5", "k", 5, false},
		{"value with cas", "VALUE k 3 10 99", "k", 10, false},
		{"other key", "VALUE j 0 5", "k", 0, true},
		{"garbage", "HELLO", "k", 0, true},
		{"negative size", "VALUE k 0 -1", "k", 0, true},
	}
	for _, tc := range tests {
		n, err := parseValueLine([]byte(tc.line), []byte(tc.key))
		if (err != nil) != tc.bad || n != tc.size {
			t.Errorf("%s: parseValueLine(%q) = %d, %v", tc.desc, tc.line, n, err)
		}
	}
}

// TestMemslapSetAgainstMemcachedBinary runs the seed-004 configuration
// (scaled down) against the real memcached when it is installed.
func TestMemslapSetAgainstMemcachedBinary(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-l", "127.0.0.1", "-p", port, "-U", "0", "-u", "nobody", "-m", "16")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not listen on %s: %v; stderr: %s", addr, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	d, err := NewMemcached(MemcachedConfig{Addr: addr, Mix: map[string]float64{"set": 1, "get": 1}, Keys: 100})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), d, Profile{Concurrency: 4, Ops: 2000, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Operations["set"].Count + m.Operations["get"].Count; n != 2000 {
		t.Errorf("%d operations, want 2000", n)
	}
	for l, op := range m.Operations {
		if op.ErrorCount() != 0 {
			t.Errorf("%s errors %v", l, op.Errors)
		}
	}
	if m.Metrics["get_hits"] == 0 {
		t.Errorf("no get hit after sets over 100 keys: %v", m.Metrics)
	}
}

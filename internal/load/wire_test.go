package load

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer accepts connections on loopback and runs serve on each with the
// requests parsed by net/http, so that a test controls every byte and every
// close of the answer.
type rawServer struct {
	ln       net.Listener
	conns    atomic.Int64
	requests atomic.Int64
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(c net.Conn, r *http.Request, n int64) (keep bool)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						return
					}
					if !serve(c, r, s.requests.Add(1)) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func runHTTP(t *testing.T, ctx context.Context, cfg HTTPConfig, p Profile) (*HTTPDriver, map[string]int64, error) {
	t.Helper()
	d, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(ctx, d, p)
	if m == nil {
		t.Fatalf("no measurement: %v", err)
	}
	counts := map[string]int64{}
	for l, op := range m.Operations {
		counts[l] = op.Count
		for k, n := range op.Errors {
			counts[l+" "+k] = n
		}
		counts[l+" bytes"] = op.Bytes
	}
	for _, n := range m.Notes {
		if strings.Contains(n, "cancelled") {
			counts["canceled note"] = 1
		}
	}
	return d, counts, err
}

func TestKeepAliveConnectionServesContentLengthAndChunkedAnswers(t *testing.T) {
	const fixed = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
	srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
		a := fixed
		if n%2 == 0 {
			a = chunked
		}
		_, err := io.WriteString(c, a)
		return err == nil
	})
	_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url() + "/x"}, Profile{Concurrency: 1, Ops: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got["GET /x"] != 10 || got["GET /x bytes"] != int64(5*len(fixed)+5*len(chunked)) {
		t.Errorf("got %v, want 10 requests and every byte of the answers counted", got)
	}
	if len(got) != 2 {
		t.Errorf("errors: %v", got)
	}
	if c := srv.conns.Load(); c != 1 {
		t.Errorf("%d connections for 10 requests of one VU, want 1 (keep-alive)", c)
	}
}

func TestConnectionCloseAndSilentlyClosedKeepAlive(t *testing.T) {
	tests := []struct {
		desc   string
		answer string
	}{
		// The server says so: the client must not reuse the connection.
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
		// The server closes without saying so (an idle timeout that hit
		// just after the answer): the next request finds the connection
		// closed before any byte and is retried once on a fresh one.
		{"closed without notice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
				io.WriteString(c, tc.answer)
				return false // close after every answer
			})
			_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url() + "/"}, Profile{Concurrency: 2, Ops: 20, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got["GET /"] != 20 || len(got) != 2 {
				t.Errorf("got %v, want 20 requests without errors", got)
			}
			if c, r := srv.conns.Load(), srv.requests.Load(); c != r || r != 20 {
				t.Errorf("%d connections for %d requests, want one each for 20", c, r)
			}
		})
	}
}

func TestLargeBodyIsSentWhole(t *testing.T) {
	// Far above a loopback socket's send buffer: the write inside the read
	// callback stops with EAGAIN and the ordinary write finishes it.
	body := strings.Repeat("b", 8<<20)
	var lengths sync.Map
	srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
		lengths.Store(n, r.ContentLength)
		_, err := io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
		return err == nil
	})
	// Built, not parsed: YAML-decoding megabytes under -race took seconds.
	sc := &Scenario{Steps: []Step{{Label: "up", Method: "POST", Path: "/u", Body: body, Expect: 201}}}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url(), Scenario: sc}, Profile{Concurrency: 1, Ops: 3, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got["up"] != 3 || len(got) != 2 {
		t.Errorf("got %v, want 3 uploads without errors", got)
	}
	lengths.Range(func(k, v any) bool {
		if v.(int64) != int64(len(body)) {
			t.Errorf("request %v carried %v bytes, want %d", k, v, len(body))
		}
		return true
	})
}

func TestStalledAnswerTimesOutAndCancelInterrupts(t *testing.T) {
	// Never answers; returns when the client gives up and closes.
	stall := func(c net.Conn, r *http.Request, n int64) bool {
		io.Copy(io.Discard, c)
		return false
	}
	t.Run("timeout", func(t *testing.T) {
		srv := newRawServer(t, stall)
		_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url() + "/"}, Profile{Concurrency: 1, Ops: 2, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if got["GET / timeout"] != 2 {
			t.Errorf("got %v, want 2 timeouts", got)
		}
	})
	t.Run("body never read", func(t *testing.T) {
		// The server accepts but reads nothing: the write of a large body
		// blocks and must end at the request's deadline too.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var held sync.WaitGroup
		done := make(chan struct{})
		defer func() { ln.Close(); close(done); held.Wait() }()
		held.Add(1)
		go func() {
			defer held.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				held.Add(1)
				go func() { defer held.Done(); <-done; c.Close() }()
			}
		}()
		sc := &Scenario{Steps: []Step{{Label: "up", Method: "POST", Path: "/u", Body: strings.Repeat("b", 16<<20)}}}
		if err := sc.Validate(); err != nil {
			t.Fatal(err)
		}
		_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: "http://" + ln.Addr().String(), Scenario: sc}, Profile{Concurrency: 1, Ops: 2, Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if got["up timeout"] != 2 {
			t.Errorf("got %v, want 2 timeouts", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
			if n == 1 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return true
			}
			return stall(c, r, n)
		})
		ctx, cancel := context.WithCancel(context.Background())
		// Cancel once the second request waits for its answer.
		go func() {
			for srv.requests.Load() < 2 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, got, err := runHTTP(t, ctx, HTTPConfig{BaseURL: srv.url() + "/"}, Profile{Concurrency: 1, Duration: time.Hour, Timeout: time.Hour})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if got["GET /"] != 1 || got["canceled note"] != 1 || len(got) != 3 {
			t.Errorf("got %v, want the answered request recorded and the interrupted one noted as cancelled, not as an error", got)
		}
	})
}

// plainConn hides the descriptor: the wire falls back to Write then Read.
type plainConn struct{ net.Conn }

func TestConnWithoutDescriptorRunsTheScenario(t *testing.T) {
	srv := ticketServer(t)
	sc, err := LoadScenarioFile("testdata/ticketd-scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var nd net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return plainConn{c}, nil
	}
	_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.URL, Scenario: sc, Dial: dial}, Profile{Concurrency: 2, Ops: 6, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range sc.Labels() {
		if got[l] != 6 {
			t.Errorf("%s: got %v, want 6 without errors", l, got)
		}
	}
	if len(got) != 2*len(sc.Labels()) {
		t.Errorf("errors: %v", got)
	}
}

func TestBytesAheadOfTheRequestDoNotStallIt(t *testing.T) {
	// The server answers the first request twice: the second answer sits
	// in the client's buffer before the second request is written. That
	// request must still go out (the parser would not read from the wire).
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
		a := ok
		if n == 1 {
			a = ok + ok
		}
		_, err := io.WriteString(c, a)
		return err == nil
	})
	_, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url() + "/"}, Profile{Concurrency: 1, Ops: 3, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Had the second request waited for the wire, it would have timed out.
	if got["GET /"] != 3 || len(got) != 2 {
		t.Errorf("got %v, want 3 requests without errors", got)
	}
}

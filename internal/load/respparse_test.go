package load

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// feedAll gives raw to a fresh parser in pieces of at most step bytes, as
// reads would deliver it, then EOF. It returns the bytes the parser did
// not use and its error.
func feedAll(p *respParser, method, raw string, step int) (rest string, err error) {
	p.reset(method)
	var buf []byte
	for i := 0; i < len(raw) && !p.done(); i += step {
		buf = append(buf, raw[i:min(i+step, len(raw))]...)
		n, err := p.feed(buf)
		buf = buf[n:]
		if err != nil {
			return string(buf), err
		}
		if p.done() {
			return string(buf) + raw[min(i+step, len(raw)):], nil
		}
	}
	if !p.done() {
		if err := p.eof(len(buf)); err != nil {
			return string(buf), err
		}
	}
	return string(buf), nil
}

func TestRespParserReadsAsReadResponse(t *testing.T) {
	for _, tc := range responseCases {
		method := tc.method
		if method == "" {
			method = "GET"
		}
		// Every split of the bytes a socket could make: one byte at a
		// time, a few, and all at once.
		for _, step := range []int{1, 2, 3, 7, 16, len(tc.raw)} {
			var p respParser
			rest, err := feedAll(&p, method, tc.raw, step)
			if tc.wantErr != "" {
				if err == nil {
					t.Errorf("%s (pieces of %d): no error, want one like %q", tc.desc, step, tc.wantErr)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (pieces of %d): %v", tc.desc, step, err)
				continue
			}
			r := &p.resp
			if r.StatusCode != tc.status || r.Close != tc.close || len(r.Cookies()) != tc.cookies || r.Location != tc.location || rest != tc.rest {
				t.Errorf("%s (pieces of %d): status %d close %v cookies %d location %q rest %q", tc.desc, step, r.StatusCode, r.Close, len(r.Cookies()), r.Location, rest)
			}
			if want := int64(len(tc.raw) - len(tc.rest)); p.seen != want {
				t.Errorf("%s (pieces of %d): counted %d bytes, want %d", tc.desc, step, p.seen, want)
			}
		}
	}
}

func TestRespParserLimits(t *testing.T) {
	var p respParser
	long := "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxHeadBytes) + "\r\n\r\n"
	if _, err := feedAll(&p, "GET", long, len(long)); err == nil || classify(err) != KindProtocol {
		t.Errorf("a head over 16 KiB: err %v, want a protocol error", err)
	}
	if _, err := feedAll(&p, "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 64); err == nil || classify(err) != KindProtocol {
		t.Errorf("bad chunk size: err %v, want a protocol error", err)
	}
	if _, err := feedAll(&p, "GET", "", 1); classify(err) != KindEOF {
		t.Errorf("nothing at all: err %v, want EOF", err)
	}
}

// On the event loops, a one-step session follows a redirect on the same
// connection and sends the cookie the redirect set, as the goroutine path
// does (TestMain runs this on both).
func TestOneStepSessionFollowsRedirectWithItsCookie(t *testing.T) {
	srv := newRawServer(t, func(c net.Conn, r *http.Request, n int64) bool {
		var a string
		switch {
		case r.URL.Path == "/start":
			a = "HTTP/1.1 302 Found\r\nSet-Cookie: s=42; Path=/\r\nLocation: /end\r\nContent-Length: 0\r\n\r\n"
		case r.URL.Path == "/end" && r.Header.Get("Cookie") == "s=42":
			a = "HTTP/1.0 200 OK\r\n\r\nno length: until close"
		default:
			a = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
		}
		_, err := io.WriteString(c, a)
		return err == nil && r.URL.Path == "/start"
	})
	d, got, err := runHTTP(t, context.Background(), HTTPConfig{BaseURL: srv.url() + "/start"}, Profile{Concurrency: 3, Ops: 12, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d.loopable() == testNoLoop {
		t.Errorf("loopable = %v with testNoLoop %v", d.loopable(), testNoLoop)
	}
	if got["GET /start"] != 12 || len(got) != 2 {
		t.Errorf("got %v, want 12 sessions without errors", got)
	}
	if c, r := srv.conns.Load(), srv.requests.Load(); r != 24 || c != 12 {
		t.Errorf("%d connections and %d requests, want 12 and 24 (the redirect kept its connection, the body without length closed it)", c, r)
	}
}

// nginxResponse is nginx 1.22's answer to the efficiency benchmark's
// request (benchmarks/load): a 612-byte static file.
var nginxResponse = []byte("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 05:45:50 GMT\r\n" +
	"Content-Type: text/html\r\nContent-Length: 612\r\nLast-Modified: Sun, 29 Nov 2026 05:45:50 GMT\r\n" +
	"Connection: keep-alive\r\nETag: \"6b0bbc0e-264\"\r\nAccept-Ranges: bytes\r\n\r\n" + strings.Repeat("a", 612))

// parseNginx parses one nginx response as the event loop does, all of it
// in one read.
func parseNginx(p *respParser) error {
	p.reset("GET")
	n, err := p.feed(nginxResponse)
	if err == nil && (!p.done() || n != len(nginxResponse) || p.resp.StatusCode != 200 || p.resp.Close) {
		err = fmt.Errorf("parsed %d of %d bytes, done %v, status %d, close %v", n, len(nginxResponse), p.done(), p.resp.StatusCode, p.resp.Close)
	}
	return err
}

// The event loop parses a response without allocating: at 60 000
// responses a second, one allocation each would run the garbage collector
// several times a second.
func TestRespParserAllocatesNothing(t *testing.T) {
	var p respParser
	var err error
	if allocs := testing.AllocsPerRun(100, func() { err = parseNginx(&p) }); allocs != 0 {
		t.Errorf("%.1f allocations per response, want 0", allocs)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// go test -run '^$' -bench RespParserNginx -benchmem ./internal/load/
// (under flock /tmp/ctrperf-bench.lock): the head parse is most of the
// event loop's own instructions per request.
func BenchmarkRespParserNginx(b *testing.B) {
	var p respParser
	b.ReportAllocs()
	b.SetBytes(int64(len(nginxResponse)))
	for b.Loop() {
		if err := parseNginx(&p); err != nil {
			b.Fatal(err)
		}
	}
}

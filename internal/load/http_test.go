package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/results"
)

// ticketServer is a miniature ticketd: the login page hands out a CSRF token,
// login sets an auth cookie and redirects, the project page and ticket
// creation require the cookie (and the token).
func ticketServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<form><input type="hidden" name="csrf" value="tok123"></form>`)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("csrf") != "tok123" || !strings.HasPrefix(r.FormValue("user"), "user") {
			http.Error(w, "bad login", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "auth", Value: r.FormValue("user"), Path: "/"})
		http.Redirect(w, r, "/projects/1", http.StatusFound)
	})
	mux.HandleFunc("GET /projects/1", func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie("auth"); err != nil {
			http.Error(w, "login first", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, "project one")
	})
	mux.HandleFunc("POST /projects/1/tickets", func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie("auth"); err != nil || r.FormValue("csrf") != "tok123" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "created "+r.FormValue("subject"))
	})
	mux.HandleFunc("GET /a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusFound) })
	mux.HandleFunc("GET /b", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "b") })
	mux.HandleFunc("GET /chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 3; i++ {
			fmt.Fprint(w, strings.Repeat("c", 100))
			w.(http.Flusher).Flush()
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestScenarioSessionsClosedLoop(t *testing.T) {
	srv := ticketServer(t)
	sc, err := LoadScenarioFile("testdata/ticketd-scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), d, Profile{Concurrency: 3, Ops: 30, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range sc.Labels() {
		op := m.Operations[l]
		if op == nil {
			t.Fatalf("no operation %q", l)
		}
		if op.Count != 30 || op.ErrorCount() != 0 {
			t.Errorf("%s: count %d errors %v, want 30 sessions without errors", l, op.Count, op.Errors)
		}
		if op.Bytes == 0 {
			t.Errorf("%s: no bytes counted", l)
		}
		h, err := results.DecodeHistogram(op.Histogram)
		if err != nil || h.TotalCount() != 30 {
			t.Errorf("%s: histogram %v values, err %v", l, h.TotalCount(), err)
		}
	}
	if m.Metrics["sessions_failed"] != 0 || m.Load.Mode != "closed" || m.Load.Concurrency != 3 {
		t.Errorf("metrics %v load %+v", m.Metrics, m.Load)
	}
	if m.Metrics["throughput_per_s"] <= 0 || m.Metrics["elapsed_s"] <= 0 {
		t.Errorf("metrics %v", m.Metrics)
	}
}

func TestOpenLoopStartsEverySessionOnSchedule(t *testing.T) {
	srv := ticketServer(t)
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL + "/b"})
	if err != nil {
		t.Fatal(err)
	}
	// 200/s for 250 ms after a 100 ms warm-up: arrivals at i/200 s, so
	// exactly 50 fall in the measured window whatever the timing.
	m, err := Run(context.Background(), d, Profile{Rate: 200, Warmup: 100 * time.Millisecond, Duration: 250 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	op := m.Operations["GET /b"]
	if op == nil || op.Count != 50 || op.ErrorCount() != 0 {
		t.Fatalf("operation = %+v, want 50 requests without errors", op)
	}
	if m.Load.Mode != "open" || m.Load.TargetRate != 200 || !near(m.Load.AchievedRate, 200) {
		t.Errorf("load %+v, want open loop, target 200/s achieved 200/s", m.Load)
	}
	if m.DurationS != 0.25 {
		t.Errorf("duration %v, want the scheduled window 0.25 s", m.DurationS)
	}
}

func TestInFlightBoundCountsLateAndNotStarted(t *testing.T) {
	var once sync.Once
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Stall every request until 500 ms after the first arrived: longer
		// than the 200 ms window, so the two VUs stay busy through it.
		once.Do(func() { time.AfterFunc(500*time.Millisecond, func() { close(release) }) })
		<-release
	}))
	defer srv.Close()
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), d, Profile{Rate: 100, Duration: 200 * time.Millisecond, MaxInFlight: 2, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	op := m.Operations["GET /"]
	// 20 sessions due; 2 started, 18 never found a VU.
	if op.Count != 20 || op.Errors[KindNotStarted] != 18 {
		t.Errorf("count %d errors %v; want 20 with 18 not_started", op.Count, op.Errors)
	}
	if m.Load.Late != 18 || !near(m.Load.AchievedRate, 10) {
		t.Errorf("late %d achieved %v; want 18 late and 10/s achieved of 100/s", m.Load.Late, m.Load.AchievedRate)
	}
	h, _ := results.DecodeHistogram(op.Histogram)
	if h.TotalCount() != 2 {
		t.Errorf("histogram has %d values; only the 2 started requests have a latency", h.TotalCount())
	}
	if len(m.Notes) == 0 || !strings.Contains(strings.Join(m.Notes, " "), "never started") {
		t.Errorf("notes %v should explain the shortfall", m.Notes)
	}
}

func TestHTTPErrorKinds(t *testing.T) {
	closedAddr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := l.Addr().String()
		l.Close()
		return a
	}
	hijack := func(linger bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if linger {
				c.(*net.TCPConn).SetLinger(0) // RST instead of FIN
			}
			c.Close()
		}
	}
	stall := make(chan struct{})
	defer close(stall)
	tests := []struct {
		desc     string
		handler  http.Handler
		url      string
		scenario string
		timeout  time.Duration
		label    string
		want     string
	}{
		{desc: "nothing listens", url: "http://" + closedAddr() + "/", label: "GET /", want: KindRefused},
		{desc: "server error", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }), label: "GET /", want: KindHTTP5xx},
		{desc: "not found", handler: http.NotFoundHandler(), label: "GET /", want: KindHTTP4xx},
		{desc: "no answer within the timeout", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Ends when the client gives up and closes the connection.
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		}),
			timeout: 100 * time.Millisecond, label: "GET /", want: KindTimeout},
		{desc: "server closes without answering", handler: hijack(false), label: "GET /", want: KindEOF},
		{desc: "server resets the connection", handler: hijack(true), label: "GET /", want: KindReset},
		{desc: "unexpected status", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
			scenario: "steps: [{label: s, path: /, expect: 302}]", label: "s", want: KindStatus},
		{desc: "extraction that does not match", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "nothing") }),
			scenario: "steps: [{label: s, path: /, extract: {v: 'tok=(\\w+)'}}, {label: t, path: '/{{v}}'}]", label: "s", want: KindExtract},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			u := tc.url
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				u = srv.URL + "/"
			}
			var sc *Scenario
			if tc.scenario != "" {
				var err error
				if sc, err = ParseScenario(strings.NewReader(tc.scenario)); err != nil {
					t.Fatal(err)
				}
				u = strings.TrimSuffix(u, "/")
			}
			d, err := NewHTTP(HTTPConfig{BaseURL: u, Scenario: sc})
			if err != nil {
				t.Fatal(err)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			m, err := Run(context.Background(), d, Profile{Concurrency: 2, Ops: 4, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			op := m.Operations[tc.label]
			if op.Count != 4 || op.Errors[tc.want] != 4 {
				t.Errorf("count %d errors %v, want 4 of kind %s", op.Count, op.Errors, tc.want)
			}
			if m.Metrics["sessions_failed"] != 4 {
				t.Errorf("sessions_failed %v, want 4", m.Metrics["sessions_failed"])
			}
			for l, o := range m.Operations {
				if l != tc.label && o.Count != 0 {
					t.Errorf("step %s ran %d times after a failed step", l, o.Count)
				}
			}
		})
	}
}

func TestRedirectsAndChunkedBodies(t *testing.T) {
	srv := ticketServer(t)
	sc, err := ParseScenario(strings.NewReader(`
steps:
  - {label: follow, path: /a, expect: 200}
  - {label: stop, path: /a, expect: 302, follow_redirects: false}
  - {label: chunked, path: /chunked, extract: {c: '(c+)'}}
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(context.Background(), d, Profile{Concurrency: 1, Ops: 3, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"follow", "stop", "chunked"} {
		if op := m.Operations[l]; op.Count != 3 || op.ErrorCount() != 0 {
			t.Errorf("%s: count %d errors %v", l, op.Count, op.Errors)
		}
	}
	// The followed redirect is two responses on the wire, the stopped one is one.
	if f, s := m.Operations["follow"].Bytes, m.Operations["stop"].Bytes; f <= s {
		t.Errorf("bytes of followed redirect %d not above the stopped one %d", f, s)
	}
}

// responseCases are answers as a server may send them; readResponse and
// the event loops' respParser must read them alike.
var responseCases = []struct {
	desc     string
	raw      string
	method   string
	keep     bool
	status   int
	close    bool
	body     string
	cookies  int
	location string
	rest     string // what must remain unread on the connection
	wantErr  string
}{
	{desc: "content-length body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", keep: true, status: 200, body: "hello", rest: "NEXT"},
	{desc: "discarded body leaves the next response", raw: "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhelloNEXT", status: 200, rest: "NEXT"},
	{desc: "chunked with trailer", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\nNEXT",
		keep: true, status: 200, body: "abcde", rest: "NEXT"},
	{desc: "interim 100 Continue is skipped", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", status: 201},
	{desc: "HEAD has no body despite the length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nNEXT", method: "HEAD", status: 200, rest: "NEXT"},
	{desc: "204 has no body", raw: "HTTP/1.1 204 No Content\r\n\r\nNEXT", status: 204, rest: "NEXT"},
	{desc: "no length: body until close", raw: "HTTP/1.1 200 OK\r\n\r\nall of it", keep: true, status: 200, close: true, body: "all of it"},
	{desc: "Connection: close", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", status: 200, close: true},
	{desc: "HTTP/1.0 closes unless keep-alive", raw: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", status: 200, close: true},
	{desc: "HTTP/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", status: 200},
	{desc: "cookies and location", raw: "HTTP/1.1 302 Found\r\nSet-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n",
		status: 302, cookies: 2, location: "/next"},
	{desc: "not HTTP", raw: "SSH-2.0-OpenSSH\r\n", wantErr: "bad HTTP status line"},
	{desc: "cut short", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", wantErr: "EOF"},
	{desc: "bad length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "Content-Length"},
	{desc: "names in any case among headers that do not count (nginx's)",
		raw: "HTTP/1.1 301 Moved Permanently\r\nServer: nginx\r\nDate: Sat, 28 Nov 2026 20:00:00 GMT\r\nContent-Type: text/html\r\nCONTENT-length:  5 \r\n" +
			"X-Location: /not-this\r\nContent-Lengths: 9\r\nlocation:\t/next \r\nConnection: Close\r\nETag: \"1-2\"\r\nAccept-Ranges: bytes\r\n\r\nhelloNEXT",
		keep: true, status: 301, close: true, body: "hello", location: "/next", rest: "NEXT"},
	{desc: "a name Unicode folds to one of ours is not one (ſ is not s)", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTran\u017ffer-Encoding: chunked\r\n\r\nhelloNEXT",
		keep: true, status: 200, body: "hello", rest: "NEXT"},
	{desc: "header line without a colon", raw: "HTTP/1.1 200 OK\r\nContent-Length 5\r\n\r\nhello", wantErr: "bad header line"},
	{desc: "a signed length, read as strconv reads it", raw: "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhelloNEXT", keep: true, status: 200, body: "hello", rest: "NEXT"},
	{desc: "a length too long for int64", raw: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", wantErr: "Content-Length"},
	{desc: "Connection: a list with close", raw: "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n", status: 200, close: true},
	{desc: "HTTP/1.0 keep-alive in a list", raw: "HTTP/1.0 200 OK\r\nConnection:\tTE, keep-alive \r\nContent-Length: 0\r\n\r\n", status: 200},
	{desc: "a status that is not three digits", raw: "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", wantErr: "bad HTTP status"},
	{desc: "an empty line for a status line", raw: "\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", wantErr: "HTTP status line"},
}

func TestEqualFoldASCII(t *testing.T) {
	tests := []struct {
		desc, b, name string
		want          bool
	}{
		{"same", "Content-Length", "Content-Length", true},
		{"other case", "cONTENT-lENGTH", "Content-Length", true},
		{"longer", "Content-Lengths", "Content-Length", false},
		{"shorter", "Content-Lengt", "Content-Length", false},
		{"empty", "", "Location", false},
		{"one letter differs", "Lacation", "Location", false},
		{"CR is not a dash (0x0d|0x20 is 0x2d)", "Set\rCookie", "Set-Cookie", false},
		{"@ is not a backquote", "@", "`", false},
		{"no Unicode folding: the Kelvin sign is not k", "\u212aeep", "keep", false},
	}
	for _, tc := range tests {
		if got := equalFoldASCII([]byte(tc.b), tc.name); got != tc.want {
			t.Errorf("%s: equalFoldASCII(%q, %q) = %v, want %v", tc.desc, tc.b, tc.name, got, tc.want)
		}
	}
}

func TestReadResponse(t *testing.T) {
	tests := responseCases
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.raw))
			method := tc.method
			if method == "" {
				method = "GET"
			}
			var r response
			err := readResponse(br, method, tc.keep, &r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode != tc.status || r.Close != tc.close || string(r.Body) != tc.body || len(r.Cookies()) != tc.cookies || r.Location != tc.location {
				t.Errorf("got status %d close %v body %q cookies %d location %q", r.StatusCode, r.Close, r.Body, len(r.Cookies()), r.Location)
			}
			rest, _ := br.ReadString(0)
			if rest != tc.rest {
				t.Errorf("left %q on the connection, want %q", rest, tc.rest)
			}
		})
	}
}

func TestNewHTTPRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1/", "127.0.0.1:80", "http:///x", "http://127.0.0.1:99999/", "::"} {
		if _, err := NewHTTP(HTTPConfig{BaseURL: u}); err == nil {
			t.Errorf("NewHTTP(%q) accepted", u)
		}
	}
}

package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/workloads/ticketd/internal/store"
)

const testPassword = "pw-test"

// newSQLiteServer starts a ready server on a seeded SQLite database in a
// temporary directory.
func newSQLiteServer(t *testing.T, cfg Config) (*httptest.Server, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir(), store.Options{Pool: cfg.Pool}, time.Second)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	salt, _ := NewSalt()
	iters := Iterations(4)
	hash, err := HashPassword(testPassword, salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seed(ctx, store.SeedSpec{Users: 5, Projects: 3, Tickets: 30, Salt: salt, Hash: hash, Iterations: iters}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.Observe(srv.ObserveDB)
	srv.SetReady(st)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, st
}

func defaultConfig() Config {
	return Config{MaxClients: 10, Pool: 2, QueueTimeout: 5 * time.Second}
}

var tokenRe = regexp.MustCompile(`name="authenticity_token" value="([^"]+)"`)

// client is a browser: a cookie jar, redirects not followed so each step
// sees its own status.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, http.Header) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func token(t *testing.T, body string) string {
	t.Helper()
	m := tokenRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no authenticity_token in page:\n%.300s", body)
	}
	return m[1]
}

// login runs the first two steps of the scenario and returns the client.
func login(t *testing.T, base string) *http.Client {
	t.Helper()
	c := client(t)
	code, body, _ := get(t, c, base+"/login")
	if code != http.StatusOK {
		t.Fatalf("login page: status %d", code)
	}
	code, _, h := post(t, c, base+"/login", url.Values{"username": {"user2"}, "password": {testPassword}, "authenticity_token": {token(t, body)}})
	if code != http.StatusSeeOther || h.Get("Location") != "/my/page" {
		t.Fatalf("login: status %d location %q, want 303 /my/page", code, h.Get("Location"))
	}
	return c
}

func TestScenarioAllFourOperations(t *testing.T) {
	ts, st := newSQLiteServer(t, defaultConfig())
	c := client(t)

	code, body, _ := get(t, c, ts.URL+"/login")
	if code != http.StatusOK {
		t.Fatalf("login page: status %d", code)
	}
	// The page must weigh like a real one (seed 000's Redmine login page).
	if n := len(body); n < 5000 || n > 10000 {
		t.Errorf("login page is %d bytes, want 5-10 KB", n)
	}
	code, _, h := post(t, c, ts.URL+"/login", url.Values{"username": {"user2"}, "password": {testPassword}, "authenticity_token": {token(t, body)}})
	if code != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", code)
	}
	if !strings.Contains(h.Get("Set-Cookie"), CookieSession) && len(c.Jar.Cookies(mustURL(t, ts.URL))) == 0 {
		t.Fatalf("login set no session cookie")
	}
	code, body, _ = get(t, c, ts.URL+"/projects/2")
	if code != http.StatusOK {
		t.Fatalf("project page: status %d", code)
	}
	if n := strings.Count(body, `<td class="id">`); n != RecentTicketCount {
		t.Errorf("project page lists %d tickets, want %d", n, RecentTicketCount)
	}
	before, err := st.Project(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	code, _, h = post(t, c, ts.URL+"/projects/2/tickets", url.Values{"subject": {"disk full"}, "description": {"it is"}, "priority": {"high"}, "authenticity_token": {token(t, body)}})
	if code != http.StatusCreated {
		t.Fatalf("create ticket: status %d, want 201", code)
	}
	loc := h.Get("Location")
	if !strings.HasPrefix(loc, "/tickets/") {
		t.Fatalf("create ticket: Location %q", loc)
	}
	after, err := st.Project(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if after.TicketCount != before.TicketCount+1 {
		t.Errorf("ticket count %d -> %d, want +1", before.TicketCount, after.TicketCount)
	}
	code, body, _ = get(t, c, ts.URL+"/projects/2")
	if code != http.StatusOK || !strings.Contains(body, "disk full") {
		t.Errorf("project page after create: status %d, new ticket listed: %v", code, strings.Contains(body, "disk full"))
	}
	code, body, _ = get(t, c, ts.URL+loc)
	if code != http.StatusOK || !strings.Contains(body, "disk full") {
		t.Errorf("ticket page: status %d", code)
	}
	// Metrics count what happened, by route and code.
	_, metrics, _ := get(t, client(t), ts.URL+"/metrics")
	for _, want := range []string{
		`ticketd_requests_total{code="201",route="create_ticket"} 1`,
		`ticketd_requests_total{code="303",route="login"} 1`,
		`ticketd_db_query_duration_seconds_count{op="create_ticket"} 1`,
		`ticketd_queue_length 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRejectedRequests(t *testing.T) {
	ts, _ := newSQLiteServer(t, defaultConfig())
	loggedIn := login(t, ts.URL)
	_, page, _ := get(t, loggedIn, ts.URL+"/projects/1")
	tok := token(t, page)

	tests := []struct {
		desc     string
		do       func(c *http.Client) (int, string, http.Header)
		c        *http.Client
		wantCode int
		wantLoc  string
	}{
		{"login without the login page's cookie", func(c *http.Client) (int, string, http.Header) {
			return post(t, c, ts.URL+"/login", url.Values{"username": {"user1"}, "password": {testPassword}, "authenticity_token": {"x"}})
		}, client(t), http.StatusUnprocessableEntity, ""},
		{"wrong password", func(c *http.Client) (int, string, http.Header) {
			_, b, _ := get(t, c, ts.URL+"/login")
			return post(t, c, ts.URL+"/login", url.Values{"username": {"user1"}, "password": {"nope"}, "authenticity_token": {token(t, b)}})
		}, client(t), http.StatusUnauthorized, ""},
		{"unknown user", func(c *http.Client) (int, string, http.Header) {
			_, b, _ := get(t, c, ts.URL+"/login")
			return post(t, c, ts.URL+"/login", url.Values{"username": {"nobody"}, "password": {testPassword}, "authenticity_token": {token(t, b)}})
		}, client(t), http.StatusUnauthorized, ""},
		{"project page without a session redirects to login", func(c *http.Client) (int, string, http.Header) {
			return get(t, c, ts.URL+"/projects/1")
		}, client(t), http.StatusFound, "/login"},
		{"unknown project", func(c *http.Client) (int, string, http.Header) {
			return get(t, c, ts.URL+"/projects/99")
		}, loggedIn, http.StatusNotFound, ""},
		{"project id not a number", func(c *http.Client) (int, string, http.Header) {
			return get(t, c, ts.URL+"/projects/abc")
		}, loggedIn, http.StatusBadRequest, ""},
		{"create without token", func(c *http.Client) (int, string, http.Header) {
			return post(t, c, ts.URL+"/projects/1/tickets", url.Values{"subject": {"s"}})
		}, loggedIn, http.StatusUnprocessableEntity, ""},
		{"create with empty subject", func(c *http.Client) (int, string, http.Header) {
			return post(t, c, ts.URL+"/projects/1/tickets", url.Values{"subject": {" "}, "authenticity_token": {tok}})
		}, loggedIn, http.StatusUnprocessableEntity, ""},
		{"create with unknown priority", func(c *http.Client) (int, string, http.Header) {
			return post(t, c, ts.URL+"/projects/1/tickets", url.Values{"subject": {"s"}, "priority": {"whenever"}, "authenticity_token": {tok}})
		}, loggedIn, http.StatusUnprocessableEntity, ""},
		{"create in unknown project", func(c *http.Client) (int, string, http.Header) {
			return post(t, c, ts.URL+"/projects/99/tickets", url.Values{"subject": {"s"}, "authenticity_token": {tok}})
		}, loggedIn, http.StatusNotFound, ""},
		{"forged session cookie", func(c *http.Client) (int, string, http.Header) {
			c.Jar.SetCookies(mustURL(t, ts.URL), []*http.Cookie{{Name: CookieSession, Value: "1.99999999999.deadbeef", Path: "/"}})
			return get(t, c, ts.URL+"/projects/1")
		}, client(t), http.StatusFound, "/login"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			code, body, h := tc.do(tc.c)
			if code != tc.wantCode {
				t.Fatalf("status %d, want %d (body %.200q)", code, tc.wantCode, body)
			}
			if tc.wantLoc != "" && h.Get("Location") != tc.wantLoc {
				t.Errorf("Location %q, want %q", h.Get("Location"), tc.wantLoc)
			}
		})
	}
}

func TestNotReadyUntilSeeded(t *testing.T) {
	srv, err := New(defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, p := range []string{"/healthz", "/login"} {
		if code, _, _ := get(t, client(t), ts.URL+p); code != http.StatusServiceUnavailable {
			t.Errorf("%s before ready: status %d, want 503", p, code)
		}
	}
	srv.SetReady(&fakeStore{pingErr: errors.New("connection refused")})
	if code, body, _ := get(t, client(t), ts.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
		t.Errorf("healthz with the database down: status %d body %q, want 503 naming the cause", code, body)
	}
	srv.SetReady(&fakeStore{})
	if code, _, _ := get(t, client(t), ts.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz when ready: status %d, want 200", code)
	}
}

// fakeStore answers Ping and fails everything else with err.
type fakeStore struct {
	pingErr error
	err     error
}

func (f *fakeStore) Ping(context.Context) error { return f.pingErr }
func (f *fakeStore) UserByLogin(context.Context, string) (store.User, error) {
	return store.User{}, f.err
}
func (f *fakeStore) UserByID(context.Context, int64) (store.User, error) { return store.User{}, f.err }
func (f *fakeStore) Projects(context.Context, int) ([]store.Project, error) {
	return nil, f.err
}
func (f *fakeStore) Project(context.Context, int64) (store.Project, error) {
	return store.Project{}, f.err
}
func (f *fakeStore) RecentTickets(context.Context, int64, int) ([]store.Ticket, error) {
	return nil, f.err
}
func (f *fakeStore) Ticket(context.Context, int64) (store.Ticket, error) {
	return store.Ticket{}, f.err
}
func (f *fakeStore) CreateTicket(context.Context, store.NewTicket) (int64, error) {
	return 0, f.err
}

func TestDatabaseErrorIs500(t *testing.T) {
	srv, err := New(defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv.SetReady(&fakeStore{err: errors.New("disk I/O error")})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c := client(t)
	_, body, _ := get(t, c, ts.URL+"/login")
	code, _, _ := post(t, c, ts.URL+"/login", url.Values{"username": {"user1"}, "password": {"x"}, "authenticity_token": {token(t, body)}})
	if code != http.StatusInternalServerError {
		t.Errorf("login with a failing database: status %d, want 500", code)
	}
}

// blockingStore holds every project read until released, so the test can
// fill the client slots deterministically.
type blockingStore struct {
	fakeStore
	entered chan struct{}
	release chan struct{}
}

func (b *blockingStore) UserByID(context.Context, int64) (store.User, error) {
	b.entered <- struct{}{}
	<-b.release
	return store.User{}, store.ErrNotFound
}

func TestQueueTimeoutAndFull(t *testing.T) {
	tests := []struct {
		desc     string
		maxQueue int
		timeout  time.Duration
		wantBody string
		reason   string
	}{
		{"a queued request times out with 503 (Apache at MaxClients)", 0, 50 * time.Millisecond, "timed out", "timeout"},
		{"a request beyond the queue bound is refused at once", 1, time.Hour, "queue is full", "full"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			srv, err := New(Config{MaxClients: 1, Pool: 1, MaxQueue: tc.maxQueue, QueueTimeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			bs := &blockingStore{entered: make(chan struct{}, 4), release: make(chan struct{})}
			srv.SetReady(bs)
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			c := client(t)
			c.Jar.SetCookies(mustURL(t, ts.URL), []*http.Cookie{{Name: CookieSession, Value: srv.sign.session(1, time.Now().Add(time.Hour)), Path: "/"}})

			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // holds the only slot
				defer wg.Done()
				resp, err := c.Get(ts.URL + "/projects/1")
				if err == nil {
					resp.Body.Close()
				}
			}()
			<-bs.entered
			if tc.maxQueue == 1 { // one waits in the queue, the next is refused
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := c.Get(ts.URL + "/login")
					if err == nil {
						resp.Body.Close()
					}
				}()
				waitFor(t, func() bool { return srv.gate.queued() == 1 })
			}
			code, body, _ := get(t, c, ts.URL+"/login")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, tc.wantBody) {
				t.Errorf("status %d body %q, want 503 containing %q", code, body, tc.wantBody)
			}
			close(bs.release)
			wg.Wait()
			_, metrics, _ := get(t, client(t), ts.URL+"/metrics")
			if want := `ticketd_queue_rejected_total{reason="` + tc.reason + `"} 1`; !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %q", want)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPoolBoundsConcurrentWork(t *testing.T) {
	// With 4 client slots but a pool of 2, only two requests do
	// application work at once; the other two hold a slot and wait.
	srv, err := New(Config{MaxClients: 4, Pool: 2, QueueTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bs := &blockingStore{entered: make(chan struct{}, 8), release: make(chan struct{})}
	srv.SetReady(bs)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c := client(t)
	c.Jar.SetCookies(mustURL(t, ts.URL), []*http.Cookie{{Name: CookieSession, Value: srv.sign.session(1, time.Now().Add(time.Hour)), Path: "/"}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(ts.URL + "/projects/1")
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	<-bs.entered
	<-bs.entered
	waitFor(t, func() bool { return srv.gate.busy() == 4 })
	if got := srv.pool.busy(); got != 2 {
		t.Errorf("workers busy = %d, want 2", got)
	}
	select {
	case <-bs.entered:
		t.Errorf("a third request reached the store with a pool of 2")
	default:
	}
	close(bs.release)
	wg.Wait()
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		desc string
		cfg  Config
		want string
	}{
		{"no client slots", Config{MaxClients: 0, Pool: 1, QueueTimeout: time.Second}, "max clients"},
		{"no workers", Config{MaxClients: 1, Pool: 0, QueueTimeout: time.Second}, "pool"},
		{"no queue timeout", Config{MaxClients: 1, Pool: 1}, "queue timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

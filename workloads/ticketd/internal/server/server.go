// Package server is ticketd's HTTP side: the four operations of seed 000's
// JMeter plan (login page, login, project page, create ticket), the client
// cap with its queue and 60 s timeout (Apache MaxClients), the worker pool
// (PassengerMaxPoolSize), /healthz and /metrics.
package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ctrperf/workloads/ticketd/internal/store"
)

// Store is what the handlers need from the database.
type Store interface {
	Ping(ctx context.Context) error
	UserByLogin(ctx context.Context, login string) (store.User, error)
	UserByID(ctx context.Context, id int64) (store.User, error)
	Projects(ctx context.Context, limit int) ([]store.Project, error)
	Project(ctx context.Context, id int64) (store.Project, error)
	RecentTickets(ctx context.Context, projectID int64, n int) ([]store.Ticket, error)
	Ticket(ctx context.Context, id int64) (store.Ticket, error)
	CreateTicket(ctx context.Context, t store.NewTicket) (int64, error)
}

// Cookie names.
const (
	CookieSession = "ticketd_session"
	CookieNonce   = "ticketd_nonce"
)

// RecentTicketCount is how many tickets the project page shows.
const RecentTicketCount = 25

// Config is the server's knobs.
type Config struct {
	MaxClients   int           // concurrent requests (MaxClients)
	MaxQueue     int           // waiting requests beyond which new ones are refused at once; 0: unbounded
	QueueTimeout time.Duration // longest wait for a slot before 503
	Pool         int           // workers doing application work at once
	SessionTTL   time.Duration
	Logger       *log.Logger // nil: no request errors logged
}

// Server serves ticketd.
type Server struct {
	cfg     Config
	store   Store // set once by SetReady, read only after ready is true
	gate    *gate
	pool    *pool
	metrics *metrics
	sign    *signer
	ready   atomic.Bool
	mux     *http.ServeMux
}

// New builds a server. It is not ready (healthz 503, operations 503) until
// SetReady hands it the seeded store, so it can listen while the database
// is still being reached and seeded.
func New(cfg Config) (*Server, error) {
	if cfg.MaxClients < 1 {
		return nil, fmt.Errorf("max clients %d: must be at least 1", cfg.MaxClients)
	}
	if cfg.Pool < 1 {
		return nil, fmt.Errorf("pool %d: must be at least 1", cfg.Pool)
	}
	if cfg.QueueTimeout <= 0 {
		return nil, fmt.Errorf("queue timeout %s: must be positive", cfg.QueueTimeout)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 24 * time.Hour
	}
	sg, err := newSigner()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, sign: sg,
		gate: newGate(cfg.MaxClients, cfg.MaxQueue, cfg.QueueTimeout),
		pool: newPool(cfg.Pool)}
	s.metrics = newMetrics(s.gate, s.pool)
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.route("GET /login", "login_page", s.loginPage)
	s.route("POST /login", "login", s.login)
	s.route("GET /my/page", "my_page", s.myPage)
	s.route("GET /projects/{id}", "project_page", s.projectPage)
	s.route("POST /projects/{id}/tickets", "create_ticket", s.createTicket)
	s.route("GET /tickets/{id}", "ticket_page", s.ticketPage)
	s.route("POST /logout", "logout", s.logout)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusFound)
	})
	return s, nil
}

// ObserveDB is the callback for the store's query timings.
func (s *Server) ObserveDB(op string, d time.Duration) { s.metrics.observeDB(op, d) }

// SetReady hands over the seeded store: healthz answers and operations are
// served from now on. The atomic store of ready publishes st to handlers.
func (s *Server) SetReady(st Store) {
	s.store = st
	s.ready.Store(true)
}

// Handler is the HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// route wraps an operation in the gate (client slot, queue, timeout), the
// worker pool and the metrics.
func (s *Server) route(pattern, name string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
			s.metrics.duration.WithLabelValues(name).Observe(time.Since(t0).Seconds())
		}()
		if !s.ready.Load() {
			http.Error(sw, "ticketd is starting (seeding)", http.StatusServiceUnavailable)
			return
		}
		release, waited, err := s.gate.acquire(r.Context())
		s.metrics.queueWait.Observe(waited.Seconds())
		switch {
		case errors.Is(err, ErrQueueTimeout):
			s.metrics.queueRejected.WithLabelValues("timeout").Inc()
			sw.Header().Set("Retry-After", "1")
			http.Error(sw, fmt.Sprintf("%v after %s (max clients %d)", err, s.cfg.QueueTimeout, s.cfg.MaxClients), http.StatusServiceUnavailable)
			return
		case errors.Is(err, ErrQueueFull):
			s.metrics.queueRejected.WithLabelValues("full").Inc()
			http.Error(sw, fmt.Sprintf("%v (%d waiting)", err, s.cfg.MaxQueue), http.StatusServiceUnavailable)
			return
		case err != nil: // client went away
			return
		}
		defer release()
		done, err := s.pool.acquire(r.Context())
		if err != nil {
			return
		}
		defer done()
		h(sw, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready: seeding", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		http.Error(w, "not ready: database: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, what+": not found", http.StatusNotFound)
		return
	}
	if s.cfg.Logger != nil {
		s.cfg.Logger.Printf("%s %s: %s: %v", r.Method, r.URL.Path, what, err)
	}
	http.Error(w, what+": internal error", http.StatusInternalServerError)
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, t *template.Template, data any) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		s.fail(w, r, "render", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	n, err := nonce()
	if err != nil {
		s.fail(w, r, "login page", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieNonce, Value: n, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	s.render(w, r, http.StatusOK, loginTmpl, pageData{Title: "Sign in", Token: s.sign.formToken(n), Filler: filler})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "login: bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(CookieNonce)
	if err != nil || !s.sign.checkFormToken(c.Value, r.PostForm.Get("authenticity_token")) {
		http.Error(w, "login: invalid authenticity token (GET /login first and keep its cookie)", http.StatusUnprocessableEntity)
		return
	}
	login := r.PostForm.Get("username")
	u, err := s.store.UserByLogin(r.Context(), login)
	if errors.Is(err, store.ErrNotFound) {
		s.render(w, r, http.StatusUnauthorized, loginTmpl, pageData{Title: "Sign in", Error: "Invalid user or password", Token: s.sign.formToken(c.Value), Filler: filler})
		return
	}
	if err != nil {
		s.fail(w, r, "login", err)
		return
	}
	if !CheckPassword(r.PostForm.Get("password"), u.Salt, u.Hash, u.Iterations) {
		s.render(w, r, http.StatusUnauthorized, loginTmpl, pageData{Title: "Sign in", Error: "Invalid user or password", Token: s.sign.formToken(c.Value), Filler: filler})
		return
	}
	exp := time.Now().Add(s.cfg.SessionTTL)
	http.SetCookie(w, &http.Cookie{Name: CookieSession, Value: s.sign.session(u.ID, exp), Path: "/", Expires: exp, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.SetCookie(w, &http.Cookie{Name: CookieNonce, Value: "", Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/my/page", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieSession, Value: "", Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// session returns the logged-in user and the session cookie value, or
// redirects to the login page.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (store.User, string, bool) {
	c, err := r.Cookie(CookieSession)
	if err == nil {
		if uid, ok := s.sign.checkSession(c.Value, time.Now()); ok {
			u, err := s.store.UserByID(r.Context(), uid)
			if err == nil {
				return u, c.Value, true
			}
			if !errors.Is(err, store.ErrNotFound) {
				s.fail(w, r, "session", err)
				return store.User{}, "", false
			}
		}
	}
	http.Redirect(w, r, "/login", http.StatusFound)
	return store.User{}, "", false
}

func pathID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("id %q: want a positive integer", v)
	}
	return id, nil
}

func (s *Server) myPage(w http.ResponseWriter, r *http.Request) {
	u, _, ok := s.session(w, r)
	if !ok {
		return
	}
	ps, err := s.store.Projects(r.Context(), 20)
	if err != nil {
		s.fail(w, r, "my page", err)
		return
	}
	s.render(w, r, http.StatusOK, myTmpl, pageData{Title: "My page", User: u, Projects: ps})
}

func (s *Server) projectPage(w http.ResponseWriter, r *http.Request) {
	u, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	id, err := pathID(r)
	if err != nil {
		http.Error(w, "project: "+err.Error(), http.StatusBadRequest)
		return
	}
	p, err := s.store.Project(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Sprintf("project %d", id), err)
		return
	}
	ts, err := s.store.RecentTickets(r.Context(), id, RecentTicketCount)
	if err != nil {
		s.fail(w, r, fmt.Sprintf("project %d", id), err)
		return
	}
	s.render(w, r, http.StatusOK, projectTmpl, pageData{Title: p.Name, User: u, Project: p, Tickets: ts, Token: s.sign.formToken(sess)})
}

// Limits of a new ticket's fields.
const (
	maxSubject     = 255
	maxDescription = 64 << 10
)

func (s *Server) createTicket(w http.ResponseWriter, r *http.Request) {
	u, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	id, err := pathID(r)
	if err != nil {
		http.Error(w, "create ticket: project "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 2*maxDescription)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "create ticket: bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !s.sign.checkFormToken(sess, r.PostForm.Get("authenticity_token")) {
		http.Error(w, "create ticket: invalid authenticity token (take it from the project page)", http.StatusUnprocessableEntity)
		return
	}
	nt := store.NewTicket{ProjectID: id, AuthorID: u.ID,
		Subject: strings.TrimSpace(r.PostForm.Get("subject")), Description: r.PostForm.Get("description"),
		Priority: r.PostForm.Get("priority")}
	switch {
	case nt.Subject == "":
		http.Error(w, "create ticket: subject is empty", http.StatusUnprocessableEntity)
		return
	case len(nt.Subject) > maxSubject:
		http.Error(w, fmt.Sprintf("create ticket: subject is %d bytes, at most %d", len(nt.Subject), maxSubject), http.StatusUnprocessableEntity)
		return
	case len(nt.Description) > maxDescription:
		http.Error(w, fmt.Sprintf("create ticket: description is %d bytes, at most %d", len(nt.Description), maxDescription), http.StatusUnprocessableEntity)
		return
	}
	switch nt.Priority {
	case "", "low", "normal", "high", "urgent":
	default:
		http.Error(w, fmt.Sprintf("create ticket: priority %q: want low, normal, high or urgent", nt.Priority), http.StatusUnprocessableEntity)
		return
	}
	tid, err := s.store.CreateTicket(r.Context(), nt)
	if err != nil {
		s.fail(w, r, fmt.Sprintf("create ticket in project %d", id), err)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/tickets/%d", tid))
	s.render(w, r, http.StatusCreated, createdTmpl, pageData{Title: "Ticket created", User: u, TicketID: tid, Project: store.Project{ID: id}})
}

func (s *Server) ticketPage(w http.ResponseWriter, r *http.Request) {
	u, _, ok := s.session(w, r)
	if !ok {
		return
	}
	id, err := pathID(r)
	if err != nil {
		http.Error(w, "ticket: "+err.Error(), http.StatusBadRequest)
		return
	}
	t, err := s.store.Ticket(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Sprintf("ticket %d", id), err)
		return
	}
	s.render(w, r, http.StatusOK, ticketTmpl, pageData{Title: t.Subject, User: u, Tickets: []store.Ticket{t}})
}

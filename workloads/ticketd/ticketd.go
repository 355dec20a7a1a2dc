// Package ticketd is ctrperf's web workload: a small issue tracker that
// behaves under load like the Redmine + MySQL of seed 000 (login page,
// login, project page, create ticket), with the knobs that seed tuned: a cap
// on concurrent requests with a queue and a 60 s timeout (Apache
// MaxClients) and a worker / DB-connection pool (PassengerMaxPoolSize).
//
// It stores data in SQLite (embedded, a file under --data-dir) or MariaDB
// (--db mysql://...), seeds its own users, projects and tickets at start-up,
// and answers /healthz only once seeding is done and the database answers.
//
// It ships inside the ctrperf binary as the hidden command `ctrperf
// __ticketd` (images and bare-metal runs copy or run ctrperf itself, so they
// need neither the source tree nor a Go toolchain); cmd/ticketd is the same
// program on its own.
//
// Exit status (Main): 0 after a clean shutdown (SIGTERM/SIGINT), 1 on a
// runtime failure (database unreachable, data directory not writable, port
// in use), 2 on bad flags.
package ticketd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"ctrperf/workloads/ticketd/internal/server"
	"ctrperf/workloads/ticketd/internal/store"
)

// usageError marks bad flags (exit status 2).
type usageError struct{ error }

// Main runs ticketd with its command-line arguments (without the program
// name) until SIGTERM or SIGINT and returns the exit status.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, args, os.Stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "ticketd:", err)
	if IsUsage(err) {
		return 2
	}
	return 1
}

// IsUsage reports whether err is about the command line (exit status 2).
func IsUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue)
}

// options are the command-line knobs.
type options struct {
	listen        string
	dataDir       string
	db            string
	dbWait        time.Duration
	maxClients    int
	maxQueue      int
	queueTimeout  time.Duration
	pool          int
	hashCost      int
	seedUsers     int
	seedProjects  int
	seedTickets   int
	seedPassword  string
	flushAtCommit int
	sqliteJournal string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ticketd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8080", "address to listen on")
	fs.StringVar(&o.dataDir, "data-dir", "ticketd-data", "directory for the SQLite database")
	fs.StringVar(&o.db, "db", "", "database: sqlite:PATH (relative to --data-dir; default sqlite:ticketd.db) or mysql://user:pass@host:port/db or mysql://user:pass@unix(/path.sock)/db")
	fs.DurationVar(&o.dbWait, "db-wait", 60*time.Second, "how long to retry an unreachable database before giving up")
	fs.IntVar(&o.maxClients, "max-clients", 150, "requests served at once (Apache MaxClients); the rest queue")
	fs.IntVar(&o.maxQueue, "max-queue", 4096, "queued requests beyond which new ones get 503 at once (0: unbounded)")
	fs.DurationVar(&o.queueTimeout, "queue-timeout", 60*time.Second, "longest wait in the queue before 503")
	fs.IntVar(&o.pool, "pool", 6, "workers and DB connections (PassengerMaxPoolSize)")
	fs.IntVar(&o.hashCost, "hash-cost", 14, "password hash cost: log2 of PBKDF2-SHA256 iterations (like bcrypt's cost)")
	fs.IntVar(&o.seedUsers, "seed-users", 100, "users to seed (user1 … userN)")
	fs.IntVar(&o.seedProjects, "seed-projects", 10, "projects to seed (ids 1 … N)")
	fs.IntVar(&o.seedTickets, "seed-tickets", 200, "tickets to seed per project")
	fs.StringVar(&o.seedPassword, "seed-password", "ticketd", "password of every seeded user")
	fs.IntVar(&o.flushAtCommit, "flush-at-commit", 1, "SQLite durability like innodb_flush_log_at_trx_commit: 1 sync every commit (synchronous=FULL), 2 sync at checkpoints (NORMAL), 0 never (OFF); for MariaDB set it on the server")
	fs.StringVar(&o.sqliteJournal, "sqlite-journal", "WAL", "SQLite journal mode: WAL or DELETE")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := o.validate(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

func (o options) validate() error {
	var errs []error
	rng := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("--%s %d: out of range [%d, %d]", name, v, lo, hi))
		}
	}
	rng("max-clients", o.maxClients, 1, 100000)
	rng("max-queue", o.maxQueue, 0, 1000000)
	rng("pool", o.pool, 1, 10000)
	rng("hash-cost", o.hashCost, 4, 24)
	rng("seed-users", o.seedUsers, 1, 1000000)
	rng("seed-projects", o.seedProjects, 1, 100000)
	rng("seed-tickets", o.seedTickets, 0, 100000)
	rng("flush-at-commit", o.flushAtCommit, 0, 2)
	if o.queueTimeout < time.Millisecond || o.queueTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("--queue-timeout %s: out of range [1ms, 1h]", o.queueTimeout))
	}
	if o.dbWait < 0 || o.dbWait > time.Hour {
		errs = append(errs, fmt.Errorf("--db-wait %s: out of range [0, 1h]", o.dbWait))
	}
	if j := strings.ToUpper(o.sqliteJournal); j != "WAL" && j != "DELETE" {
		errs = append(errs, fmt.Errorf("--sqlite-journal %q: want WAL or DELETE", o.sqliteJournal))
	}
	if o.seedPassword == "" {
		errs = append(errs, errors.New("--seed-password: empty"))
	}
	if o.pool > o.maxClients {
		errs = append(errs, fmt.Errorf("--pool %d is larger than --max-clients %d: the extra workers could never be busy", o.pool, o.maxClients))
	}
	if _, _, _, err := store.Location(o.db, o.dataDir, store.Options{}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func sqliteSync(flush int) string {
	switch flush {
	case 0:
		return "OFF"
	case 2:
		return "NORMAL"
	default:
		return "FULL"
	}
}

// Run is the whole program; it returns when ctx is cancelled (clean exit) or
// on the first fatal error. Log lines and flag errors go to stderr.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := log.New(stderr, "ticketd: ", log.LstdFlags|log.LUTC)

	// Listen before the slow start-up so a port in use fails at once, and
	// so /healthz answers "not ready" (not "refused") while seeding.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	srv, err := server.New(server.Config{MaxClients: o.maxClients, MaxQueue: o.maxQueue, QueueTimeout: o.queueTimeout,
		Pool: o.pool, Logger: logger})
	if err != nil {
		ln.Close()
		return usageError{err}
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}
	logger.Printf("listening on %s (max clients %d, queue timeout %s, pool %d, hash cost %d)",
		ln.Addr(), o.maxClients, o.queueTimeout, o.pool, o.hashCost)

	db, err := store.Open(ctx, o.db, o.dataDir, store.Options{Pool: o.pool, SQLiteSync: sqliteSync(o.flushAtCommit), SQLiteJournal: o.sqliteJournal}, o.dbWait)
	if err != nil {
		shutdown()
		return err
	}
	defer db.Close()
	db.Observe(srv.ObserveDB)

	t0 := time.Now()
	salt, err := server.NewSalt()
	if err != nil {
		shutdown()
		return err
	}
	iters := server.Iterations(o.hashCost)
	hash, err := server.HashPassword(o.seedPassword, salt, iters)
	if err != nil {
		shutdown()
		return err
	}
	res, err := db.Seed(ctx, store.SeedSpec{Users: o.seedUsers, Projects: o.seedProjects, Tickets: o.seedTickets,
		Salt: salt, Hash: hash, Iterations: iters})
	if err != nil {
		shutdown()
		return err
	}
	logger.Printf("database %s seeded in %s: added %d users, %d projects, %d tickets (spec %d/%d/%d per project)",
		db.Where(), time.Since(t0).Round(time.Millisecond), res.UsersAdded, res.ProjectsAdded, res.TicketsAdded,
		o.seedUsers, o.seedProjects, o.seedTickets)
	srv.SetReady(db)
	logger.Printf("ready")

	select {
	case <-ctx.Done():
		logger.Printf("shutting down")
		shutdown()
		return nil
	case err := <-serveErr:
		return fmt.Errorf("serving on %s: %w", o.listen, err)
	}
}

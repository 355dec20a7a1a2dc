// Package store is ticketd's database layer: one SQL implementation over
// database/sql that speaks two dialects, SQLite (modernc.org/sqlite, pure Go,
// so the binary stays static) and MariaDB/MySQL (go-sql-driver/mysql).
//
// The point of ticketd is to load a database the way Redmine loaded MySQL in
// seed 000: reads of a project page and a small transactional insert that has
// to reach the disk. So the write path is a real transaction with a commit
// that syncs (SQLite synchronous=FULL in WAL mode, InnoDB commit with the
// server's innodb_flush_log_at_trx_commit), not a buffered append.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("not found")

// User is a seeded account.
type User struct {
	ID         int64
	Login      string
	Name       string
	Salt       []byte
	Hash       []byte
	Iterations int
}

// Project is a project row with its ticket counter.
type Project struct {
	ID          int64
	Identifier  string
	Name        string
	Description string
	TicketCount int64
	UpdatedAt   time.Time
}

// Ticket is one issue.
type Ticket struct {
	ID          int64
	ProjectID   int64
	AuthorID    int64
	AuthorLogin string
	Subject     string
	Description string
	Status      string
	Priority    string
	CreatedAt   time.Time
}

// NewTicket is what a create request carries.
type NewTicket struct {
	ProjectID   int64
	AuthorID    int64
	Subject     string
	Description string
	Priority    string
}

// Dialect names.
const (
	DialectSQLite = "sqlite"
	DialectMySQL  = "mysql"
)

// Options tune how the store opens its database.
type Options struct {
	// Pool is the maximum number of open connections (PassengerMaxPoolSize
	// analogue: the app can only have this many queries in flight).
	Pool int
	// SQLiteSync is SQLite's synchronous pragma: FULL, NORMAL or OFF.
	SQLiteSync string
	// SQLiteJournal is SQLite's journal_mode: WAL or DELETE.
	SQLiteJournal string
}

// Store is the SQL-backed store.
type Store struct {
	db      *sql.DB
	dialect string
	where   string // printable location (no password)
	obs     func(op string, d time.Duration)
}

// Location parses a --db value into a driver name, a DSN and a printable
// location without secrets. Accepted forms:
//
//	sqlite:PATH                                   (relative to dataDir when not absolute)
//	mysql://user:pass@host:port/db
//	mysql://user:pass@unix(/run/mysqld/mysqld.sock)/db
//
// An empty value means sqlite:ticketd.db under dataDir.
func Location(db, dataDir string, o Options) (driver, dsn, printable string, err error) {
	if db == "" {
		db = "sqlite:ticketd.db"
	}
	switch {
	case strings.HasPrefix(db, "sqlite:"):
		p := strings.TrimPrefix(db, "sqlite:")
		if p == "" {
			return "", "", "", fmt.Errorf("--db %q: empty SQLite path", db)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dataDir, p)
		}
		sync := strings.ToUpper(o.SQLiteSync)
		if sync == "" {
			sync = "FULL"
		}
		journal := strings.ToUpper(o.SQLiteJournal)
		if journal == "" {
			journal = "WAL"
		}
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(30000)")
		q.Add("_pragma", "journal_mode("+journal+")")
		q.Add("_pragma", "synchronous("+sync+")")
		q.Add("_pragma", "foreign_keys(1)")
		// Write transactions take the write lock up front: with several
		// connections, deferred transactions that upgrade later deadlock
		// into SQLITE_BUSY instead of queueing on busy_timeout.
		q.Set("_txlock", "immediate")
		return DialectSQLite, "file:" + p + "?" + q.Encode(), "sqlite:" + p, nil
	case strings.HasPrefix(db, "mysql://"):
		cfg, err := parseMySQL(db)
		if err != nil {
			return "", "", "", err
		}
		pr := cfg.Clone()
		pr.Passwd = "***"
		return DialectMySQL, cfg.FormatDSN(), "mysql://" + pr.User + "@" + pr.Net + "(" + pr.Addr + ")/" + pr.DBName, nil
	default:
		return "", "", "", fmt.Errorf("--db %q: want sqlite:PATH or mysql://user:pass@host:port/db", db)
	}
}

func parseMySQL(s string) (*mysql.Config, error) {
	rest := strings.TrimPrefix(s, "mysql://")
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil, fmt.Errorf("--db %q: missing user@ (want mysql://user:pass@host:port/db)", s)
	}
	userinfo, hostdb := rest[:at], rest[at+1:]
	cfg := mysql.NewConfig()
	user, pass, _ := strings.Cut(userinfo, ":")
	if user == "" {
		return nil, fmt.Errorf("--db %q: empty user", s)
	}
	cfg.User, cfg.Passwd = user, pass
	if strings.HasPrefix(hostdb, "unix(") {
		end := strings.Index(hostdb, ")")
		if end < 0 {
			return nil, fmt.Errorf("--db %q: unterminated unix(", s)
		}
		cfg.Net, cfg.Addr = "unix", hostdb[len("unix("):end]
		hostdb = strings.TrimPrefix(hostdb[end+1:], "/")
		cfg.DBName = hostdb
	} else {
		host, db, ok := strings.Cut(hostdb, "/")
		if !ok || db == "" {
			return nil, fmt.Errorf("--db %q: missing /database", s)
		}
		if !strings.Contains(host, ":") {
			host += ":3306"
		}
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", host, db
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("--db %q: missing database name", s)
	}
	cfg.ParseTime = true
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = 60 * time.Second
	cfg.WriteTimeout = 60 * time.Second
	return cfg, nil
}

// Open opens (and for MySQL, creates) the database and its schema, retrying
// until the database answers or wait runs out. sqlite files are created.
func Open(ctx context.Context, db, dataDir string, o Options, wait time.Duration) (*Store, error) {
	driver, dsn, where, err := Location(db, dataDir, o)
	if err != nil {
		return nil, err
	}
	if driver == DialectSQLite {
		if err := checkWritable(filepath.Dir(strings.TrimPrefix(where, "sqlite:"))); err != nil {
			return nil, err
		}
	}
	if driver == DialectMySQL {
		if err := ensureMySQLDatabase(ctx, dsn, where, wait); err != nil {
			return nil, err
		}
	}
	sdb, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	pool := o.Pool
	if pool <= 0 {
		pool = 6
	}
	sdb.SetMaxOpenConns(pool)
	sdb.SetMaxIdleConns(pool)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: sdb, dialect: driver, where: where}
	if err := waitPing(ctx, sdb, where, wait); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	return s, nil
}

// checkWritable fails early with a clear message instead of a cryptic
// "unable to open database file" from the driver.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data directory %s: cannot create: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".ticketd-write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ensureMySQLDatabase connects without a database and creates it, so a
// fresh MariaDB with only a user works. Failure to create (no privilege) is
// not fatal: the database may already exist.
func ensureMySQLDatabase(ctx context.Context, dsn, where string, wait time.Duration) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("mysql DSN for %s: %w", where, err)
	}
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return fmt.Errorf("open %s: %w", where, err)
	}
	defer db.Close()
	if err := waitPing(ctx, db, where, wait); err != nil {
		return err
	}
	_, _ = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"`")
	return nil
}

func waitPing(ctx context.Context, db *sql.DB, where string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var last error
	for attempt := 0; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = db.PingContext(pctx)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("database %s: %w", where, ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("database %s not reachable after %s (%d attempts): %w", where, wait, attempt+1, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %s: %w", where, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Where is the printable location of the database.
func (s *Store) Where() string { return s.where }

// Dialect is "sqlite" or "mysql".
func (s *Store) Dialect() string { return s.dialect }

// Observe sets a callback for per-query latency (the /metrics DB histogram).
func (s *Store) Observe(f func(op string, d time.Duration)) { s.obs = f }

func (s *Store) timed(op string) func() {
	if s.obs == nil {
		return func() {}
	}
	t0 := time.Now()
	return func() { s.obs(op, time.Since(t0)) }
}

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	defer s.timed("ping")()
	return s.db.PingContext(ctx)
}

func (s *Store) migrate(ctx context.Context) error {
	var stmts []string
	switch s.dialect {
	case DialectSQLite:
		stmts = []string{
			`CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, login TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
				salt BLOB NOT NULL, hash BLOB NOT NULL, iterations INTEGER NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS projects (id INTEGER PRIMARY KEY, identifier TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
				description TEXT NOT NULL, ticket_count INTEGER NOT NULL DEFAULT 0, updated_at TIMESTAMP NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY AUTOINCREMENT, project_id INTEGER NOT NULL REFERENCES projects(id),
				author_id INTEGER NOT NULL REFERENCES users(id), subject TEXT NOT NULL, description TEXT NOT NULL,
				status TEXT NOT NULL, priority TEXT NOT NULL, seeded INTEGER NOT NULL DEFAULT 0, created_at TIMESTAMP NOT NULL)`,
			`CREATE INDEX IF NOT EXISTS tickets_project_recent ON tickets(project_id, id)`,
		}
	case DialectMySQL:
		stmts = []string{
			`CREATE TABLE IF NOT EXISTS meta (k VARCHAR(64) PRIMARY KEY, v TEXT NOT NULL) ENGINE=InnoDB`,
			`CREATE TABLE IF NOT EXISTS users (id BIGINT PRIMARY KEY, login VARCHAR(64) NOT NULL UNIQUE, name VARCHAR(255) NOT NULL,
				salt VARBINARY(64) NOT NULL, hash VARBINARY(64) NOT NULL, iterations INT NOT NULL) ENGINE=InnoDB`,
			`CREATE TABLE IF NOT EXISTS projects (id BIGINT PRIMARY KEY, identifier VARCHAR(64) NOT NULL UNIQUE, name VARCHAR(255) NOT NULL,
				description TEXT NOT NULL, ticket_count BIGINT NOT NULL DEFAULT 0, updated_at DATETIME(6) NOT NULL) ENGINE=InnoDB`,
			`CREATE TABLE IF NOT EXISTS tickets (id BIGINT AUTO_INCREMENT PRIMARY KEY, project_id BIGINT NOT NULL,
				author_id BIGINT NOT NULL, subject VARCHAR(255) NOT NULL, description TEXT NOT NULL,
				status VARCHAR(32) NOT NULL, priority VARCHAR(32) NOT NULL, seeded TINYINT NOT NULL DEFAULT 0, created_at DATETIME(6) NOT NULL,
				KEY tickets_project_recent (project_id, id),
				FOREIGN KEY (project_id) REFERENCES projects(id), FOREIGN KEY (author_id) REFERENCES users(id)) ENGINE=InnoDB`,
		}
	}
	for _, st := range stmts {
		if _, err := s.db.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("schema on %s: %w (statement %.60q)", s.where, err, st)
		}
	}
	return nil
}

// UserByLogin returns a user by login name.
func (s *Store) UserByLogin(ctx context.Context, login string) (User, error) {
	defer s.timed("user_by_login")()
	var u User
	err := s.db.QueryRowContext(ctx, `SELECT id, login, name, salt, hash, iterations FROM users WHERE login = ?`, login).
		Scan(&u.ID, &u.Login, &u.Name, &u.Salt, &u.Hash, &u.Iterations)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("user %q: %w", login, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %q on %s: %w", login, s.where, err)
	}
	return u, nil
}

// UserByID returns a user by id.
func (s *Store) UserByID(ctx context.Context, id int64) (User, error) {
	defer s.timed("user_by_id")()
	var u User
	err := s.db.QueryRowContext(ctx, `SELECT id, login, name, salt, hash, iterations FROM users WHERE id = ?`, id).
		Scan(&u.ID, &u.Login, &u.Name, &u.Salt, &u.Hash, &u.Iterations)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("user %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %d on %s: %w", id, s.where, err)
	}
	return u, nil
}

// Projects lists up to limit projects by id.
func (s *Store) Projects(ctx context.Context, limit int) ([]Project, error) {
	defer s.timed("projects")()
	rows, err := s.db.QueryContext(ctx, `SELECT id, identifier, name, description, ticket_count, updated_at FROM projects ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("projects on %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []Project
	for rows.Next() {
		var p Project
		if err := rows.Scan(&p.ID, &p.Identifier, &p.Name, &p.Description, &p.TicketCount, &p.UpdatedAt); err != nil {
			return nil, fmt.Errorf("projects on %s: %w", s.where, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Project returns one project.
func (s *Store) Project(ctx context.Context, id int64) (Project, error) {
	defer s.timed("project")()
	var p Project
	err := s.db.QueryRowContext(ctx, `SELECT id, identifier, name, description, ticket_count, updated_at FROM projects WHERE id = ?`, id).
		Scan(&p.ID, &p.Identifier, &p.Name, &p.Description, &p.TicketCount, &p.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Project{}, fmt.Errorf("project %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Project{}, fmt.Errorf("project %d on %s: %w", id, s.where, err)
	}
	return p, nil
}

// recentTicketsQuery is the project page's query: the newest n tickets of
// a project, a backward walk of the (project_id, id) index that reads n
// rows, each joined to its author.
//
// On MariaDB the walk is forced. Left to itself, MariaDB 10.11 keeps that
// plan only while the table is small: once the load has added a few
// thousand tickets to the one project the sessions write to and InnoDB
// has recalculated the table's statistics, it switches to scanning users
// first, fetching every ticket of the project through the author_id index
// and sorting them all for the 25 it shows (measured 2026-11-24 with
// EXPLAIN every 2 s during a 50 s run at 150 sessions/s: the switch came at
// 4 400 tickets, and mariadbd went from 0.3 to 1.3 CPUs and kept rising
// with the table). That switch, coming 9 to 19 s into a run at a random
// moment, was the "stall" of the web plans; TestRecentTicketsPlanOnMariaDBRoot
// checks the plan on a real server.
func recentTicketsQuery(dialect string) string {
	from := "tickets t JOIN users u"
	if dialect == DialectMySQL {
		from = "tickets t FORCE INDEX (tickets_project_recent) STRAIGHT_JOIN users u"
	}
	return `SELECT t.id, t.project_id, t.author_id, u.login, t.subject, t.description, t.status, t.priority, t.created_at
		FROM ` + from + ` ON u.id = t.author_id
		WHERE t.project_id = ? ORDER BY t.id DESC LIMIT ?`
}

// RecentTickets returns the n most recent tickets of a project, newest first.
func (s *Store) RecentTickets(ctx context.Context, projectID int64, n int) ([]Ticket, error) {
	defer s.timed("recent_tickets")()
	rows, err := s.db.QueryContext(ctx, recentTicketsQuery(s.dialect), projectID, n)
	if err != nil {
		return nil, fmt.Errorf("recent tickets of project %d on %s: %w", projectID, s.where, err)
	}
	defer rows.Close()
	var out []Ticket
	for rows.Next() {
		var t Ticket
		if err := rows.Scan(&t.ID, &t.ProjectID, &t.AuthorID, &t.AuthorLogin, &t.Subject, &t.Description, &t.Status, &t.Priority, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("recent tickets of project %d on %s: %w", projectID, s.where, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Ticket returns one ticket.
func (s *Store) Ticket(ctx context.Context, id int64) (Ticket, error) {
	defer s.timed("ticket")()
	var t Ticket
	err := s.db.QueryRowContext(ctx, `SELECT t.id, t.project_id, t.author_id, u.login, t.subject, t.description, t.status, t.priority, t.created_at
		FROM tickets t JOIN users u ON u.id = t.author_id WHERE t.id = ?`, id).
		Scan(&t.ID, &t.ProjectID, &t.AuthorID, &t.AuthorLogin, &t.Subject, &t.Description, &t.Status, &t.Priority, &t.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, fmt.Errorf("ticket %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("ticket %d on %s: %w", id, s.where, err)
	}
	return t, nil
}

// CreateTicket inserts a ticket and bumps the project's counter in one
// transaction; the commit is where the disk write (fsync / redo log flush)
// happens, which is the point of this operation.
func (s *Store) CreateTicket(ctx context.Context, nt NewTicket) (int64, error) {
	defer s.timed("create_ticket")()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("create ticket in project %d on %s: begin: %w", nt.ProjectID, s.where, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	now := time.Now().UTC()
	res, err := tx.ExecContext(ctx, `UPDATE projects SET ticket_count = ticket_count + 1, updated_at = ? WHERE id = ?`, now, nt.ProjectID)
	if err != nil {
		return 0, fmt.Errorf("create ticket in project %d on %s: update project: %w", nt.ProjectID, s.where, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, fmt.Errorf("create ticket in project %d: %w", nt.ProjectID, ErrNotFound)
	}
	prio := nt.Priority
	if prio == "" {
		prio = "normal"
	}
	res, err = tx.ExecContext(ctx, `INSERT INTO tickets (project_id, author_id, subject, description, status, priority, seeded, created_at)
		VALUES (?, ?, ?, ?, 'new', ?, 0, ?)`, nt.ProjectID, nt.AuthorID, nt.Subject, nt.Description, prio, now)
	if err != nil {
		return 0, fmt.Errorf("create ticket in project %d on %s: insert: %w", nt.ProjectID, s.where, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("create ticket in project %d on %s: id: %w", nt.ProjectID, s.where, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("create ticket in project %d on %s: commit: %w", nt.ProjectID, s.where, err)
	}
	return id, nil
}

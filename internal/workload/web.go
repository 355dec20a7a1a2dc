package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
	"ctrperf/internal/selfbin"
)

// The web workload: ticketd (workloads/ticketd), an issue tracker that
// behaves under load like seed 000's Redmine + MySQL, driven by that seed's
// JMeter session (login page → login → project page → create ticket) as an
// open-loop session generator.

// Names of the web workload's images and services.
const (
	WebImageTicketd  = "ticketd"      // FROM scratch, the static ticketd binary
	WebImageCombined = "web-combined" // Debian base + ticketd, MariaDB in the same container
	webPort          = 8080
	mariadbPort      = 3306
	// webDataDir is the data directory of every web container; the plan's
	// data placement (layer, volume, bind, tmpfs) applies to it.
	webDataDir = "/data"
	// Credentials of the MariaDB account ticketd uses; the server is the
	// run's own, reachable only from the run's containers or 127.0.0.1.
	webDBUser = "ticketd"
	webDBPass = "ticketd"
	webDBName = "ticketd"
)

// Labels of the scenario's steps, as seed 000's JMeter report named them.
const (
	LabelLoginPage    = "login page"
	LabelLogin        = "login"
	LabelProjectPage  = "project page"
	LabelCreateTicket = "create ticket"
)

func init() {
	Register(Web{})
	// Both images carry the ctrperf binary itself; ticketd is its hidden
	// command `ctrperf __ticketd`.
	ticketd := image.Program(WebImageTicketd, "ctrperf/ticketd:latest", selfbin.Ticketd)
	image.Register(image.Recipe{Name: WebImageTicketd, Derived: &ticketd})
	image.Register(image.Recipe{Name: WebImageCombined, Derived: &image.Derived{
		Name: WebImageCombined, Ref: "ctrperf/web-combined:latest", From: image.DebianBase.Name,
		Files: map[string]image.File{combinedCtrperf: {Mode: 0o755, Self: true}}}})
}

// combinedCtrperf is the ctrperf binary in the web-combined image.
const combinedCtrperf = "/usr/local/bin/ctrperf"

// Web is the "web" workload.
type Web struct {
	// HostBinary returns the path of the ctrperf binary whose hidden
	// command __ticketd serves on the host runtime; nil is selfbin.Path
	// (the running ctrperf; tests inject a fake).
	HostBinary func() (string, error)
}

var _ Workload = Web{}

// Name is "web".
func (Web) Name() string { return "web" }

// WebApp is the app knobs of a configuration.
type WebApp struct {
	DB           string        // sqlite | mariadb
	MaxClients   int           // Apache MaxClients
	MaxQueue     int           // ticketd --max-queue
	QueueTimeout time.Duration // Apache's 60 s
	Pool         int           // PassengerMaxPoolSize
	HashCost     int           // log2 PBKDF2 iterations
	SeedUsers    int
	SeedProjects int
	SeedTickets  int
	// InnoDBBufferPool is mariadbd's --innodb-buffer-pool-size ("128M").
	InnoDBBufferPool string
	// FlushAtCommit is innodb_flush_log_at_trx_commit for MariaDB, and the
	// same durability for SQLite (1 FULL, 2 NORMAL, 0 OFF).
	FlushAtCommit int
}

// WebLoad is the load knobs of a configuration.
type WebLoad struct {
	// OpenLoop: Rate is sessions per second; Search finds the highest
	// session rate that meets an SLO instead of measuring Rate or
	// Concurrency.
	OpenLoop
	Concurrency int    // closed loop instead, when Rate is 0
	User        string // login of the scenario's user
	Project     int    // project the sessions read and write
}

// Defaults are seed 000's: 2000 sessions per 60 s, MaxClients 150,
// PassengerMaxPoolSize 6, 60 s timeouts.
var (
	DefaultWebApp = WebApp{DB: "sqlite", MaxClients: 150, MaxQueue: 4096, QueueTimeout: 60 * time.Second, Pool: 6,
		HashCost: 14, SeedUsers: 100, SeedProjects: 10, SeedTickets: 200, InnoDBBufferPool: "128M", FlushAtCommit: 1}
	DefaultWebLoad = WebLoad{OpenLoop: OpenLoop{Rate: 2000.0 / 60, Timeout: load.DefaultTimeout, MaxInFlight: load.DefaultMaxInFlight,
		Seed: 1}, User: "user1", Project: 1}
)

// ParseWebApp reads and checks the app knobs.
func ParseWebApp(m map[string]any) (WebApp, error) {
	a := DefaultWebApp
	k := newKnobs("app", m)
	k.enum("db", &a.DB, "sqlite", "mariadb")
	whole(k, "max_clients", &a.MaxClients, 1, 100000)
	whole(k, "max_queue", &a.MaxQueue, 0, 1000000)
	k.duration("queue_timeout", &a.QueueTimeout, time.Millisecond, time.Hour)
	whole(k, "pool", &a.Pool, 1, 10000)
	whole(k, "hash_cost", &a.HashCost, 4, 24)
	whole(k, "seed_users", &a.SeedUsers, 1, 1000000)
	whole(k, "seed_projects", &a.SeedProjects, 1, 100000)
	whole(k, "seed_tickets", &a.SeedTickets, 0, 100000)
	k.str("innodb_buffer_pool", &a.InnoDBBufferPool, func(s string) error {
		if !validSize(s) {
			return errors.New("want a size like 128M or 1G (at least 5M)")
		}
		return nil
	})
	whole(k, "flush_at_commit", &a.FlushAtCommit, 0, 2)
	if err := k.err(); err != nil {
		return a, err
	}
	if a.Pool > a.MaxClients {
		return a, knobError("app.pool", "app.pool = %d is larger than app.max_clients = %d: the extra workers could never be busy", a.Pool, a.MaxClients)
	}
	return a, nil
}

// validSize accepts mariadbd sizes: digits with an optional K, M or G, at
// least 5 MiB (the server's own minimum for the buffer pool).
func validSize(s string) bool {
	if s == "" {
		return false
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'K', 'k':
		mult, s = 1<<10, s[:len(s)-1]
	case 'M', 'm':
		mult, s = 1<<20, s[:len(s)-1]
	case 'G', 'g':
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0 && n*mult >= 5<<20 && n*mult <= 1<<40
}

// ParseWebLoad reads and checks the load knobs.
func ParseWebLoad(m map[string]any) (WebLoad, error) {
	l := DefaultWebLoad
	k := newKnobs("load", m)
	k.openLoop(&l.OpenLoop)
	whole(k, "concurrency", &l.Concurrency, 0, 100000)
	k.str("user", &l.User, func(s string) error {
		if s == "" || strings.ContainsAny(s, "{}") {
			return errors.New("want a login name such as user1")
		}
		return nil
	})
	whole(k, "project", &l.Project, 1, 100000)
	if err := k.err(); err != nil {
		return l, err
	}
	if l.Search != nil {
		if err := searchConflicts(m, l.Search, "rate", "concurrency"); err != nil {
			return l, err
		}
		l.Rate, l.Concurrency = 0, 0 // the search chooses the rate
		return l, nil
	}
	if _, hasC := m["concurrency"]; hasC && l.Concurrency > 0 {
		if _, hasR := m["rate"]; hasR && l.Rate > 0 {
			return l, fmt.Errorf("load: rate %g and concurrency %d both set; choose open loop (rate) or closed loop (concurrency)", l.Rate, l.Concurrency)
		}
		l.Rate = 0
	}
	if l.Rate == 0 && l.Concurrency == 0 {
		return l, errors.New("load: rate 0 and no concurrency: nothing would be sent")
	}
	return l, l.checkLoop()
}

// Decode checks topology, app and load knobs.
func (Web) Decode(c Knobs) (any, any, error) {
	var errs []error
	app, err := ParseWebApp(c.App)
	if err != nil {
		errs = append(errs, err)
	}
	ld, err := ParseWebLoad(c.Load)
	if err != nil {
		errs = append(errs, err)
	}
	switch c.Topology {
	case "", "combined":
	case "split":
		if app.DB != "mariadb" {
			errs = append(errs, fmt.Errorf("topology split puts the database in its own container: it needs app.db = mariadb, not %q", app.DB))
		}
	default:
		errs = append(errs, fmt.Errorf("topology %q: want combined or split", c.Topology))
	}
	if err == nil && app.SeedProjects > 0 && ld.Project > app.SeedProjects {
		errs = append(errs, knobError("load.project", "load.project = %d but only %d projects are seeded (app.seed_projects)", ld.Project, app.SeedProjects))
	}
	if u := ld.User; strings.HasPrefix(u, "user") {
		if n, err := strconv.Atoi(strings.TrimPrefix(u, "user")); err == nil && (n < 1 || n > app.SeedUsers) {
			errs = append(errs, knobError("load.user", "load.user = %q but only user1 … user%d are seeded (app.seed_users)", u, app.SeedUsers))
		}
	}
	return app, ld, errors.Join(errs...)
}

// loopbackOnly says whether the services share the host's network, where
// they must not listen on the machine's real interfaces.
func loopbackOnly(c Config) bool {
	return c.Runtime.Traits().Processes || c.Network == engine.NetworkHost
}

// ticketdArgs are ticketd's flags for app knobs and a database URL.
func ticketdArgs(c Config, a WebApp, db string) []string { return ticketdArgsFor("app", c, a, db) }

// ticketdArgsFor are the flags of a ticketd deployed as service svc.
func ticketdArgsFor(svc string, c Config, a WebApp, db string) []string {
	host := ""
	if loopbackOnly(c) {
		host = "{{listen:" + svc + "}}" // loopback, or the address a load host elsewhere dials
	}
	return []string{
		"--listen", fmt.Sprintf("%s:{{port:%s:%d}}", host, svc, webPort),
		"--data-dir", "{{data:" + svc + "}}",
		"--db", db,
		"--db-wait", "120s",
		"--max-clients", strconv.Itoa(a.MaxClients),
		"--max-queue", strconv.Itoa(a.MaxQueue),
		"--queue-timeout", a.QueueTimeout.String(),
		"--pool", strconv.Itoa(a.Pool),
		"--hash-cost", strconv.Itoa(a.HashCost),
		"--seed-users", strconv.Itoa(a.SeedUsers),
		"--seed-projects", strconv.Itoa(a.SeedProjects),
		"--seed-tickets", strconv.Itoa(a.SeedTickets),
		"--flush-at-commit", strconv.Itoa(a.FlushAtCommit),
	}
}

// mariadbArgs are the server settings the seed tuned, on mariadbd's command
// line so every placement (host, split, combined) gets the same.
func mariadbArgs(a WebApp) []string {
	return []string{
		"--innodb-buffer-pool-size=" + a.InnoDBBufferPool,
		"--innodb-flush-log-at-trx-commit=" + strconv.Itoa(a.FlushAtCommit),
		// Enough for ticketd's pool plus the health checks.
		"--max-connections=" + strconv.Itoa(a.Pool+50),
	}
}

// mariadbScript runs MariaDB with its data under a directory of the run:
// it initialises the data directory once (so a volume that survives a
// container keeps its data), creates ticketd's account with --init-file,
// and then either execs mariadbd ("db") or runs mariadbd and ticketd side
// by side ("combined", one container as in seed 000's test 1), forwarding
// SIGTERM to both so that InnoDB shuts down cleanly.
//
//	sh -c SCRIPT web-db MODE DIR [mariadbd args...] -- [ticketd argv...]
const mariadbScript = `set -eu
PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
mode=$1; D=$2; shift 2
margs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do margs="$margs $1"; shift; done
[ $# -gt 0 ] && shift
mkdir -p "$D"
if [ ! -d "$D/mysql/mysql" ]; then
  if ! mariadb-install-db --no-defaults --user=root --datadir="$D/mysql" --auth-root-authentication-method=normal --skip-test-db >"$D/install.log" 2>&1; then
    echo "web: mariadb-install-db failed:" >&2; cat "$D/install.log" >&2; exit 1
  fi
fi
cat >"$D/init.sql" <<'EOF'
CREATE DATABASE IF NOT EXISTS ` + webDBName + `;
CREATE USER IF NOT EXISTS '` + webDBUser + `'@'%' IDENTIFIED BY '` + webDBPass + `';
CREATE USER IF NOT EXISTS '` + webDBUser + `'@'localhost' IDENTIFIED BY '` + webDBPass + `';
GRANT ALL ON ` + webDBName + `.* TO '` + webDBUser + `'@'%';
GRANT ALL ON ` + webDBName + `.* TO '` + webDBUser + `'@'localhost';
EOF
if [ "$mode" = db ]; then
  exec mariadbd --no-defaults --user=root --datadir="$D/mysql" --socket="$D/mysqld.sock" --pid-file="$D/mysqld.pid" --init-file="$D/init.sql" $margs
fi
mariadbd --no-defaults --user=root --datadir="$D/mysql" --socket="$D/mysqld.sock" --pid-file="$D/mysqld.pid" --init-file="$D/init.sql" --skip-networking $margs &
M=$!
"$@" &
T=$!
trap 'kill -TERM $T 2>/dev/null || true' TERM INT
rc=0
wait $T || rc=$?
while kill -0 $T 2>/dev/null; do rc=0; wait $T || rc=$?; done
kill -TERM $M 2>/dev/null || true
wait $M 2>/dev/null || true
exit $rc
`

func shCommand(mode, dir string, margs, argv []string) []string {
	cmd := []string{"/bin/sh", "-c", mariadbScript, "web-db", mode, dir}
	cmd = append(cmd, margs...)
	cmd = append(cmd, "--")
	return append(cmd, argv...)
}

// Services returns what to deploy:
//
//	sqlite, any runtime:        app (ticketd; FROM scratch in Docker)
//	mariadb, combined, Docker:  app (web-combined: mariadbd + ticketd in one container)
//	mariadb, split, Docker:     app (ticketd) + db (mariadbd from the Debian base)
//	mariadb, host:              app (ticketd) + db (the host's mariadbd, own datadir)
func (w Web) Services(c Config) ([]engine.Service, error) {
	a := c.App.(WebApp)
	ready := &engine.ReadyCheck{Port: webPort, HTTPPath: "/healthz", Timeout: 3 * time.Minute}
	app := engine.Service{Name: "app", Ports: []int{webPort}, DataDir: webDataDir, Resources: c.Resources, Ready: ready,
		Image: image.Resolve(WebImageTicketd)}
	var hostBin string
	if c.Runtime.Traits().Processes {
		find := w.HostBinary
		if find == nil {
			find = selfbin.Path
		}
		var err error
		if hostBin, err = find(); err != nil {
			return nil, fmt.Errorf("web on the host: ticketd (ctrperf %s): %w", selfbin.Ticketd, err)
		}
	}
	withHost := func(s engine.Service) engine.Service {
		if hostBin != "" {
			s.HostCommand = append([]string{hostBin, selfbin.Ticketd}, s.Command...)
		}
		return s
	}

	if a.DB == "sqlite" {
		app.Command = ticketdArgs(c, a, "sqlite:ticketd.db")
		return []engine.Service{withHost(app)}, nil
	}
	if err := hostTools("web", c, "mariadbd", "mariadb-install-db"); err != nil {
		return nil, err
	}
	margs := mariadbArgs(a)
	bind := "0.0.0.0" // the run's bridge network
	if loopbackOnly(c) {
		bind = "127.0.0.1"
	}
	dbArgs := append(margs, "--bind-address="+bind, fmt.Sprintf("--port={{port:db:%d}}", mariadbPort))
	if c.Runtime.Traits().ClusterNetwork {
		// A cluster need not resolve pod addresses back to names (the
		// lab has no DNS add-on): mariadbd would wait out the resolver's
		// timeout on every connection, longer than ticketd waits for the
		// handshake. ticketd's account is ticketd@'%', which needs no
		// name.
		dbArgs = append(dbArgs, "--skip-name-resolve")
	}
	dbSvc := engine.Service{Name: "db", Image: image.Resolve(image.DebianBase.Name), Ports: []int{mariadbPort},
		DataDir: webDataDir, Resources: c.Resources, Ready: &engine.ReadyCheck{Port: mariadbPort, Timeout: 3 * time.Minute},
		Command: shCommand("db", "{{data:db}}", dbArgs, nil)}
	if c.Topology == "split" || c.Runtime.Traits().Processes {
		app.Command = ticketdArgs(c, a, fmt.Sprintf("mysql://%s:%s@{{addr:db:%d}}/%s", webDBUser, webDBPass, mariadbPort, webDBName))
		return []engine.Service{withHost(app), dbSvc}, nil
	}
	// Combined: one container; ticketd reaches MariaDB over its unix socket.
	app.Image = image.Resolve(WebImageCombined)
	dbDir := "{{data:app}}/mariadb"
	argv := append([]string{combinedCtrperf, selfbin.Ticketd},
		ticketdArgs(c, a, fmt.Sprintf("mysql://%s:%s@unix(%s/mysqld.sock)/%s", webDBUser, webDBPass, dbDir, webDBName))...)
	app.Command = shCommand("combined", dbDir, margs, argv)
	return []engine.Service{app}, nil
}

// WebScenario is seed 000's JMeter session against ticketd: each session
// is a new user that opens the login page, logs in with the token of that
// page (cookies kept), opens a project and creates a ticket with the
// project page's token.
func WebScenario(user string, project int) *load.Scenario {
	no := false
	tok := `name="authenticity_token" value="([^"]+)"`
	proj := "/projects/" + strconv.Itoa(project)
	return &load.Scenario{
		Name:    "ticketd",
		Headers: map[string]string{"Accept": "text/html"},
		Steps: []load.Step{
			{Label: LabelLoginPage, Method: http.MethodGet, Path: "/login", Expect: http.StatusOK, Extract: map[string]string{"login_token": tok}},
			// The redirect to "my page" is not followed, so this step
			// measures the password check and nothing else.
			{Label: LabelLogin, Method: http.MethodPost, Path: "/login", Expect: http.StatusSeeOther, FollowRedirects: &no,
				Form: map[string]string{"username": user, "password": "ticketd", "authenticity_token": "{{login_token}}"}},
			{Label: LabelProjectPage, Method: http.MethodGet, Path: proj, Expect: http.StatusOK, Extract: map[string]string{"ticket_token": tok}},
			{Label: LabelCreateTicket, Method: http.MethodPost, Path: proj + "/tickets", Expect: http.StatusCreated, FollowRedirects: &no,
				Form: map[string]string{"subject": "Load ticket {{session}}", "priority": "normal",
					"description":        "Created by ctrperf session {{session}} (virtual user {{vu}}); the seed's JMeter plan created one ticket per session.",
					"authenticity_token": "{{ticket_token}}"}},
		},
	}
}

// Drive runs the scenario open loop (or closed loop with load.concurrency)
// against the app's endpoint, through the target's dialer; with
// load.search, one window per step of a capacity search.
func (w Web) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	if env.Target == nil {
		return nil, errors.New("web: no target")
	}
	ld := env.Config.Load.(WebLoad)
	ep, err := env.Target.Endpoint("app", webPort)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if ld.Search != nil {
		return RunSearch(ctx, env, ld.Search, func(ctx context.Context, rate float64, started func()) (*results.Measurement, error) {
			l := ld
			l.Rate, l.Concurrency = rate, 0
			return webWindow(ctx, env, ep.Addr, l, started)
		})
	}
	return webWindow(ctx, env, ep.Addr, ld, env.Started)
}

// webWindow drives one window (warm-up + duration) with the load ld.
func webWindow(ctx context.Context, env Env, addr string, ld WebLoad, started func()) (*results.Measurement, error) {
	dial := load.Dialer(env.Target.Dialer())
	drv, err := load.NewHTTP(load.HTTPConfig{BaseURL: "http://" + addr, Scenario: WebScenario(ld.User, ld.Project), Dial: dial, Seed: ld.Seed})
	if err != nil {
		return nil, fmt.Errorf("web: scenario: %w", err)
	}
	p := ld.profile(env, started)
	p.Concurrency = ld.Concurrency
	before := scrapeQueue(ctx, dial, addr)
	m, err := load.Run(ctx, drv, p)
	if err != nil {
		return m, fmt.Errorf("web: load against %s: %w", addr, err)
	}
	// The server's own view of refusals (queue timeouts, a full queue)
	// tells a 503 of MaxClients from one of a broken database.
	if after := scrapeQueue(ctx, dial, addr); after != nil && before != nil {
		if m.Metrics == nil {
			m.Metrics = map[string]float64{}
		}
		for k, v := range after {
			m.Metrics[k] = v - before[k]
			m.DeclareMerge(k, results.MergeTarget)
		}
	}
	return m, nil
}

// scrapeQueue reads ticketd's refusal counters from /metrics; nil when it
// cannot (the measurement stands without them).
func scrapeQueue(ctx context.Context, dial load.Dialer, addr string) map[string]float64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) { return dial(ctx, network, a) }}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	return parseQueueMetrics(resp.Body)
}

// parseQueueMetrics picks ticketd_queue_rejected_total{reason="X"} out of
// the Prometheus text format as server_queue_X.
func parseQueueMetrics(r io.Reader) map[string]float64 {
	out := map[string]float64{"server_queue_timeout": 0, "server_queue_full": 0}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	const prefix = `ticketd_queue_rejected_total{reason="`
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		rest := strings.TrimPrefix(line, prefix)
		reason, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		out["server_queue_"+reason] = f
	}
	return out
}

package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/testenv"
)

func TestWebRegistered(t *testing.T) {
	w, err := Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name() != "web" {
		t.Errorf("name %q", w.Name())
	}
}

func TestWebValidate(t *testing.T) {
	tests := []struct {
		desc string
		c    Config
		want string // "" means valid
	}{
		{"defaults are valid", Config{}, ""},
		{"seed 000 test 5 tuning", Config{App: map[string]any{"max_clients": 200, "pool": 15}}, ""},
		{"mariadb split with knobs", Config{Topology: "split", App: map[string]any{"db": "mariadb", "innodb_buffer_pool": "256M", "flush_at_commit": 2}}, ""},
		{"closed loop", Config{Load: map[string]any{"concurrency": 8}}, ""},
		{"durations as strings", Config{App: map[string]any{"queue_timeout": "5s"}, Load: map[string]any{"timeout": "10s", "poisson": true}}, ""},
		{"unknown db", Config{App: map[string]any{"db": "postgres"}}, "app.db = postgres: want one of sqlite, mariadb"},
		{"split with sqlite", Config{Topology: "split"}, "needs app.db = mariadb"},
		{"unknown topology", Config{Topology: "sidecar"}, `topology "sidecar"`},
		{"max clients zero", Config{App: map[string]any{"max_clients": 0}}, "app.max_clients = 0: out of range"},
		{"pool a fraction", Config{App: map[string]any{"pool": 2.5}}, "app.pool = 2.5: want a whole number"},
		{"pool above max clients", Config{App: map[string]any{"max_clients": 10, "pool": 15}}, "larger than app.max_clients"},
		{"buffer pool below the server minimum", Config{App: map[string]any{"db": "mariadb", "innodb_buffer_pool": "1M"}}, "innodb_buffer_pool"},
		{"buffer pool not a size", Config{App: map[string]any{"innodb_buffer_pool": "lots"}}, "innodb_buffer_pool"},
		{"flush at commit 3", Config{App: map[string]any{"flush_at_commit": 3}}, "flush_at_commit = 3"},
		{"typo in an app knob", Config{App: map[string]any{"maxclients": 200}}, "app.maxclients: unknown knob"},
		{"typo in a load knob", Config{Load: map[string]any{"rps": 5}}, "load.rps: unknown knob"},
		{"bad duration", Config{Load: map[string]any{"timeout": "soon"}}, "load.timeout = soon"},
		{"negative rate", Config{Load: map[string]any{"rate": -1}}, "load.rate = -1: want between 0.001 and 1e+07"},
		{"rate and concurrency", Config{Load: map[string]any{"rate": 5, "concurrency": 2}}, "choose open loop"},
		{"nothing to send", Config{Load: map[string]any{"rate": 0}}, "nothing would be sent"},
		{"project not seeded", Config{App: map[string]any{"seed_projects": 3}, Load: map[string]any{"project": 4}}, "only 3 projects"},
		{"user not seeded", Config{App: map[string]any{"seed_users": 5}, Load: map[string]any{"user": "user6"}}, "only user1 … user5"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := validate(Web{}, tc.c)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// hostBindings resolve templates the way a shared network namespace does.
func testBindings(services []engine.Service) engine.Bindings {
	b := engine.Bindings{}
	for i, s := range services {
		ports := map[int]int{}
		for _, p := range s.Ports {
			ports[p] = 40000 + i*10 + p%10
		}
		b[s.Name] = engine.ServiceBinding{Host: "127.0.0.1", Ports: ports, DataDir: "/run/data/" + s.Name}
	}
	return b
}

func TestWebServices(t *testing.T) {
	fakeBin := func() (string, error) { return "/opt/ctrperf", nil }
	tests := []struct {
		desc      string
		c         Config
		names     []string
		image     string // of the front service
		wantArgv  []string
		wantHost  bool // HostCommand set
		wantInAll string
	}{
		{"sqlite in Docker: one FROM-scratch container", Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished},
			[]string{"app"}, "ctrperf/ticketd:latest", []string{"--db", "sqlite:ticketd.db", "--max-clients", "150", "--pool", "6", "--queue-timeout", "1m0s"}, false, ""},
		{"sqlite on the host", Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, App: map[string]any{"max_clients": 200, "pool": 15}},
			[]string{"app"}, "ctrperf/ticketd:latest", []string{"--listen", "127.0.0.1:40000", "--max-clients", "200", "--pool", "15"}, true, ""},
		{"mariadb combined: one container with both", Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Topology: "combined", App: map[string]any{"db": "mariadb", "flush_at_commit": 2}},
			[]string{"app"}, "ctrperf/web-combined:latest", []string{"web-db", "combined", "--innodb-flush-log-at-trx-commit=2", "--max-connections=56", "--", "/usr/local/bin/ctrperf", "/usr/local/bin/ctrperf", "__ticketd", "--db", "mysql://ticketd:ticketd@unix(/run/data/app/mariadb/mysqld.sock)/ticketd"}, false, ""},
		{"mariadb split: app and db containers", Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, Topology: "split", App: map[string]any{"db": "mariadb", "innodb_buffer_pool": "64M"}},
			[]string{"app", "db"}, "ctrperf/ticketd:latest", []string{"--db", "mysql://ticketd:ticketd@127.0.0.1:40016/ticketd", "--listen", ":40000"}, false, ""},
		{"mariadb on the host: host's mariadbd on loopback", Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, App: map[string]any{"db": "mariadb"}},
			[]string{"app", "db"}, "ctrperf/ticketd:latest", []string{"--db", "mysql://ticketd:ticketd@127.0.0.1:40016/ticketd"}, true, ""},
		// Runtime kubernetes: the same images as pods; the client and the
		// engine's ready checks dial the pods' (or, with hostNetwork, their
		// nodes') addresses from outside, so nothing listens on loopback only.
		{"mariadb combined in a pod", Config{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkPodIP, Data: plan.DataLocalPV, Topology: "combined", App: map[string]any{"db": "mariadb"}},
			[]string{"app"}, "ctrperf/web-combined:latest", []string{"--listen", ":40000", "--data-dir", "/run/data/app"}, false, ""},
		{"mariadb split over two pods on their nodes' network", Config{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkHostNetwork, Data: plan.DataEmptyDir, Topology: "split", App: map[string]any{"db": "mariadb"}},
			[]string{"app", "db"}, "ctrperf/ticketd:latest", []string{"--db", "mysql://ticketd:ticketd@127.0.0.1:40016/ticketd", "--listen", ":40000"}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			svcs, err := Web{HostBinary: fakeBin}.Services(decoded(t, Web{}, tc.c))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range svcs {
				names = append(names, s.Name)
				if s.DataDir == "" || len(s.Ports) == 0 || s.Ready == nil {
					t.Errorf("service %s lacks data dir, ports or ready check: %+v", s.Name, s)
				}
			}
			if !slices.Equal(names, tc.names) {
				t.Fatalf("services %v, want %v", names, tc.names)
			}
			front := svcs[0]
			if front.Image != tc.image || front.Ports[0] != 8080 || front.Ready.HTTPPath != "/healthz" {
				t.Errorf("front service image %q ports %v ready %+v", front.Image, front.Ports, front.Ready)
			}
			b := testBindings(svcs)
			if err := b.Check(svcs, func(s engine.Service) []string { return s.Command }); err != nil {
				t.Fatalf("templates: %v", err)
			}
			argvOf := func(s engine.Service) []string { return s.Command }
			if tc.wantHost {
				argvOf = func(s engine.Service) []string { return s.HostCommand }
				if front.HostCommand[0] != "/opt/ctrperf" || front.HostCommand[1] != "__ticketd" {
					t.Errorf("host command %v does not start with ctrperf's hidden command __ticketd", front.HostCommand)
				}
			}
			argv, err := b.ExpandAll(argvOf(front))
			if err != nil {
				t.Fatal(err)
			}
			joined := " " + strings.Join(argv, " ") + " "
			for i := 0; i+1 < len(tc.wantArgv); i += 2 {
				pair := " " + tc.wantArgv[i] + " " + tc.wantArgv[i+1] + " "
				if !strings.Contains(joined, pair) {
					t.Errorf("argv lacks %q:\n%s", pair, joined)
				}
			}
			if len(svcs) == 2 {
				db, err := b.ExpandAll(svcs[1].Command)
				if err != nil {
					t.Fatal(err)
				}
				wantBind := "--bind-address=0.0.0.0"
				if tc.c.Runtime == engine.RuntimeHost {
					wantBind = "--bind-address=127.0.0.1"
				}
				if !slices.Contains(db, wantBind) || !slices.Contains(db, "--port=40016") || !slices.Contains(db, "/run/data/db") {
					t.Errorf("db argv %v lacks %s, its port or its data dir", db[3:], wantBind)
				}
				// On a cluster nothing resolves a pod's address to a name.
				if got := slices.Contains(db, "--skip-name-resolve"); got != (tc.c.Runtime == plan.RuntimeKubernetes) {
					t.Errorf("db argv %v: --skip-name-resolve %v on runtime %s", db[3:], got, tc.c.Runtime)
				}
			}
		})
	}
}

func TestWebServicesHostBinaryMissing(t *testing.T) {
	w := Web{HostBinary: func() (string, error) { return "", errors.New("ctrperf binary: no such file") }}
	_, err := w.Services(decoded(t, w, Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost}))
	if err == nil || !strings.Contains(err.Error(), "ctrperf binary: no such file") {
		t.Fatalf("err = %v, want the build failure", err)
	}
}

func TestWebScenarioIsValid(t *testing.T) {
	sc := WebScenario("user1", 3)
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{LabelLoginPage, LabelLogin, LabelProjectPage, LabelCreateTicket}
	if got := sc.Labels(); !slices.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	if sc.Steps[3].Path != "/projects/3/tickets" {
		t.Errorf("create ticket path %q", sc.Steps[3].Path)
	}
}

func TestParseQueueMetrics(t *testing.T) {
	in := `# HELP ticketd_queue_rejected_total Requests refused by the gate, by reason (timeout, full).
# TYPE ticketd_queue_rejected_total counter
ticketd_queue_rejected_total{reason="full"} 3
ticketd_queue_rejected_total{reason="timeout"} 12
ticketd_queue_length 0
`
	got := parseQueueMetrics(strings.NewReader(in))
	if got["server_queue_timeout"] != 12 || got["server_queue_full"] != 3 {
		t.Errorf("got %v", got)
	}
	if got := parseQueueMetrics(strings.NewReader("")); got["server_queue_timeout"] != 0 {
		t.Errorf("empty input: %v", got)
	}
}

// TestWebHostSQLiteRoot deploys ticketd on the host runtime (cgroups need
// root) and drives the scenario for a short window.
func TestWebHostSQLiteRoot(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t, "the host runtime's cgroups")
	testenv.Ctrperf(t) // the host runs `ctrperf __ticketd`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind,
		App:  map[string]any{"hash_cost": 8, "seed_tickets": 30},
		Load: map[string]any{"rate": 20, "poisson": true}}
	driveOnce(ctx, t, engine.NewBareMetal(), c, "webtest-host-"+fmt.Sprint(os.Getpid()))
}

func driveOnce(ctx context.Context, t *testing.T, eng engine.Engine, c Config, runID string) {
	t.Helper()
	m := deployAndDrive(ctx, t, eng, Web{}, c, runID)
	for _, l := range []string{LabelLoginPage, LabelLogin, LabelProjectPage, LabelCreateTicket} {
		op := m.Operations[l]
		if op == nil || op.Count == 0 {
			t.Errorf("operation %q: no samples (%+v)", l, op)
			continue
		}
		if op.ErrorCount() != 0 {
			t.Errorf("operation %q: errors %v", l, op.Errors)
		}
		if op.Histogram == "" {
			t.Errorf("operation %q: no histogram", l)
		}
	}
	if m.Metrics["throughput_per_s"] <= 0 {
		t.Errorf("throughput %v", m.Metrics)
	}
	if _, ok := m.Metrics["server_queue_timeout"]; !ok {
		t.Errorf("server queue metrics missing: %v", m.Metrics)
	}
}

func TestWebHostMariaDBRoot(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t, "the host runtime's cgroups")
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
			t.Skip("mariadbd not installed on the host")
		}
	}
	testenv.Ctrperf(t) // the host runs `ctrperf __ticketd`
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind,
		App:  map[string]any{"db": "mariadb", "hash_cost": 8, "seed_tickets": 30, "innodb_buffer_pool": "32M"},
		Load: map[string]any{"rate": 20}}
	driveOnce(ctx, t, engine.NewBareMetal(), c, "webtest-hostdb-"+fmt.Sprint(os.Getpid()))
}

// dockerEngine returns the default Docker engine with the images built, or
// skips (fails with CTRPERF_REQUIRE_DOCKER=1).
func dockerEngine(t *testing.T, ctx context.Context, images ...string) engine.Engine {
	t.Helper()
	testenv.RequireRoot(t, "bind directories")
	cli := testenv.Docker(t)
	testenv.Ctrperf(t) // the binary the images carry
	ensureImages(ctx, t, cli, images)
	return engine.NewDocker(cli)
}

// ensuredImages are the images this test process has ensured. Ensuring
// one checks its recipe (and the ctrperf binary it carries) against the
// engine's image; the tests only run the images, so once per process is
// enough, and the lock keeps tests that start together from building the
// same image twice.
var ensuredImages struct {
	sync.Mutex
	done map[string]bool
}

func ensureImages(ctx context.Context, t *testing.T, cli image.API, images []string) {
	t.Helper()
	ensuredImages.Lock()
	defer ensuredImages.Unlock()
	var todo []string
	for _, im := range images {
		if !ensuredImages.done[im] {
			todo = append(todo, im)
		}
	}
	if len(todo) == 0 {
		return
	}
	t0 := time.Now()
	if _, err := image.Ensure(ctx, cli, todo...); err != nil {
		t.Fatalf("images %v: %v", todo, err)
	}
	if ensuredImages.done == nil {
		ensuredImages.done = map[string]bool{}
	}
	for _, im := range todo {
		ensuredImages.done[im] = true
	}
	t.Logf("images %v ensured in %v", todo, time.Since(t0).Round(time.Millisecond))
}

func TestWebSQLitePublishedDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, WebImageTicketd)
	c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataVolume,
		App:  map[string]any{"hash_cost": 8, "seed_tickets": 30},
		Load: map[string]any{"rate": 20}}
	driveOnce(ctx, t, eng, c, "webtest-sqlite-"+fmt.Sprint(os.Getpid()))
}

func TestWebMariaDBSplitDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, WebImageTicketd, image.DebianBase.Name)
	c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, Data: engine.DataLayer, Topology: "split",
		App:  map[string]any{"db": "mariadb", "hash_cost": 8, "seed_tickets": 30, "innodb_buffer_pool": "32M"},
		Load: map[string]any{"rate": 20}}
	driveOnce(ctx, t, eng, c, "webtest-split-"+fmt.Sprint(os.Getpid()))
}

func TestWebMariaDBCombinedDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, WebImageCombined)
	c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataVolume, Topology: "combined",
		App:  map[string]any{"db": "mariadb", "hash_cost": 8, "seed_tickets": 30, "innodb_buffer_pool": "32M", "flush_at_commit": 2},
		Load: map[string]any{"rate": 20}}
	driveOnce(ctx, t, eng, c, "webtest-combined-"+fmt.Sprint(os.Getpid()))
}

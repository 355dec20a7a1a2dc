package workload

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
)

// planSchema decodes with the registered workloads, as bench.Schema does
// (which this package cannot import).
type planSchema struct{}

func (planSchema) Workloads() []string { return Names() }
func (planSchema) DecodeKnobs(name string, c *plan.Configuration) (plan.WorkloadKnobs, error) {
	w, err := Get(name)
	if err != nil {
		return plan.WorkloadKnobs{}, err
	}
	app, ld, err := w.Decode(KnobsOf(c))
	return plan.WorkloadKnobs{App: app, Load: ld, UsesDir: UsesDir(app) || UsesDir(ld)}, err
}
func (planSchema) IsolateKeys() (keys, policies []string)                { return nil, nil }
func (planSchema) DecodeIsolate(map[string]any) (any, *yaml.Node, error) { return nil, nil, nil }

// appDir is a plan directory with a Dockerfile context (ctx/) and a
// scenario (session.yaml).
func appDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "ctx"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "ctx", "Dockerfile"), []byte("FROM scratch\nCOPY app /app\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "ctx", "app"), []byte("binary"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "session.yaml"), []byte("steps:\n  - label: home\n    path: /\n"), 0o644))
	return dir
}

// parseAppPlan parses a plan of workload app written in dir.
func parseAppPlan(t *testing.T, dir, body string) (*plan.Plan, error) {
	t.Helper()
	file := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return plan.Load(file, plan.Options{Schema: planSchema{}})
}

const appPlanHead = `name: mine
workload: app
baseline: host
`

const appGood = appPlanHead + `app:
  build: ctx
  port: 8080
  command: [serve, "{{listen:app}}:{{port:app:8080}}", --data, "{{data:app}}"]
  host_command: [./ctx/app, serve, "{{listen:app}}:{{port:app:8080}}"]
  env: {GREETING: hi, WORKERS: 4}
  data_dir: /data
  ready: {path: /healthz, timeout: 20s}
load:
  scenario: session.yaml
  rate: 50
configurations:
  - name: host
    runtime: host
  - name: docker
    runtime: docker
    network: published
    data: volume
`

func TestAppDecodeGood(t *testing.T) {
	dir := appDir(t)
	p, err := parseAppPlan(t, dir, appGood)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Config("docker")
	a := c.Decoded.App.(AppApp)
	l := c.Decoded.Load.(AppLoad)
	if a.Build != filepath.Join(dir, "ctx") || !strings.HasPrefix(a.Image, "ctrperf/app-ctx:") {
		t.Errorf("build %q image %q", a.Build, a.Image)
	}
	if a.HostCommand[0] != filepath.Join(dir, "ctx", "app") {
		t.Errorf("host program %q, want it resolved against the plan's directory", a.HostCommand[0])
	}
	if a.Env["WORKERS"] != "4" || a.Ready.HTTPPath != "/healthz" || a.Ready.Timeout.String() != "20s" || !slices.Equal(a.Ports, []int{8080}) {
		t.Errorf("decoded %+v", a)
	}
	if l.Scenario != filepath.Join(dir, "session.yaml") || l.scenario == nil || l.Rate != 50 || l.Concurrency != 0 {
		t.Errorf("load %+v", l)
	}
	// The plan as run records the directory its paths are read from, and
	// reads the same files from anywhere (OUT/plan.yaml on --resume).
	canon, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "base_dir: "+dir) {
		t.Fatalf("canonical plan has no base_dir %s:\n%s", dir, canon)
	}
	other := t.TempDir()
	again, err := plan.Parse(filepath.Join(other, "plan.yaml"), canon, plan.Options{Schema: planSchema{}})
	if err != nil {
		t.Fatalf("canonical plan elsewhere: %v", err)
	}
	if c2, _ := again.Config("docker"); c2.Decoded.App.(AppApp).Image != a.Image {
		t.Errorf("image %q after re-reading, want %q", c2.Decoded.App.(AppApp).Image, a.Image)
	}

	// A change of the context is a new image; the same content the same.
	if err := os.WriteFile(filepath.Join(dir, "ctx", "app"), []byte("binary v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	contextHashes.Clear()
	p2, err := parseAppPlan(t, dir, appGood)
	if err != nil {
		t.Fatal(err)
	}
	c3, _ := p2.Config("docker")
	if c3.Decoded.App.(AppApp).Image == a.Image {
		t.Errorf("changed context kept image %s", a.Image)
	}
}

// kubeConfigs is a bare-metal baseline and one pod.
const kubeConfigs = `configurations:
  - name: host
    runtime: host
  - name: pod
    runtime: kubernetes
`

// TestAppUserOnPods: a numeric user is what a pod takes (a name is
// refused, TestAppDecodeBad), and a name is still fine on Docker.
func TestAppUserOnPods(t *testing.T) {
	dir := appDir(t)
	for _, body := range []string{
		appPlanHead + "app:\n  image: a:b\n  port: 80\n  host_command: [x]\n  user: \"999\"\n" + kubeConfigs,
		appPlanHead + "app:\n  image: a:b\n  port: 80\n  host_command: [x]\n  user: www-data\nconfigurations:\n  - name: host\n    runtime: host\n  - name: docker\n    runtime: docker\n",
	} {
		if _, err := parseAppPlan(t, dir, body); err != nil {
			t.Errorf("%v; plan:\n%s", err, body)
		}
	}
}

// Every bad knob is refused when the plan is read, at the line that set it.
func TestAppDecodeBad(t *testing.T) {
	dir := appDir(t)
	if err := os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte("steps:\n  - label: home\n    pth: /\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	configs := `configurations:
  - name: host
    runtime: host
  - name: docker
    runtime: docker
`
	rows := []struct {
		desc, app, load, configs string
		want                     string // a piece of the message, with its line
	}{
		{"no image nor build", "  port: 8080\n  host_command: [x]\n", "", configs, `plan.yaml:5: configurations[1] (docker): configuration "docker": workload app: app: no image`},
		{"both image and build", "  image: a:b\n  build: ctx\n  port: 8080\n  host_command: [x]\n", "", configs, "plan.yaml:6:"},
		{"missing context", "  build: nowhere\n  port: 8080\n  host_command: [x]\n", "", configs, "plan.yaml:5: configurations[1] (docker): configuration \"docker\": workload app: app.build = " + filepath.Join(dir, "nowhere")},
		{"context without a Dockerfile", "  build: .\n  port: 8080\n  host_command: [x]\n", "", configs, "has no Dockerfile"},
		{"no port", "  image: a:b\n  host_command: [x]\n", "", configs, "no port"},
		{"port out of range", "  image: a:b\n  port: 70000\n  host_command: [x]\n", "", configs, "plan.yaml:6: configurations[1] (docker): configuration \"docker\": workload app: app.port = 70000: out of range"},
		{"command not a list", "  image: a:b\n  port: 80\n  command: serve --port 80\n  host_command: [x]\n", "", configs, "plan.yaml:7:"},
		{"typo in an app knob", "  image: a:b\n  port: 80\n  hostcommand: [x]\n", "", configs, "app.hostcommand: unknown knob"},
		{"host runtime without host_command", "  image: a:b\n  port: 80\n", "", configs, "runtime host runs app.host_command"},
		{"ready port not declared", "  image: a:b\n  port: 80\n  host_command: [x]\n  ready:\n    port: 81\n", "", configs, "plan.yaml:9:"},
		{"ready typo", "  image: a:b\n  port: 80\n  host_command: [x]\n  ready:\n    pth: /x\n", "", configs, "plan.yaml:9: configurations[1] (docker): configuration \"docker\": workload app: app.ready.pth: unknown knob"},
		{"volume without data_dir", "  image: a:b\n  port: 80\n  host_command: [x]\n", "", "configurations:\n  - name: host\n    runtime: host\n  - name: docker\n    runtime: docker\n    data: volume\n", "places app.data_dir, which is not set"},
		{"scenario with a typo", "  image: a:b\n  port: 80\n  host_command: [x]\n", "  scenario: typo.yaml\n", configs, "field pth not found"},
		{"scenario missing", "  image: a:b\n  port: 80\n  host_command: [x]\n", "  scenario: none.yaml\n", configs, "none.yaml: no such file"},
		{"rate and concurrency", "  image: a:b\n  port: 80\n  host_command: [x]\n", "  rate: 10\n  concurrency: 4\n", configs, "both set"},
		{"memcached knob on http", "  image: a:b\n  port: 80\n  host_command: [x]\n", "  mix: get\n", configs, "plan.yaml:9: configurations[0] (host): configuration \"host\": workload app: load.mix is a memcached knob"},
		{"sidecars need split", "  image: a:b\n  port: 80\n  host_command: [x]\n  sidecars:\n    - name: db\n      image: db:1\n      host_command: [db]\n", "", configs, "write topology: split"},
		{"sidecar without a name", "  image: a:b\n  port: 80\n  host_command: [x]\n  sidecars:\n    - image: db:1\n      host_command: [db]\n", "", configs, "app.sidecars[0]: no name"},
		{"sidecar knob typo at its line", "  image: a:b\n  port: 80\n  host_command: [x]\n  sidecars:\n    - name: db\n      imag: db:1\n", "", configs, "plan.yaml:10:"},
		{"split without sidecars", "  image: a:b\n  port: 80\n  host_command: [x]\n", "", "configurations:\n  - name: host\n    runtime: host\n    topology: split\n", "the app has none"},
		{"a user name on kubernetes, at its line", "  image: a:b\n  port: 80\n  host_command: [x]\n  user: www-data\n", "", kubeConfigs,
			`plan.yaml:8: configurations[1] (pod): configuration "pod": workload app: app.user = "www-data": runtime kubernetes runs a container as a numeric uid`},
		{"a sidecar's user name on kubernetes, at its line", "  image: a:b\n  port: 80\n  host_command: [x]\n  sidecars:\n    - name: db\n      image: db:1\n      host_command: [db]\n      user: mysql\n", "",
			"configurations:\n  - name: host\n    runtime: host\n    topology: split\n  - name: pod\n    runtime: kubernetes\n    topology: split\n",
			`plan.yaml:12: configurations[1] (pod): configuration "pod": workload app: app.sidecars[0].user = "mysql": runtime kubernetes runs a container as a numeric uid`},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			body := appPlanHead + "app:\n" + r.app
			if r.load != "" {
				body += "load:\n" + r.load
			}
			body += r.configs
			_, err := parseAppPlan(t, dir, body)
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Fatalf("err = %v\nwant one containing %q; plan:\n%s", err, r.want, body)
			}
		})
	}
}

func TestAppServices(t *testing.T) {
	dir := appDir(t)
	body := appPlanHead + `app:
  build: ctx
  port: 8080
  entrypoint: [/app]
  command: [serve, "{{listen:app}}:{{port:app:8080}}", --db, "{{addr:db:5432}}"]
  host_command: [./ctx/app, serve, "{{listen:app}}:{{port:app:8080}}", --db, "{{addr:db:5432}}"]
  data_dir: /data
  sidecars:
    - name: db
      image: postgres:16
      ports: [5432]
      host_command: [sh, -c, "exec true"]
      data_dir: /var/lib/postgresql/data
      env: {POSTGRES_PASSWORD: x}
load:
  concurrency: 2
configurations:
  - name: host
    runtime: host
    topology: split
  - name: split
    runtime: docker
    network: container-ip
    topology: split
`
	p, err := parseAppPlan(t, dir, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"host", "split"} {
		c, _ := p.Config(name)
		svcs, err := App{}.Services(ConfigFor(c))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(svcs) != 2 || svcs[0].Name != "app" || svcs[1].Name != "db" {
			t.Fatalf("%s: services %+v", name, svcs)
		}
		app, db := svcs[0], svcs[1]
		if app.Build == nil || app.Build.Dir != filepath.Join(dir, "ctx") || app.Build.Name != "app-ctx" || app.Image == "" {
			t.Errorf("%s: app build %+v image %q", name, app.Build, app.Image)
		}
		if db.Build != nil || db.Image != "postgres:16" || db.Ready == nil || db.Ready.Port != 0 || !slices.Equal(db.Ports, []int{5432}) {
			t.Errorf("%s: db %+v", name, db)
		}
		if !slices.Equal(app.Entrypoint, []string{"/app"}) || app.Ready == nil || app.Ready.HTTPPath != "" {
			t.Errorf("%s: app %+v", name, app)
		}
		// Every template resolves on this runtime's bindings.
		spec := engine.DeploySpec{RunID: "r1", Network: c.Network, Data: c.Data, Services: svcs}
		if err := engine.ValidateSpec(c.Runtime, spec); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name == "host" && app.DataDir == "" {
			t.Errorf("host: no data directory for {{data:app}}")
		}
	}

	// A host program that is not there: the configuration is not run.
	c, _ := p.Config("host")
	cfg := ConfigFor(c)
	a := cfg.App.(AppApp)
	a.HostCommand = append([]string{filepath.Join(dir, "missing")}, a.HostCommand[1:]...)
	cfg.App = a
	if _, err := (App{}).Services(cfg); err == nil || !strings.Contains(err.Error(), "missing (host_command of app)") {
		t.Errorf("missing host program: %v", err)
	}
}

func TestAppMemcachedLoad(t *testing.T) {
	l, err := ParseAppLoad(map[string]any{"protocol": "memcached", "rate": 1000, "mix": "get=1"}, "/")
	if err != nil {
		t.Fatal(err)
	}
	if l.Rate != 1000 || l.Concurrency != 0 || !l.Poisson || l.mix["get"] != 1 {
		t.Errorf("%+v", l)
	}
	if _, err := ParseAppLoad(map[string]any{"protocol": "memcached", "scenario": "x.yaml"}, "/"); err == nil {
		t.Error("a scenario with protocol memcached was accepted")
	}
}

func TestAppCapacitySearch(t *testing.T) {
	search := map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": 10, "to": 400}
	l, err := ParseAppLoad(map[string]any{"path": "/", "search": search}, "/")
	if err != nil {
		t.Fatal(err)
	}
	if l.Search == nil || l.Search.From != 10 || l.Search.To != 400 || l.Concurrency != 0 {
		t.Fatalf("decoded %+v", l)
	}
	if s, ok := l.CapacitySearch(); !ok || s.MaxSteps < 2 {
		t.Errorf("CapacitySearch = %+v, %v", s, ok)
	}
	for _, fixed := range []string{"rate", "concurrency"} {
		_, err := ParseAppLoad(map[string]any{"path": "/", "search": search, fixed: 5}, "/")
		var ke *plan.KnobError
		if !errors.As(err, &ke) {
			t.Errorf("search with %s: %v, want a knob error", fixed, err)
		}
	}
	if l, err := ParseAppLoad(map[string]any{"path": "/"}, "/"); err != nil || l.Search != nil {
		t.Errorf("no search: %+v, %v", l.Search, err)
	}
}

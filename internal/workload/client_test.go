package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// clientPlan is a plan whose app is a Redis and whose load is
// redis-benchmark, with the load knobs of a row.
func clientPlan(load, configs string) string {
	return appPlanHead + `app:
  image: ctrperf/debian-base
  port: 6379
  command: [redis-server, --bind, "{{listen:app}}", --port, "{{port:app:6379}}"]
  host_command: [redis-server, --bind, "{{listen:app}}", --port, "{{port:app:6379}}"]
load:
` + load + configs
}

const clientConfigs = `configurations:
  - name: host
    runtime: host
  - name: published
    runtime: docker
    network: published
`

func TestClientDecodeGood(t *testing.T) {
	load := `  command: redis-benchmark -h {{host:app}} -p {{port:app:6379}} -n 1000 -t set,get --csv
  parser: redis-benchmark
  figures:
    - name: set_rps_text_per_s
      regex: '"SET","(?P<value>[0-9.]+)"'
  warmup_runs: 2
  runs: 3
  timeout: 30s
`
	p, err := parseAppPlan(t, t.TempDir(), clientPlan(load, clientConfigs))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Config("published")
	l := c.Decoded.Load.(AppLoad)
	if l.Client == nil || l.Protocol != "command" {
		t.Fatalf("load %+v", l)
	}
	cl := *l.Client
	if cl.Parser != "redis-benchmark" || cl.parser == nil || cl.WarmupRuns != 2 || cl.Runs != 3 || cl.Timeout != 30*time.Second ||
		cl.Client != clientHost || len(cl.Figures) != 1 || cl.Figures[0].better() != results.BetterHigher {
		t.Errorf("client %+v", cl)
	}
	// A client on this machine adds no service.
	svcs, err := App{}.Services(ConfigFor(c))
	if err != nil && !strings.Contains(err.Error(), "redis-benchmark is not installed") {
		t.Fatal(err)
	}
	if err == nil && len(svcs) != 1 {
		t.Errorf("services %+v", svcs)
	}
}

func TestClientDecodeBad(t *testing.T) {
	good := "  command: redis-benchmark -h {{host:app}} -p {{port:app:6379}} --csv\n"
	rows := []struct {
		desc, load, configs, want string
	}{
		{"unknown service at its line", "  command: redis-benchmark -h {{host:cache}} --csv\n  parser: redis-benchmark\n", clientConfigs,
			`plan.yaml:10: configurations[0] (host): configuration "host": workload app: load.command: {{host:cache}} names service "cache" (no such service)`},
		{"undeclared port", "  command: redis-benchmark -h {{host:app}} -p {{port:app:6380}} --csv\n  parser: redis-benchmark\n", clientConfigs,
			"plan.yaml:10: configurations[0] (host): configuration \"host\": workload app: load.command: {{port:app:6380}}: the app declares no port 6380"},
		{"a service's own template", "  command: [redis-benchmark, -h, '{{listen:app}}']\n  parser: redis-benchmark\n", clientConfigs, "{{listen:…}} is for the services' own command lines"},
		{"malformed template", "  command: redis-benchmark -p {{port:app}} --csv\n  parser: redis-benchmark\n", clientConfigs, "port needs a port"},
		{"no figure", good, clientConfigs, "no figure would be taken from its output"},
		{"unknown parser", good + "  parser: redis\n", clientConfigs, "plan.yaml:11: configurations[0] (host): configuration \"host\": workload app: load.parser = redis: unknown parser (known: k6, memtier, pgbench, redis-benchmark, wrk)"},
		{"figure without direction", good + "  figures:\n    - name: sets\n      regex: 'SET,(?P<value>[0-9.]+)'\n", clientConfigs, "load.figures[0]: sets does not say which way is better"},
		{"figure with both regex and json", good + "  figures:\n    - name: set_per_s\n      regex: 'x(?P<value>1)'\n      json: .a\n", clientConfigs, "give either regex"},
		{"figure typo at its line", good + "  figures:\n    - name: set_per_s\n      regexp: 'x'\n", clientConfigs, "plan.yaml:13: configurations[0] (host): configuration \"host\": workload app: load.figures[0].regexp: unknown knob"},
		{"generator knob beside a command", good + "  parser: redis-benchmark\n  rate: 100\n", clientConfigs, "load.rate: unknown knob"},
		{"client container behind a published port", good + "  parser: redis-benchmark\n  client: container\n", clientConfigs, "load.client container reaches the app at its container IP"},
		{"client image without a client container", good + "  parser: redis-benchmark\n  client_image: x:1\n", clientConfigs, "set load.client: container"},
		{"protocol command without a command", "  protocol: command\n", clientConfigs, "give it as load.command"},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			body := clientPlan(r.load, r.configs)
			_, err := parseAppPlan(t, t.TempDir(), body)
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Fatalf("err = %v\nwant one containing %q; plan:\n%s", err, r.want, body)
			}
		})
	}
}

// TestClientBindingsPerNetwork: the templates say where the app is from
// where the client stands, for every network path.
func TestClientBindingsPerNetwork(t *testing.T) {
	app := func(ip string) []engine.Container { return []engine.Container{{Service: "app", IP: ip}} }
	rows := []struct {
		desc   string
		target engine.Target
		client string
		want   string // {{host:app}} {{port:app:6379}} {{addr:app:6379}}
	}{
		{"bare metal: the allocated loopback port", engine.Target{Runtime: engine.RuntimeHost, Network: engine.NetworkHost,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "127.0.0.1:41234"}}}, clientHost, "127.0.0.1 41234 127.0.0.1:41234"},
		{"published: docker-proxy's loopback port", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "127.0.0.1:32768"}}, Containers: app("172.18.0.2")}, clientHost, "127.0.0.1 32768 127.0.0.1:32768"},
		{"published-external: the host side of the client namespace", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublishedExternal, Netns: "ctrperf-x",
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "198.18.0.1:32769"}}, Containers: app("172.18.0.2")}, clientHost, "198.18.0.1 32769 198.18.0.1:32769"},
		{"container-ip: the container's address", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "172.18.0.2:6379"}}, Containers: app("172.18.0.2")}, clientHost, "172.18.0.2 6379 172.18.0.2:6379"},
		{"--net=host: the allocated loopback port", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "127.0.0.1:40001"}}}, clientHost, "127.0.0.1 40001 127.0.0.1:40001"},
		{"client container on the bridge: the app's container IP", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "172.18.0.2:6379"}}, Containers: app("172.18.0.2")}, clientContainer, "172.18.0.2 6379 172.18.0.2:6379"},
		{"client container with --net=host: loopback", engine.Target{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "127.0.0.1:40002"}}}, clientContainer, "127.0.0.1 40002 127.0.0.1:40002"},
		{"client pod, pod-ip: the pod's IP", engine.Target{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkPodIP,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "198.19.64.12:6379"}}, Containers: app("198.19.64.12")}, clientContainer, "198.19.64.12 6379 198.19.64.12:6379"},
		{"client pod, service: the ClusterIP, not the pod's IP", engine.Target{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "198.19.96.20:6379"}}, Containers: app("198.19.64.12")}, clientContainer, "198.19.96.20 6379 198.19.96.20:6379"},
		{"client pod, nodeport: the node's address and the NodePort", engine.Target{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkNodePort,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "198.18.8.2:30123"}}, Containers: app("198.19.64.12")}, clientContainer, "198.18.8.2 30123 198.18.8.2:30123"},
		{"client on this machine, service: the ClusterIP", engine.Target{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService,
			Endpoints: []engine.Endpoint{{Service: "app", Port: 6379, Addr: "198.19.96.20:6379"}}, Containers: app("198.19.64.12")}, clientHost, "198.19.96.20 6379 198.19.96.20:6379"},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			b, err := clientBindings(&r.target, r.client)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := expandCommand(b, CommandLine{Shell: "{{host:app}} {{port:app:6379}} {{addr:app:6379}}"})
			if err != nil {
				t.Fatal(err)
			}
			if cl.Shell != r.want {
				t.Errorf("got %q, want %q", cl.Shell, r.want)
			}
			argv, err := expandCommand(b, CommandLine{Argv: []string{"redis-benchmark", "-h", "{{host:app}}", "-p", "{{port:app:6379}}"}})
			if err != nil || argv.Argv[2] != strings.Fields(r.want)[0] || argv.Argv[4] != strings.Fields(r.want)[1] {
				t.Errorf("argv %v, %v", argv, err)
			}
			if _, err := expandCommand(b, CommandLine{Shell: "{{port:app:1}}"}); err == nil {
				t.Errorf("an undeclared port resolved")
			}
		})
	}
	if _, err := clientBindings(&engine.Target{RunID: "r", Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP}, clientContainer); err == nil {
		t.Errorf("a client container without the app's IP resolved")
	}
}

// localRunner runs a client command on this machine, as the host side
// does, with a command line of the test's.
func localRunner(t *testing.T, c ClientLoad, cmd CommandLine) *clientRunner {
	t.Helper()
	return &clientRunner{side: clientSide{run: localExec(), files: localExec(), where: "on this machine"}, c: c, cmd: cmd, warm: cmd,
		mark: "ctrperf-client-timing-test"}
}

func decodeClient(t *testing.T, m map[string]any) ClientLoad {
	t.Helper()
	c, err := parseClientLoad(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientRunnerFigures runs real shell commands standing in for the
// tools: their output goes through the parser and the plan's figures, a
// file the tool writes in its working directory reaches the parser, and
// the working directory is removed afterwards.
func TestClientRunnerFigures(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(csv, []byte("\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"100.0\",\"0.5\",\"0.1\",\"0.4\",\"0.9\",\"1.5\",\"3.0\"\n\"GET\",\"300.0\",\"0.3\",\"0.1\",\"0.2\",\"0.5\",\"0.8\",\"2.0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := decodeClient(t, map[string]any{"command": "x", "parser": "redis-benchmark", "runs": 3,
		"figures": []any{map[string]any{"name": "wd_files", "regex": `files=(?P<value>[0-9]+)`, "from": "stderr", "better": "lower"}}})
	r := localRunner(t, c, CommandLine{Shell: `cat "` + csv + `"; echo files=$(ls | wc -l) >&2; pwd > "` + filepath.Join(dir, "wd") + `"`})
	started := 0
	r.started = func() { started++ }
	m, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if started != 1 || len(m.Executions) != 3 {
		t.Fatalf("started %d, executions %d", started, len(m.Executions))
	}
	for k, v := range map[string]float64{"set_per_s": 100, "get_per_s": 300, "set_p99_ms": 1.5, "wd_files": 0, results.MetricThroughput: 150} {
		if m.Metrics[k] != v {
			t.Errorf("%s = %v, want %v (metrics %v)", k, m.Metrics[k], v, m.Metrics)
		}
	}
	if m.Declared["set_per_s"].Better != results.BetterHigher || m.Declared["wd_files"].Better != results.BetterLower || m.Metrics["wall_client_s"] <= 0 {
		t.Errorf("declared %v, wall %v", m.Declared, m.Metrics["wall_client_s"])
	}
	if len(m.Operations) != 0 {
		t.Errorf("operations without counts kept: %v", m.Operations)
	}
	wd, _ := os.ReadFile(filepath.Join(dir, "wd"))
	if w := strings.TrimSpace(string(wd)); !strings.HasPrefix(w, "/tmp/ctrperf-client.") {
		t.Errorf("working directory %q", w)
	} else if _, err := os.Stat(w); !os.IsNotExist(err) {
		t.Errorf("working directory %s left behind: %v", w, err)
	}

	// A parser that reads files: k6's summary in the working directory.
	summary := `{"metrics": {"http_reqs": {"count": 10, "rate": 5}, "http_req_duration": {"avg": 2, "med": 1.5, "p(95)": 4}}}`
	k := decodeClient(t, map[string]any{"command": "x", "parser": "k6"})
	r = localRunner(t, k, CommandLine{Shell: "printf '%s' '" + summary + "' > k6-summary.json"})
	if m, err = r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.Metrics["http_reqs_per_s"] != 5 || m.Metrics["http_req_duration_p95_ms"] != 4 || m.Operations["http_req"] == nil || m.Operations["http_req"].Count != 10 {
		t.Errorf("k6: metrics %v operations %v", m.Metrics, m.Operations)
	}
}

// TestClientRunnerBadInput: a figure that does not parse, a non-zero exit
// and a missing program each end the run with what happened, and a
// missing program is a configuration that cannot run here.
func TestClientRunnerBadInput(t *testing.T) {
	red := decodeClient(t, map[string]any{"command": "x", "parser": "redis-benchmark"})
	rows := []struct {
		desc string
		c    ClientLoad
		cmd  CommandLine
		want []string
		not  bool // a not_run
	}{
		{"figure that does not parse: the end of the output", red, CommandLine{Shell: "echo '====== SET ======'; echo 'throughput summary: 100 requests per second'"},
			[]string{"run 1 of 1", "parser redis-benchmark", "--csv", "throughput summary: 100 requests per second"}, false},
		{"plan figure that does not match", decodeClient(t, map[string]any{"command": "x", "figures": []any{map[string]any{"name": "tps_per_s", "regex": `tps=(?P<value>[0-9]+)`}}}),
			CommandLine{Shell: "echo tps=; echo done"}, []string{"figure tps_per_s", "matched nothing", "done"}, false},
		{"non-zero exit: the end of stderr", red, CommandLine{Shell: "echo connecting; echo 'Could not connect to Redis at 127.0.0.1:1: Connection refused' >&2; exit 1"},
			[]string{"warm-up 1 of 1", "exited with status 1", "Connection refused"}, false},
		{"program not installed: not run, with its package", red, CommandLine{Argv: []string{"redis-benchmark-not-here", "--csv"}},
			[]string{"redis-benchmark-not-here is not installed on this machine"}, true},
		{"timeout", decodeClient(t, map[string]any{"command": "x", "parser": "redis-benchmark", "timeout": "1s", "warmup_runs": 0}),
			CommandLine{Argv: []string{"sleep", "30"}}, []string{"timed out after 1s"}, false},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			_, err := localRunner(t, r.c, r.cmd).run(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range r.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var nr interface{ NotRunnable() bool }
			if got := errors.As(err, &nr) && nr.NotRunnable(); got != r.not {
				t.Errorf("not runnable = %v, want %v", got, r.not)
			}
		})
	}
	if got := (&ToolMissingError{Program: "redis-benchmark", Where: "in the client container"}).Error(); !strings.Contains(got, "Debian package redis-tools") {
		t.Errorf("advice %q", got)
	}
	if got := installAdvice("k6"); !strings.Contains(got, "go.k6.io/k6") {
		t.Errorf("k6 advice %q", got)
	}
	if got := installAdvice("memtier_benchmark"); !strings.Contains(got, "RedisLabs/memtier_benchmark") {
		t.Errorf("memtier advice %q", got)
	}
}

// TestClientServices: a client container is a sleeper of the Debian base
// (or client_image) without the app's limits; a client on this machine
// whose program is missing is refused before anything is deployed.
func TestClientServices(t *testing.T) {
	load := "  command: [redis-benchmark, -h, '{{host:app}}', -p, '{{port:app:6379}}', --csv]\n  parser: redis-benchmark\n  client: container\n"
	configs := "configurations:\n  - name: host\n    runtime: host\n  - name: ip\n    runtime: docker\n    network: container-ip\n    resources: {cpus: 1}\n"
	p, err := parseAppPlan(t, t.TempDir(), clientPlan(load, configs))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Config("ip")
	svcs, err := App{}.Services(ConfigFor(c))
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 2 || svcs[1].Name != clientService || svcs[1].Resources != (engine.Resources{}) || svcs[1].Image != baseImage() || svcs[0].Resources.CPUs != 1 {
		t.Fatalf("services %+v", svcs)
	}
	// Marked as the load generator: runtime kubernetes puts it on
	// kubernetes.client_node.
	if svcs[1].Labels[labels.Role] != "client" || svcs[0].Labels[labels.Role] != "" {
		t.Errorf("labels %v, %v", svcs[0].Labels, svcs[1].Labels)
	}

	hostLoad := "  command: [redis-benchmark-not-here, -h, '{{host:app}}']\n  parser: redis-benchmark\n"
	p, err = parseAppPlan(t, t.TempDir(), clientPlan(hostLoad, configs))
	if err != nil {
		t.Fatal(err)
	}
	c, _ = p.Config("ip")
	_, err = App{}.Services(ConfigFor(c))
	var tm *ToolMissingError
	if !errors.As(err, &tm) || tm.Program != "redis-benchmark-not-here" {
		t.Errorf("missing client program: %v", err)
	}
}

// TestClientExamplesValidate: the shipped examples of a client command
// read as plans, full and quick, with the figures they promise.
func TestClientExamplesValidate(t *testing.T) {
	for _, ex := range []struct {
		file    string
		configs []string
	}{
		{"../../examples/redis/plan.yaml", []string{"bare-metal", "docker-published", "docker-published-noproxy", "docker-container-ip", "docker-host-net"}},
		{"../../examples/postgres/plan.yaml", []string{"docker-layer", "docker-volume", "docker-bind"}},
	} {
		for _, quick := range []bool{false, true} {
			p, err := plan.Load(ex.file, plan.Options{Schema: planSchema{}, Quick: quick})
			if err != nil {
				t.Fatalf("%s (quick %v): %v", ex.file, quick, err)
			}
			for _, name := range ex.configs {
				c, ok := p.Config(name)
				if !ok {
					t.Fatalf("%s: no configuration %s", ex.file, name)
				}
				l := c.Decoded.Load.(AppLoad)
				if l.Client == nil || l.Client.Client != clientHost {
					t.Errorf("%s %s: load %+v", ex.file, name, l)
				}
			}
		}
	}
}

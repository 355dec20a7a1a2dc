package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/testenv"
)

func TestToolWorkloadsRegistered(t *testing.T) {
	for _, name := range []string{"kv", "fileio", "exec", "oltp", "cpu", "web", "bonnie", "ctxsw"} {
		if !slices.Contains(Names(), name) {
			t.Errorf("workload %q not registered (have %v)", name, Names())
		}
	}
}

func TestToolValidate(t *testing.T) {
	type row struct {
		desc    string
		name    string
		c       Config
		wantErr string // "" means valid
	}
	mk := func(desc, want, name string, app, ld map[string]any) row {
		return row{desc, name, Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataLayer, App: app, Load: ld}, want}
	}
	rows := []row{
		mk("kv defaults (memslap set, concurrency 4)", "", "kv", nil, nil),
		mk("kv open loop needs a rate", "load.mode open needs load.rate", "kv", nil, map[string]any{"mode": "open"}),
		mk("kv closed loop refuses a rate", "is for mode open", "kv", nil, map[string]any{"rate": 100}),
		mk("kv ops only closed", "applies to mode closed only", "kv", nil, map[string]any{"mode": "open", "rate": 10, "ops": 100}),
		mk("kv unknown mix op", "unknown operation \"delete\"", "kv", nil, map[string]any{"mix": "delete=1"}),
		mk("kv typo names the known knobs", "load.concurency: unknown knob (known: client, concurrency", "kv", nil, map[string]any{"concurency": 4}),
		mk("kv threads out of range", "app.threads = 0: out of range [1, 64]", "kv", map[string]any{"threads": 0}, nil),
		mk("kv connections below memcached's floor", "app.connections = 8: out of range", "kv", map[string]any{"connections": 8}, nil),
		mk("kv client in a container over host networking", "", "kv", nil, map[string]any{"client": "container"}),
		mk("kv client elsewhere", "want one of host, container", "kv", nil, map[string]any{"client": "vm"}),
		{"kv client in a container behind a published port", "kv",
			Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataLayer, Load: map[string]any{"client": "container"}},
			"load.client container reaches memcached at its container IP"},
		{"kv client in a container at the container IP", "kv",
			Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, Data: engine.DataLayer, Load: map[string]any{"client": "container"}}, ""},
		mk("fileio defaults", "", "fileio", nil, nil),
		mk("fileio unknown job", "want one of seqwrite", "fileio", nil, map[string]any{"job": "dd"}),
		mk("fileio size too small", "out of range [1M", "fileio", nil, map[string]any{"size": "4k"}),
		mk("fileio bad direct", "want auto, true or false", "fileio", nil, map[string]any{"direct": "yes"}),
		mk("fileio has no app knobs", "has no app knobs", "fileio", map[string]any{"workers": 3}, nil),
		{"fileio has no endpoint to publish", "fileio",
			Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkPublished, Data: engine.DataLayer}, "has no network endpoint"},
		mk("exec fork", "", "exec", nil, map[string]any{"test": "fork"}),
		mk("exec unknown test", "want one of spawn, shell, fork", "exec", nil, map[string]any{"test": "execl"}),
		mk("oltp defaults", "", "oltp", nil, nil),
		mk("oltp buffer pool below MariaDB's minimum", "out of range [5M", "oltp", map[string]any{"innodb_buffer_pool_size": "1M"}, nil),
		mk("oltp flush_log_at_trx_commit 3", "out of range [0, 2]", "oltp", map[string]any{"innodb_flush_log_at_trx_commit": 3}, nil),
		{"oltp split topology", "oltp",
			Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataLayer, Topology: "split"}, "topology split is not supported"},
		mk("cpu has no app knobs", "cpu has no app knobs", "cpu", map[string]any{"x": 1}, nil),
		mk("cpu max_prime as float from JSON", "", "cpu", nil, map[string]any{"max_prime": float64(2000)}),
		mk("cpu max_prime not whole", "want a whole number", "cpu", nil, map[string]any{"max_prime": 20.5}),
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			w, err := Get(r.name)
			if err != nil {
				t.Fatal(err)
			}
			err = validate(w, r.c)
			switch {
			case r.wantErr == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case r.wantErr != "" && (err == nil || !strings.Contains(err.Error(), r.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, r.wantErr)
			}
		})
	}
}

func TestHostToolsNamesWhatIsMissing(t *testing.T) {
	old := lookPath
	t.Cleanup(func() { lookPath = old })
	lookPath = func(name string) (string, error) {
		if name == "fio" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + name, nil
	}
	c := Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind}
	if _, err := (FileIO{}).Services(decoded(t, FileIO{}, c)); err == nil || !strings.Contains(err.Error(), "needs fio") {
		t.Errorf("fileio on a host without fio: %v", err)
	}
	if _, err := (CPU{}).Services(decoded(t, CPU{}, c)); err != nil {
		t.Errorf("cpu needs only sysbench: %v", err)
	}
	// A container brings its own tools: no host check.
	c.Runtime, c.Data = engine.RuntimeDocker, engine.DataLayer
	if _, err := (FileIO{}).Services(decoded(t, FileIO{}, c)); err != nil {
		t.Errorf("fileio in a container: %v", err)
	}
}

func TestFioArgs(t *testing.T) {
	w := Window{Warmup: 2 * time.Second, Duration: 10 * time.Second}
	tests := []struct {
		desc   string
		l      FileIOLoad
		direct bool
		want   []string
		absent []string
	}{
		{"seqwrite is dd: 1M blocks flushed at the end", FileIOLoad{Job: "seqwrite", Size: 64 << 20, Depth: 1}, true,
			[]string{"--rw=write", "--bs=1M", "--end_fsync=1", "--direct=1", "--ioengine=libaio", "--size=64M", "--runtime=10000ms", "--ramp_time=2000ms"}, nil},
		{"fsync after every 4k write, buffered", FileIOLoad{Job: "fsync", Size: 8 << 20}, false,
			[]string{"--fsync=1", "--bs=4k", "--ioengine=psync"}, []string{"--direct=1"}},
		{"smallfiles creates, stats and deletes the same files", FileIOLoad{Job: "smallfiles", Files: 300}, false,
			[]string{"--nrfiles=300", "--ioengine=filecreate", "--ioengine=filestat", "--ioengine=filedelete", "--stonewall"}, []string{"--time_based"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := fioArgs(tt.l, w, tt.direct)
			for _, a := range tt.want {
				if !slices.Contains(got, a) {
					t.Errorf("missing %s in %v", a, got)
				}
			}
			for _, a := range tt.absent {
				if slices.Contains(got, a) {
					t.Errorf("unexpected %s in %v", a, got)
				}
			}
		})
	}
}

func TestWantDirect(t *testing.T) {
	tests := []struct {
		desc             string
		l                FileIOLoad
		data             engine.DataPlacement
		direct, fallback bool
	}{
		{"auto tries O_DIRECT with a fallback", FileIOLoad{Job: "fsync", Direct: "auto"}, engine.DataLayer, true, true},
		{"tmpfs has no O_DIRECT", FileIOLoad{Job: "fsync", Direct: "true"}, engine.DataTmpfs, false, false},
		{"asked for buffered", FileIOLoad{Job: "seqwrite", Direct: "false"}, engine.DataVolume, false, false},
		{"forced direct has no fallback", FileIOLoad{Job: "seqwrite", Direct: "true"}, engine.DataVolume, true, false},
		{"smallfiles never direct", FileIOLoad{Job: "smallfiles", Direct: "true"}, engine.DataVolume, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d, f, _ := wantDirect(tt.l, tt.data)
			if d != tt.direct || f != tt.fallback {
				t.Errorf("direct, fallback = %v, %v; want %v, %v", d, f, tt.direct, tt.fallback)
			}
		})
	}
}

func TestParseExecOutput(t *testing.T) {
	out := "noise\nbatch 100 50000000\nbatch 100 150000000\ntotal 200 200000000\n"
	m, err := ParseExecOutput(strings.NewReader(out), "spawn")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Metrics["throughput_per_s"]; got != 1000 {
		t.Errorf("throughput = %v, want 1000 (200 processes in 0.2 s)", got)
	}
	op := m.Operations["spawn"]
	if op == nil || op.Count != 200 || op.MeanMs != 1 {
		t.Fatalf("operation = %+v, want 200 processes of 1 ms mean", op)
	}
	if m.Metrics["batches"] != 2 {
		t.Errorf("batches = %v", m.Metrics["batches"])
	}
	for _, bad := range []string{"batch 100 5000\n", "batch x 5\ntotal 1 1\n", ""} {
		if _, err := ParseExecOutput(strings.NewReader(bad), "spawn"); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4k": 4096, "64M": 64 << 20, "1G": 1 << 30} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1T", "1.5M", "M"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): want an error", bad)
		}
	}
	for n, want := range map[int64]string{4096: "4K", 128 << 20: "128M", 2 << 30: "2G", 1000: "1000"} {
		if got := fmtSize(n); got != want {
			t.Errorf("fmtSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestOLTPArgs(t *testing.T) {
	a, err := ParseOLTPApp(map[string]any{"innodb_buffer_pool_size": "256M", "innodb_lru_scan_depth": 2500,
		"innodb_buffer_pool_instances": 8, "innodb_flush_log_at_trx_commit": 2})
	if err != nil {
		t.Fatal(err)
	}
	got := oltpMariadbArgs(a)
	for _, want := range []string{"--innodb-buffer-pool-size=256M", "--innodb-lru-scan-depth=2500",
		"--innodb-buffer-pool-instances=8", "--innodb-flush-log-at-trx-commit=2"} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s in %v", want, got)
		}
	}
	// Defaults leave MariaDB's own values alone.
	if got := oltpMariadbArgs(DefaultOLTPApp); len(got) != 2 {
		t.Errorf("defaults: %v", got)
	}
	run := sysbenchOLTP(DefaultOLTPLoad, "run", 10*time.Second)
	if run[len(run)-1] != "run" || !slices.Contains(run, "--time=10") || !slices.Contains(run, "--mysql-socket=mysqld.sock") {
		t.Errorf("run argv %v", run)
	}
}

// toolCases are the tool workloads each run once on a runtime, with small
// knobs so a case takes seconds. Every case must produce a positive rate
// parsed from its tool's own output.
func toolCases(rt engine.Runtime) []struct {
	desc string
	w    Workload
	c    Config
} {
	data := engine.DataBind
	if rt == engine.RuntimeDocker {
		data = engine.DataLayer
	}
	c := func(net engine.NetworkMode, app, ld map[string]any) Config {
		return Config{Runtime: rt, Network: net, Data: data, App: app, Load: ld}
	}
	kvNet := engine.NetworkHost
	if rt == engine.RuntimeDocker {
		kvNet = engine.NetworkContainerIP
	}
	return []struct {
		desc string
		w    Workload
		c    Config
	}{
		{"kv memslap set", KV{}, c(kvNet, map[string]any{"threads": 2}, map[string]any{"concurrency": 2})},
		{"kv open loop get/set", KV{}, c(kvNet, nil, map[string]any{"mode": "open", "rate": 500, "mix": "get=9,set=1"})},
		{"fileio fsync", FileIO{}, c(engine.NetworkHost, nil, map[string]any{"job": "fsync", "size": "8M"})},
		{"fileio smallfiles", FileIO{}, c(engine.NetworkHost, nil, map[string]any{"job": "smallfiles", "files": 200})},
		{"exec spawn", Exec{}, c(engine.NetworkHost, nil, map[string]any{"test": "spawn"})},
		{"exec shell", Exec{}, c(engine.NetworkHost, nil, map[string]any{"test": "shell", "batch": 2})},
		{"exec fork", Exec{}, c(engine.NetworkHost, nil, map[string]any{"test": "fork"})},
		{"oltp", OLTP{}, c(engine.NetworkHost, map[string]any{"innodb_buffer_pool_size": "32M"},
			map[string]any{"tables": 1, "table_size": 1000, "threads": 2})},
		{"cpu", CPU{}, c(engine.NetworkHost, nil, map[string]any{"max_prime": 2000})},
	}
}

// runToolCases runs every tool case at once (see concurrently): each has a
// run id, a data directory and host ports of its own (memcached's and
// MariaDB's are {{port:…}} templates, relocated to free ports on the host's
// network), and their figures are not compared, only checked to be there.
func runToolCases(t *testing.T, eng engine.Engine, rt engine.Runtime, prefix string) {
	var subs []subtest
	for i, tc := range toolCases(rt) {
		subs = append(subs, subtest{tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			m := deployAndDrive(ctx, t, eng, tc.w, tc.c, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), i))
			if m.Metrics["throughput_per_s"] <= 0 {
				t.Errorf("throughput_per_s = %v (metrics %v, notes %v)", m.Metrics["throughput_per_s"], m.Metrics, m.Notes)
			}
			if len(m.Operations) == 0 {
				t.Errorf("no operations parsed")
			}
			for name, op := range m.Operations {
				if op.Count <= 0 {
					t.Errorf("operation %s: count %d", name, op.Count)
				}
			}
			if len(m.Tools) == 0 {
				t.Errorf("no tool recorded")
			}
			t.Logf("%s: %.0f/s, tools %v, notes %v", tc.desc, m.Metrics["throughput_per_s"], m.Tools, m.Notes)
		}})
	}
	concurrently(t, subs...)
}

// TestToolWorkloadsHostRoot runs every tool workload on the bare-metal
// runtime (its own cgroup needs root), with the host's Debian packages.
func TestToolWorkloadsHostRoot(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t, "the host runtime's cgroups")
	runToolCases(t, engine.NewBareMetal(), engine.RuntimeHost, "tooltest-host")
}

// TestToolWorkloadsDocker runs every tool workload in a container of the
// Debian base image.
func TestToolWorkloadsDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name)
	runToolCases(t, eng, engine.RuntimeDocker, "tooltest-docker")
}

func TestKVServerArgv(t *testing.T) {
	tests := []struct {
		desc string
		app  map[string]any
		want []string // flag, value pairs that must be on memcached's command line
	}{
		{"defaults: 4 threads, 256 MB, 4096 connections", nil, []string{"-t", "4", "-m", "256", "-c", "4096"}},
		{"connections knob", map[string]any{"connections": 1024, "threads": 2}, []string{"-t", "2", "-c", "1024"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := decoded(t, KV{}, Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, App: tt.app})
			svcs, err := KV{}.Services(c)
			if err != nil {
				t.Fatal(err)
			}
			argv := strings.Join(svcs[0].Command, " ")
			for i := 0; i < len(tt.want); i += 2 {
				if pair := tt.want[i] + " " + tt.want[i+1]; !strings.Contains(argv, pair) {
					t.Errorf("memcached argv %q lacks %q", argv, pair)
				}
			}
		})
	}
}

// TestOLTPBind: mariadbd listens on loopback where the ready check dials
// it there, and on a pod's own addresses (host names unresolved) where the
// check dials the pod from outside.
func TestOLTPBind(t *testing.T) {
	for _, tc := range []struct {
		rt   engine.Runtime
		net  engine.NetworkMode
		want []string
	}{
		{engine.RuntimeHost, engine.NetworkHost, []string{"--bind-address=127.0.0.1"}},
		{engine.RuntimeDocker, engine.NetworkHost, []string{"--bind-address=127.0.0.1"}},
		{plan.RuntimeKubernetes, plan.NetworkPodIP, []string{"--bind-address=0.0.0.0", "--skip-name-resolve"}},
		{plan.RuntimeKubernetes, plan.NetworkHostNetwork, []string{"--bind-address=0.0.0.0", "--skip-name-resolve"}},
	} {
		c := decoded(t, OLTP{}, Config{Runtime: tc.rt, Network: tc.net, Data: engine.DataLayer, App: map[string]any{}, Load: map[string]any{}})
		orig := lookPath
		lookPath = func(n string) (string, error) { return "/usr/sbin/" + n, nil }
		svcs, err := (OLTP{}).Services(c)
		lookPath = orig
		if err != nil {
			t.Fatal(err)
		}
		cmd := svcs[0].Command
		for _, w := range tc.want {
			if !slices.Contains(cmd, w) {
				t.Errorf("%s: no %s in %v", tc.rt, w, cmd[4:])
			}
		}
		if n := len(slices.DeleteFunc(slices.Clone(cmd), func(a string) bool { return !strings.HasPrefix(a, "--bind-address=") })); n != 1 {
			t.Errorf("%s: %d bind addresses in %v", tc.rt, n, cmd[4:])
		}
	}
}

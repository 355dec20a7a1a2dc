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
)

// Knobs, arguments and parsers of the seed-003 workloads (bonnie, exec
// copies, ctxsw) and their Docker runs.

func TestSeedWorkloadKnobs(t *testing.T) {
	ld := func(name string, m map[string]any) Config {
		return Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataLayer, Load: m}
	}
	rows := []struct {
		desc, name string
		c          Config
		want       string // "" means valid
		knob       string // the knob the error is at
	}{
		{"bonnie defaults", "bonnie", ld("bonnie", nil), "", ""},
		{"bonnie size in MiB", "bonnie", ld("bonnie", map[string]any{"size": "512M", "files": 4}), "", ""},
		{"bonnie size not whole MiB", "bonnie", ld("bonnie", map[string]any{"size": "1500K"}), "whole MiB", "load.size"},
		{"bonnie char_size above size", "bonnie", ld("bonnie", map[string]any{"size": "64M", "char_size": "128M"}), "larger than load.size", "load.char_size"},
		{"bonnie direct drops per-char by default", "bonnie", ld("bonnie", map[string]any{"direct": true, "primary": "put_block"}), "", ""},
		{"bonnie direct with per-char", "bonnie", ld("bonnie", map[string]any{"direct": true, "char_size": "20M"}), "bonnie++ -D fails the per-char phases", "load.char_size"},
		{"bonnie unknown primary", "bonnie", ld("bonnie", map[string]any{"primary": "seekz"}), "want one of putc", "load.primary"},
		{"bonnie primary of a skipped phase", "bonnie", ld("bonnie", map[string]any{"files": 0, "primary": "seq_create"}), "load.files = 0 skips", "load.primary"},
		{"bonnie per-char primary with direct", "bonnie", ld("bonnie", map[string]any{"direct": true, "primary": "getc"}), "char_size = 0 skips", "load.primary"},
		{"bonnie typo", "bonnie", ld("bonnie", map[string]any{"sise": "64M"}), "load.sise: unknown knob", "load.sise"},
		{"exec copies 16", "exec", ld("exec", map[string]any{"copies": 16}), "", ""},
		{"exec copies cpus", "exec", ld("exec", map[string]any{"copies": "cpus"}), "", ""},
		{"exec copies 0", "exec", ld("exec", map[string]any{"copies": 0}), "out of range [1, 1024]", "load.copies"},
		{"exec copies word", "exec", ld("exec", map[string]any{"copies": "all"}), "want a whole number or cpus", "load.copies"},
		{"ctxsw defaults", "ctxsw", ld("ctxsw", nil), "", ""},
		{"ctxsw method", "ctxsw", ld("ctxsw", map[string]any{"method": "futex"}), "want one of pipe, mq, sem-sysv", "load.method"},
		{"ctxsw pairs", "ctxsw", ld("ctxsw", map[string]any{"pairs": 0}), "out of range [1, 256]", "load.pairs"},
		{"ctxsw has no app knobs", "ctxsw", Config{Runtime: engine.RuntimeHost, App: map[string]any{"x": 1}}, "ctxsw has no app knobs", ""},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			w, err := Get(r.name)
			if err != nil {
				t.Fatal(err)
			}
			err = validate(w, r.c)
			switch {
			case r.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case r.want != "" && (err == nil || !strings.Contains(err.Error(), r.want)):
				t.Fatalf("err = %v, want one containing %q", err, r.want)
			}
			if r.knob != "" {
				if ke := knobErrorsOf(err); !slices.ContainsFunc(ke, func(k *plan.KnobError) bool { return k.Knob == r.knob }) {
					t.Errorf("no knob error at %s in %v", r.knob, err)
				}
			}
		})
	}
}

// knobErrorsOf is every *plan.KnobError in an errors.Join tree.
func knobErrorsOf(err error) []*plan.KnobError {
	var out []*plan.KnobError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ke, ok := e.(*plan.KnobError); ok {
			out = append(out, ke)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		walk(errors.Unwrap(e))
	}
	walk(err)
	return out
}

func TestBonnieArgs(t *testing.T) {
	l, err := ParseBonnieLoad(map[string]any{"size": "1G", "files": 16, "dirs": 16})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(bonnieArgs(l, 7), " ")
	want := "-d . -q -u root -r 0 -x 1 -m ctrperf -z 7 -s 1024 -n 16:0:0:16 -f20"
	if got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	// Direct I/O: -D, and -f alone, last (it takes an optional argument).
	l, _ = ParseBonnieLoad(map[string]any{"size": "256M", "files": 0, "direct": true})
	if got := strings.Join(bonnieArgs(l, 7), " "); !strings.HasSuffix(got, "-s 256 -n 0 -D -f") {
		t.Errorf("direct args: %s", got)
	}
}

func TestParseExecOutputCopies(t *testing.T) {
	// Two copies: 300 processes in 1 s and 100 in 0.5 s: 300 + 200 = 500/s.
	out := "copies 2\nbatch 100 300000000\nbatch 200 700000000\ntotal 300 1000000000\nbatch 100 500000000\ntotal 100 500000000\n"
	m, err := ParseExecOutput(strings.NewReader(out), "spawn")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Metrics["throughput_per_s"]; got != 500 {
		t.Errorf("throughput = %v, want 500", got)
	}
	if m.Metrics["copies"] != 2 || m.Metrics["per_copy_per_s"] != 250 || m.Operations["spawn"].Count != 400 || m.DurationS != 1 {
		t.Errorf("metrics %v, count %d, duration %v", m.Metrics, m.Operations["spawn"].Count, m.DurationS)
	}
	// A copy that did not finish its window fails the run.
	if _, err := ParseExecOutput(strings.NewReader("copies 3\ntotal 300 1000000000\ntotal 1 1000\n"), "spawn"); err == nil ||
		!strings.Contains(err.Error(), "2 of 3 copies") {
		t.Errorf("missing copy: err = %v", err)
	}
}

func TestExecArgvCarriesCopies(t *testing.T) {
	a := execArgv(ExecLoad{Test: "shell", Batch: 10, Copies: 0}, 16, Window{Warmup: time.Second, Duration: 2 * time.Second})
	if a[3] != "ctrperf-exec-copies" || a[4] != "16" || a[5] != execScript || a[6] != "shell" || a[7] != "1000000000" {
		t.Errorf("argv %q", a[3:])
	}
}

// TestSeedToolsDocker runs bonnie++ (tiny sizes), exec with copies = cpus
// and ctxsw pinned to one CPU in containers of the Debian base image, the
// three at once (their figures are only checked to be there).
func TestSeedToolsDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name)
	c := func(ld map[string]any, res engine.Resources) Config {
		return Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataVolume, Load: ld, Resources: res}
	}
	concurrently(t, subtest{"bonnie", func(t *testing.T) {
		// A tiny run (64 MiB, 1024 files under a 32 MiB memory limit): the
		// fast phases may finish in under 500 ms (+++++, no figure), so
		// the primary is the per-char write, which one-byte writes keep
		// slow enough to be timed: 4 MiB of it, since 1 MiB took under
		// 500 ms here (putc at 2.5 MB/s, 2026-11-25).
		m := deployAndDrive(ctx, t, eng, Bonnie{}, c(map[string]any{"size": "64M", "char_size": "4M", "files": 1, "dirs": 4, "primary": "putc"},
			engine.Resources{MemoryBytes: 32 << 20}), fmt.Sprintf("bonnietest-%d", os.Getpid()))
		if m.Metrics["throughput_per_s"] <= 0 || m.Metrics["bonnie_seq_out_char_kib_per_s"] != m.Metrics["throughput_per_s"] {
			t.Errorf("metrics %v, notes %v", m.Metrics, m.Notes)
		}
		if _, ok := m.Metrics["bonnie_seq_out_char_cpu_pct"]; !ok {
			t.Errorf("no %%CPU of the per-char write: %v", m.Metrics)
		}
		if !strings.HasPrefix(m.Tools["bonnie++"], "bonnie++ 2.") {
			t.Errorf("tools %v", m.Tools)
		}
		t.Logf("bonnie: %v; notes %v", m.Metrics, m.Notes)
	}}, subtest{"exec copies cpus", func(t *testing.T) {
		m := deployAndDrive(ctx, t, eng, Exec{}, c(map[string]any{"test": "spawn", "copies": "cpus"}, engine.Resources{CPUSet: "0-1"}),
			fmt.Sprintf("exectest-copies-%d", os.Getpid()))
		if m.Metrics["copies"] != 2 || m.Metrics["throughput_per_s"] <= 0 {
			t.Errorf("want 2 copies (cpuset 0-1) and a rate: %v", m.Metrics)
		}
		t.Logf("exec copies: %v", m.Metrics)
	}}, subtest{"ctxsw pinned", func(t *testing.T) {
		m := deployAndDrive(ctx, t, eng, CtxSw{}, c(nil, engine.Resources{CPUSet: "0"}), fmt.Sprintf("ctxswtest-%d", os.Getpid()))
		if m.Metrics["context_switches_per_s"] <= 0 || m.Metrics["switch_us"] <= 0 {
			t.Errorf("metrics %v", m.Metrics)
		}
		t.Logf("ctxsw: %v", m.Metrics)
	}})
}

func TestOLTPMariaDBKnobs(t *testing.T) {
	c := func(rt engine.Runtime, app map[string]any) Config {
		return Config{Runtime: rt, Network: engine.NetworkHost, Data: engine.DataVolume, App: app}
	}
	for _, tc := range []struct {
		desc string
		c    Config
		want string
		knob string
	}{
		{"pool instances refused on the base image's MariaDB 10.11", c(engine.RuntimeDocker, map[string]any{"innodb_buffer_pool_instances": 8}),
			"MariaDB 10.11, which has no such variable", "app.innodb_buffer_pool_instances"},
		{"pool instances decode on the host (checked when deploying)", c(engine.RuntimeHost, map[string]any{"innodb_buffer_pool_instances": 8}), "", ""},
		{"query cache type", c(engine.RuntimeDocker, map[string]any{"query_cache_type": "ON", "query_cache_size": "128M"}), "", ""},
		{"query cache type lower case", c(engine.RuntimeDocker, map[string]any{"query_cache_type": "on"}), "want one of OFF, ON, DEMAND", "app.query_cache_type"},
		{"query cache size", c(engine.RuntimeDocker, map[string]any{"query_cache_size": "32G"}), "out of range [0, 16G]", "app.query_cache_size"},
		{"io capacity", c(engine.RuntimeDocker, map[string]any{"innodb_io_capacity": 50}), "out of range [100, 10000000]", "app.innodb_io_capacity"},
		{"io threads", c(engine.RuntimeDocker, map[string]any{"innodb_read_io_threads": 65}), "out of range [1, 64]", "app.innodb_read_io_threads"},
		{"write io threads", c(engine.RuntimeDocker, map[string]any{"innodb_write_io_threads": 0}), "out of range [1, 64]", "app.innodb_write_io_threads"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := validate(OLTP{}, tc.c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if tc.knob != "" && !slices.ContainsFunc(knobErrorsOf(err), func(k *plan.KnobError) bool { return k.Knob == tc.knob }) {
				t.Errorf("no knob error at %s in %v", tc.knob, err)
			}
		})
	}

	a, err := ParseOLTPApp(map[string]any{"query_cache_type": "ON", "query_cache_size": "128M", "innodb_io_capacity": 2000,
		"innodb_read_io_threads": 8, "innodb_write_io_threads": 4})
	if err != nil {
		t.Fatal(err)
	}
	got := oltpMariadbArgs(a)
	for _, want := range []string{"--query-cache-type=ON", "--query-cache-size=134217728", "--innodb-io-capacity=2000",
		"--innodb-read-io-threads=8", "--innodb-write-io-threads=4"} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s in %v", want, got)
		}
	}
	// query_cache_size 0 (the seed's winner) is written, not left to the default.
	a, _ = ParseOLTPApp(map[string]any{"query_cache_size": 0})
	if !slices.Contains(oltpMariadbArgs(a), "--query-cache-size=0") {
		t.Errorf("query_cache_size 0: %v", oltpMariadbArgs(a))
	}
}

func TestOLTPPoolInstancesOnTheHost(t *testing.T) {
	orig := hostMariaDBVersion
	t.Cleanup(func() { hostMariaDBVersion = orig })
	c := decoded(t, OLTP{}, Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind,
		App: map[string]any{"innodb_buffer_pool_instances": 8}})
	origLook := lookPath
	t.Cleanup(func() { lookPath = origLook })
	lookPath = func(n string) (string, error) { return "/usr/sbin/" + n, nil }

	hostMariaDBVersion = func() (string, error) { return "10.11.19", nil }
	if _, err := (OLTP{}).Services(c); err == nil || !strings.Contains(err.Error(), "this host has MariaDB 10.11.19, which has no such variable") {
		t.Errorf("10.11: err = %v", err)
	}
	hostMariaDBVersion = func() (string, error) { return "10.3.39", nil }
	svcs, err := (OLTP{}).Services(c)
	if err != nil || !slices.Contains(svcs[0].Command, "--innodb-buffer-pool-instances=8") {
		t.Errorf("10.3: %v, %v", err, svcs)
	}
	hostMariaDBVersion = func() (string, error) { return "", errors.New("mariadbd --version: exit status 1") }
	if _, err := (OLTP{}).Services(c); err == nil || !strings.Contains(err.Error(), "needs the host's MariaDB version") {
		t.Errorf("unknown version: err = %v", err)
	}
}

func TestMariaDBVersion(t *testing.T) {
	m := mariadbVersionRE.FindStringSubmatch("mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)")
	if m == nil || m[1] != "10.11.19" {
		t.Fatalf("got %v", m)
	}
	for v, want := range map[string]bool{"10.11.19": true, "10.6.0": true, "11.4.2": true, "10.5.23": false, "10.3": false, "garbage": false} {
		if got := mariadbNoPoolInstances(v); got != want {
			t.Errorf("%s: %v, want %v", v, got, want)
		}
	}
}

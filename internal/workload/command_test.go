package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

// fakeTarget is an ExecFunc that plays the target of the command workload:
// it answers the clock probe and runs commandScript's contract (env, the
// timing line after the command's stderr) with outcomes a test chooses.
type fakeTarget struct {
	clock  string // what date +%s%N prints; "" is a nanosecond clock
	uptime string // what the probe reads from /proc/uptime; "" is 5000.00, "-" none
	// step moves the wall clock (date) during every timed execution, as
	// NTP or an administrator would; /proc/uptime goes on unmoved.
	step time.Duration
	// run answers one execution of argv (prepare or command) with its env.
	run   func(ctx context.Context, argv []string, env map[string]string) (stdout, stderr string, status int, wall time.Duration, err error)
	calls []string // "probe", "prepare:ARGV", "time:ARGV", "plain:ARGV"
	t0    int64    // date's reading, ns
	up    int64    // CLOCK_BOOTTIME, ns
}

// uptimeField is ns as /proc/uptime prints it: hundredths, truncated.
func uptimeField(ns int64) string {
	return fmt.Sprintf("%d.%02d", ns/1e9, ns%1e9/1e7)
}

func (f *fakeTarget) exec(ctx context.Context, argv []string) ([]byte, []byte, int, error) {
	if slices.Equal(argv, []string{"/bin/sh", "-c", clockProbe}) {
		f.calls = append(f.calls, "probe")
		c, u := f.clock, f.uptime
		if c == "" {
			c = "1700000000123456789"
		}
		switch u {
		case "":
			c += "\n5000.00"
		case "-":
		default:
			c += "\n" + u
		}
		return []byte(c + "\n"), nil, 0, nil
	}
	if len(argv) < 7 || argv[2] != commandScript || argv[3] != "ctrperf-command" {
		return nil, nil, -1, fmt.Errorf("fake target: unexpected argv %q", argv)
	}
	mode, mark := argv[4], argv[5]
	env := map[string]string{}
	i := 6
	for ; argv[i] != "--"; i++ {
		k, v, _ := strings.Cut(argv[i], "=")
		env[k] = v
	}
	cmd := argv[i+1:]
	f.calls = append(f.calls, mode+":"+strings.Join(cmd, " "))
	out, errOut, status, wall, err := f.run(ctx, cmd, env)
	if err != nil {
		return nil, nil, -1, err
	}
	if mode == "plain" {
		return []byte(out), []byte(errOut), status, nil
	}
	// Time passes between executions; uptime's start is not on a
	// hundredth, so that its truncation shows.
	f.t0 += 1e9
	f.up += 1e9 + 4e6
	start, up0 := f.t0, f.up
	f.t0 += wall.Nanoseconds() + f.step.Nanoseconds()
	f.up += wall.Nanoseconds()
	errOut += fmt.Sprintf("\n%s %d %d %d %s %s\n", mark, status, start, f.t0, uptimeField(up0), uptimeField(f.up))
	return []byte(out), []byte(errOut), 0, nil
}

// runner is a commandRunner over the fake with the knobs given as a plan
// would write them.
func (f *fakeTarget) runner(t *testing.T, app, ld map[string]any) (*commandRunner, *[]string) {
	t.Helper()
	a, err := ParseCommandApp(app)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseCommandLoad(ld)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	now := time.Unix(0, 0)
	r := &commandRunner{exec: f.exec, app: a, load: l, command: a.commandFor(engine.RuntimeDocker), mark: "MARK-42",
		now:     func() time.Time { now = now.Add(250 * time.Millisecond); return now },
		started: func() { events = append(events, fmt.Sprintf("started after %d calls", len(f.calls))) }}
	return r, &events
}

func TestCommandTimesEachRunAndTakesTheFigure(t *testing.T) {
	walls := []time.Duration{900 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} // warm-up first
	n := 0
	f := &fakeTarget{run: func(_ context.Context, argv []string, env map[string]string) (string, string, int, time.Duration, error) {
		if env["LANG"] != "C" {
			return "", "", 1, 0, fmt.Errorf("env not passed: %v", env)
		}
		if argv[0] == "rm" {
			return "", "", 0, 0, nil
		}
		w := walls[n]
		n++
		// The command's own stderr comes before the timing line and
		// must not be mistaken for it.
		return fmt.Sprintf("progress\nevents per second:   %d.5\n", 100*n), "MARK-4 warning on stderr", 0, w, nil
	}}
	r, events := f.runner(t,
		map[string]any{"command": "sysbench cpu run", "prepare": []any{"rm", "-f", "x"}, "env": map[string]any{"LANG": "C"}},
		map[string]any{"runs": 3, "warmup_runs": 1, "figure": "events_per_s", "figure_regex": `events per second:\s+(?P<value>[0-9.]+)`})
	m, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{"probe", "plain:rm -f x", "time:/bin/sh -c sysbench cpu run", "plain:rm -f x", "time:/bin/sh -c sysbench cpu run",
		"plain:rm -f x", "time:/bin/sh -c sysbench cpu run", "plain:rm -f x", "time:/bin/sh -c sysbench cpu run"}
	if !slices.Equal(f.calls, wantCalls) {
		t.Errorf("calls:\n got %q\nwant %q", f.calls, wantCalls)
	}
	if want := []string{"started after 3 calls"}; !slices.Equal(*events, want) {
		t.Errorf("Started: %v, want %v (after the warm-up, before the first timed run's prepare)", *events, want)
	}
	if len(m.Executions) != 3 {
		t.Fatalf("executions = %+v, want the 3 timed ones", m.Executions)
	}
	for i, want := range []struct{ wall, fig float64 }{{1, 200.5}, {2, 300.5}, {4, 400.5}} {
		if e := m.Executions[i]; e.WallS != want.wall || e.Figures["events_per_s"] != want.fig {
			t.Errorf("execution %d = %+v, want wall %v figure %v", i, e, want.wall, want.fig)
		}
	}
	sd := math.Sqrt(((1-7.0/3)*(1-7.0/3) + (2-7.0/3)*(2-7.0/3) + (4-7.0/3)*(4-7.0/3)) / 2)
	for k, want := range map[string]float64{"wall_median_s": 2, "wall_mean_s": 7.0 / 3, "wall_min_s": 1, "wall_max_s": 4,
		"wall_stddev_s": sd, results.MetricElapsed: 7, results.MetricThroughput: 3.0 / 7, "events_per_s": 300.5} {
		if got, ok := m.Metrics[k]; !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	op := m.Operations["command"]
	if op == nil || op.Count != 3 || op.PercentilesMs["50"] != 2000 {
		t.Errorf("operation = %+v, want 3 executions with p50 2000 ms", op)
	}
	if d := m.Declared["events_per_s"]; d.Better != results.BetterHigher {
		t.Errorf("figure declared %+v, want higher is better (from its name)", d)
	}
	if d := m.Declared["wall_median_s"]; d.Better != results.BetterLower || d.Unit != "s" {
		t.Errorf("wall_median_s declared %+v", d)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "inside the target") }) {
		t.Errorf("notes %q do not say the time was taken inside the target", m.Notes)
	}
}

func TestCommandTimesAroundTheExecWithoutANanosecondClock(t *testing.T) {
	f := &fakeTarget{clock: "1700000000N", run: func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
		return `{"results": [{"tps": "812.25"}]}`, "", 0, time.Hour, nil // the wrapper's own timing is not used
	}}
	r, _ := f.runner(t, map[string]any{"command": []any{"bench", "--json"}},
		map[string]any{"runs": 2, "warmup_runs": 0, "figure": "tps", "better": "higher", "figure_json": ".results[0].tps", "figure_unit": "tx/s"})
	m, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"probe", "plain:bench --json", "plain:bench --json"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	// The fake clock advances 250 ms per reading: one exec is 250 ms.
	if m.Metrics["wall_median_s"] != 0.25 || m.Metrics["tps"] != 812.25 {
		t.Errorf("metrics %v, want wall 0.25 s (the clock around the exec) and tps 812.25", m.Metrics)
	}
	if d := m.Declared["tps"]; d != (results.MetricInfo{Better: "higher", Unit: "tx/s"}) {
		t.Errorf("tps declared %+v", d)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "around each exec") }) {
		t.Errorf("notes %q do not say the time includes the exec", m.Notes)
	}
	if _, ok := m.Metrics["wall_stddev_s"]; !ok {
		t.Error("two runs have a standard deviation")
	}
}

func TestCommandFailures(t *testing.T) {
	ok := func(out string) func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
		return func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
			return out, "", 0, time.Second, nil
		}
	}
	tests := []struct {
		desc string
		app  map[string]any
		ld   map[string]any
		run  func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error)
		want []string
	}{
		{"non-zero exit shows the end of stderr", nil, nil,
			func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
				return "", strings.Repeat("noise\n", 50) + "FATAL: database \"x\" does not exist", 2, time.Second, nil
			}, []string{"warm-up 1 of 1", "exited with status 2", `FATAL: database "x" does not exist`}},
		{"status 127 says not found", nil, nil,
			func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
				return "", "sh: 1: pgbench: not found", 127, 0, nil
			}, []string{"status 127 (command not found in the target)", "pgbench: not found"}},
		{"a failing prepare", map[string]any{"prepare": "sync"}, nil,
			func(_ context.Context, argv []string, _ map[string]string) (string, string, int, time.Duration, error) {
				if strings.Contains(strings.Join(argv, " "), "sync") {
					return "", "sync: I/O error", 1, 0, nil
				}
				return "", "", 0, time.Second, nil
			}, []string{"prepare before warm-up 1 of 1 (sync) exited with status 1", "I/O error"}},
		{"a pattern that never matches shows the output", nil,
			map[string]any{"figure": "events_per_s", "figure_regex": `events/s: (?P<value>[0-9.]+)`},
			ok("total time: 5.0s\nevents per second: 1234\n"),
			[]string{"figure events_per_s", "matched nothing in stdout", "events per second: 1234"}},
		{"a match that is no number", nil,
			map[string]any{"figure": "x_ms", "figure_regex": `took (\S+)`}, ok("took fast"),
			[]string{`value "fast" is not a number`}},
		{"a JSON path that does not resolve", nil,
			map[string]any{"figure": "tps", "better": "higher", "figure_json": ".results[2].tps"},
			ok(`{"results": [{"tps": 1}, {"tps": 2}]}`), []string{".results has 2 elements, no [2]"}},
		{"a JSON key that is missing names the keys", nil,
			map[string]any{"figure": "tps", "better": "higher", "figure_json": ".summary.tps"},
			ok(`{"summary": {"qps": 1, "latency": 2}}`), []string{`.summary has no key "tps" (it has "latency", "qps")`}},
		{"no JSON at all", nil,
			map[string]any{"figure": "tps", "better": "higher", "figure_json": ".tps"},
			ok("Error: connection refused"), []string{"no JSON document", "connection refused"}},
		{"the figure on stderr", nil,
			map[string]any{"figure": "real_ms", "figure_regex": `real (?P<value>\d+)`, "figure_from": "stderr"},
			ok("real 12"), []string{"matched nothing in stderr"}},
		{"a timeout", map[string]any{}, map[string]any{"timeout": "200ms"},
			func(ctx context.Context, _ []string, _ map[string]string) (string, string, int, time.Duration, error) {
				<-ctx.Done()
				return "", "", 0, 0, context.Cause(ctx)
			}, []string{"warm-up 1 of 1: timed out after 200ms (load.timeout)"}},
		{"a wrapper that did not finish", nil, nil,
			func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
				return "", "", 0, 0, errors.New("connection reset")
			}, []string{"connection reset"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			app := map[string]any{"command": "pgbench -T 5"}
			for k, v := range tt.app {
				app[k] = v
			}
			f := &fakeTarget{run: tt.run}
			r, _ := f.runner(t, app, tt.ld)
			m, err := r.run(context.Background())
			if err == nil {
				t.Fatalf("no error; measurement %+v", m)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestSplitTiming(t *testing.T) {
	tests := []struct {
		desc   string
		stderr string
		own    string
		status int
		wall   wallTime
		err    string
	}{
		{"the last timing line is the wrapper's", "a\nM 1 2 3 1.00 1.00\nb\nM 7 100 350 7.00 7.00\n", "a\nM 1 2 3 1.00 1.00\nb", 7, wallTime{Duration: 250}, ""},
		{"date's nanoseconds while uptime agrees", "\nM 0 1000000000 2234567891 100.00 101.23\n", "", 0, wallTime{Duration: 1234567891}, ""},
		{"uptime's interval when date jumped an hour", "\nM 0 1000000000 3601700000000 100.00 100.70\n", "", 0,
			wallTime{Duration: 700 * time.Millisecond, Stepped: true, Skew: time.Hour}, ""},
		{"uptime's interval when date went back", "\nM 0 90000000000 30700000000 100.00 100.70\n", "", 0,
			wallTime{Duration: 700 * time.Millisecond, Stepped: true, Skew: -time.Minute}, ""},
		{"no timing line", "only the command's\n", "only the command's\n", 0, wallTime{}, "no timing line"},
		{"a date without %N", "\nM 0 17000000%N 17000001%N 1.00 2.00\n", "", 0, wallTime{}, "+%s%N"},
		{"the old three fields", "\nM 0 100 350\n", "", 0, wallTime{}, "bad timing line"},
		{"no /proc/uptime", "\nM 0 100 350 - -\n", "", 0, wallTime{}, "/proc/uptime"},
		{"an uptime that is no number", "\nM 0 100 350 1e3 2.00\n", "", 0, wallTime{}, "/proc/uptime"},
		{"uptime going back", "\nM 0 100 350 2.00 1.00\n", "", 0, wallTime{}, "/proc/uptime"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			own, status, wall, err := splitTiming([]byte(tt.stderr), "M")
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err %v, want one containing %q", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			}
			if string(own) != tt.own || status != tt.status || wall != tt.wall {
				t.Errorf("got %q %d %+v, want %q %d %+v", own, status, wall, tt.own, tt.status, tt.wall)
			}
		})
	}
}

// TestCommandWallTimeIgnoresWallClockSteps: an execution's wall time is
// the true duration whatever the target's wall clock (date) did meanwhile:
// date's nanoseconds while it agrees with /proc/uptime, uptime's interval
// (10 ms) and a note when it does not. date's difference alone gave
// 3600.7 s for an hour's step and refused a step back.
func TestCommandWallTimeIgnoresWallClockSteps(t *testing.T) {
	tests := []struct {
		desc    string
		step    time.Duration
		wall    time.Duration // the true duration
		want    float64
		stepped bool
	}{
		{"no step keeps nanoseconds", 0, 1234567891, 1.234567891, false},
		{"the clock jumps an hour ahead", time.Hour, 700 * time.Millisecond, 0.7, true},
		{"the clock is set back a day", -24 * time.Hour, 700 * time.Millisecond, 0.7, true},
		{"a step ntpd would make (130 ms)", 130 * time.Millisecond, 2 * time.Second, 2, true},
		{"a step within uptime's resolution goes unseen", 15 * time.Millisecond, 700 * time.Millisecond, 0.715, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := &fakeTarget{step: tt.step, run: func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
				return "", "", 0, tt.wall, nil
			}}
			r, _ := f.runner(t, map[string]any{"command": "make"}, map[string]any{"runs": 2, "warmup_runs": 1})
			m, err := r.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range m.Executions {
				if math.Abs(e.WallS-tt.want) > 1e-12 {
					t.Errorf("execution %d: wall %v s, want %v", i, e.WallS, tt.want)
				}
			}
			if got := m.Metrics["wall_median_s"]; math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("wall_median_s %v, want %v", got, tt.want)
			}
			var notes []string
			for _, n := range m.Notes {
				if strings.Contains(n, "/proc/uptime counted") {
					notes = append(notes, n)
				}
			}
			switch {
			case tt.stepped && len(notes) != 2:
				t.Errorf("notes %q, want one for each of the 2 timed runs (not the warm-up) saying uptime's time was taken", m.Notes)
			case !tt.stepped && len(notes) != 0:
				t.Errorf("notes %q, want none about the clocks", m.Notes)
			}
			if len(notes) > 0 && !strings.HasPrefix(notes[0], "command: run 1 of 2: date in the target counted") {
				t.Errorf("note %q, want it to name the run", notes[0])
			}
		})
	}
}

// TestCommandClockProbe: the wall time is taken in the target only when
// date gives nanoseconds and /proc/uptime is there to check them; else
// around the exec, on ctrperf's monotonic clock, the note saying why.
func TestCommandClockProbe(t *testing.T) {
	tests := []struct {
		desc, clock, uptime string
		want                string // in the timing note
	}{
		{"both", "", "", "inside the target"},
		{"a busybox date without %N", "1700000000N", "", "around each exec on the monotonic clock, the exec's start-up included (docker exec: tens of ms): date +%s%N in the target gives no nanoseconds"},
		{"a date with seconds only", "1700000000", "", "gives no nanoseconds"},
		{"no /proc/uptime", "", "-", "no readable /proc/uptime"},
		{"a strange /proc/uptime", "", "up 3 days", "no readable /proc/uptime"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := &fakeTarget{clock: tt.clock, uptime: tt.uptime, run: func(context.Context, []string, map[string]string) (string, string, int, time.Duration, error) {
				return "", "", 0, time.Second, nil
			}}
			r, _ := f.runner(t, map[string]any{"command": "make"}, map[string]any{"runs": 1, "warmup_runs": 0})
			m, err := r.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(m.Tools["timing"], tt.want) {
				t.Errorf("timing %q, want it to contain %q", m.Tools["timing"], tt.want)
			}
			mode := "time"
			if tt.want != "inside the target" {
				mode = "plain"
			}
			if want := []string{"probe", mode + ":/bin/sh -c make"}; !slices.Equal(f.calls, want) {
				t.Errorf("calls %q, want %q", f.calls, want)
			}
		})
	}
}

// TestCommandScriptInTheShell runs the probe and the wrapper in the
// host's /bin/sh (dash here, as in the Debian base) with a real sleep: the
// readings of /proc/uptime parse and the wall time is the sleep's, also
// when a date earlier in PATH jumps an hour between its two readings.
func TestCommandScriptInTheShell(t *testing.T) {
	dir := t.TempDir()
	steppingDate := `#!/bin/sh
n=$(cat "$0.n" 2>/dev/null || echo 0); echo $((n + 1)) >"$0.n"
if [ "$n" = 0 ]; then echo 1000000000000000000; else echo 1000003600300000000; fi
`
	if err := os.WriteFile(filepath.Join(dir, "date"), []byte(steppingDate), 0o700); err != nil {
		t.Fatal(err)
	}
	shell := func(ctx context.Context, argv []string) ([]byte, []byte, int, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return out.Bytes(), errOut.Bytes(), ee.ExitCode(), nil
		}
		return out.Bytes(), errOut.Bytes(), 0, err
	}
	tests := []struct {
		desc    string
		env     map[string]any
		stepped bool
	}{
		{"the system's date", nil, false},
		{"a date that jumps an hour", map[string]any{"PATH": dir + ":" + os.Getenv("PATH")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			app := map[string]any{"command": []any{"sleep", "0.3"}}
			if tt.env != nil {
				app["env"] = tt.env
			}
			a, err := ParseCommandApp(app)
			if err != nil {
				t.Fatal(err)
			}
			l, err := ParseCommandLoad(map[string]any{"runs": 1, "warmup_runs": 0, "timeout": "30s"})
			if err != nil {
				t.Fatal(err)
			}
			r := &commandRunner{exec: shell, now: time.Now, app: a, load: l, command: a.Command, mark: "ctrperf-command-timing-test"}
			m, err := r.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(m.Tools["timing"], "inside the target") {
				t.Fatalf("timing %q: the host's sh has date +%%s%%N and /proc/uptime", m.Tools["timing"])
			}
			// Uptime's interval may be up to 10 ms short of the sleep.
			if w := m.Executions[0].WallS; w < 0.29 || w > 2 {
				t.Errorf("wall %v s for sleep 0.3", w)
			}
			stepped := slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "date in the target counted 3600.") })
			if tt.stepped != stepped {
				t.Errorf("notes %q: want a note of the step %v", m.Notes, tt.stepped)
			}
		})
	}
}

func TestJSONPath(t *testing.T) {
	doc := `banner line
{"results": [{"tps": 10.5, "name": "a"}, {"tps": "7"}], "a.b": {"x]": 3}, "n": null, "list": [[1, 2], [3]]}
trailing text`
	tests := []struct {
		path string
		want float64
		err  string
	}{
		{".results[0].tps", 10.5, ""},
		{".results[1].tps", 7, ""},
		{`.["a.b"]["x]"]`, 3, ""},
		{".list[1][0]", 3, ""},
		{".results[0].name", 0, `.results[0].name is the string "a", not a number`},
		{".n", 0, "null, not a number"},
		{".results.tps", 0, ".results is an array, not an object"},
		{".list[0][5]", 0, ".list[0] has 2 elements, no [5]"},
		{".results[0].name.x", 0, `.results[0].name is a string, not an object with key "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := parseJSONPath(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := decodeJSONOutput([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.lookup(d)
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("= %v, %v; want %v", got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
	for _, bad := range []string{"results", ".", ".a..b", ".a[", ".a[-1]", ".a[x]", `.["a"`, ".a b"} {
		if bad == "." {
			if _, err := parseJSONPath(bad); err != nil {
				t.Errorf("%q (the whole document) refused: %v", bad, err)
			}
			continue
		}
		if _, err := parseJSONPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCommandKnobs(t *testing.T) {
	tests := []struct {
		desc    string
		app, ld map[string]any
		want    string // "" valid
	}{
		{"a string command", map[string]any{"command": "make -j2"}, nil, ""},
		{"an argv with a number", map[string]any{"command": []any{"sleep", 1}}, nil, ""},
		{"the command is required", map[string]any{"image": "postgres:16"}, nil, "app.command is required"},
		{"an empty command", map[string]any{"command": "  "}, nil, "app.command =   : empty command"},
		{"an argv with an empty program", map[string]any{"command": []any{"", "x"}}, nil, "program (first element) is empty"},
		{"a mapping is no command", map[string]any{"command": map[string]any{"a": 1}}, nil, "want a command"},
		{"an image with a space", map[string]any{"command": "x", "image": "a b"}, nil, "want an image reference"},
		{"env names", map[string]any{"command": "x", "env": map[string]any{"1X": "y"}}, nil, `"1X" is not a variable name`},
		{"env may not move the data directory", map[string]any{"command": "x", "env": map[string]any{dataEnv: "/"}}, nil, "set by ctrperf"},
		{"a typo names the known knobs", map[string]any{"command": "x", "comand": "y"}, nil, "app.comand: unknown knob (known: command, env, host_command, image, prepare)"},
		{"runs 0", nil, map[string]any{"runs": 0}, "load.runs = 0: out of range [1, 100000]"},
		{"a timeout that is no duration", nil, map[string]any{"timeout": 5}, "load.timeout = 5: want a duration"},
		{"a figure needs a place", nil, map[string]any{"figure": "tps_per_s"}, "say where it is in the output"},
		{"a place needs a name", nil, map[string]any{"figure_json": ".tps"}, "load.figure_json: name the figure"},
		{"not both places", nil, map[string]any{"figure": "tps_per_s", "figure_json": ".tps", "figure_regex": "(x)"}, "not both"},
		{"a bad regex", nil, map[string]any{"figure": "tps_per_s", "figure_regex": "(x"}, "load.figure_regex = (x: error parsing regexp"},
		{"a regex with two groups and no value", nil, map[string]any{"figure": "tps_per_s", "figure_regex": "(a)(b)"}, "mark the number with (?P<value>"},
		{"a bad JSON path", nil, map[string]any{"figure": "tps_per_s", "figure_json": "results.tps"}, `starts with "."`},
		{"a neutral name needs better", nil, map[string]any{"figure": "tps", "figure_json": ".tps"}, "add load.better: higher or lower"},
		{"better against the name", nil, map[string]any{"figure": "tps_per_s", "figure_json": ".tps", "better": "lower"}, "says the opposite"},
		{"better with a neutral name", nil, map[string]any{"figure": "build_s", "figure_json": ".t", "better": "lower"}, ""},
		{"a reserved figure name", nil, map[string]any{"figure": "wall_median_s", "figure_json": ".t"}, "reports that name itself"},
		{"a figure name with capitals", nil, map[string]any{"figure": "TPS", "figure_json": ".t", "better": "higher"}, "want a metric name"},
		{"better without a figure", nil, map[string]any{"better": "higher"}, "load.better: there is no figure"},
		{"a configuration's null unsets the plan's pattern", nil, map[string]any{"figure": "tps_per_s", "figure_json": ".tps", "figure_regex": nil}, ""},
		{"figure_from", nil, map[string]any{"figure": "t_ms", "figure_regex": "(x)", "figure_from": "stdin"}, "want one of stdout, stderr, both"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			app := tt.app
			if app == nil {
				app = map[string]any{"command": "true"}
			}
			_, _, err := Command{}.Decode(Knobs{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, App: app, Load: tt.ld})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	_, _, err := Command{}.Decode(Knobs{Network: engine.NetworkPublished, App: map[string]any{"command": "x"}})
	if err == nil || !strings.Contains(err.Error(), "no network endpoint") {
		t.Errorf("published network: %v", err)
	}
}

func TestCommandServices(t *testing.T) {
	old := lookPath
	t.Cleanup(func() { lookPath = old })
	var looked []string
	lookPath = func(name string) (string, error) {
		looked = append(looked, name)
		if name == "pgbench" || name == "/opt/bench" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + name, nil
	}
	host := Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind}
	docker := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataLayer,
		Resources: engine.Resources{CPUSet: "1"}}
	with := func(c Config, app map[string]any) Config {
		c.App = app
		return decoded(t, Command{}, c)
	}
	tests := []struct {
		desc   string
		c      Config
		want   string // error
		looked []string
	}{
		{"the host command's program is looked for", with(host, map[string]any{"command": "sysbench cpu run", "host_command": "pgbench -T 5"}),
			"command on the host runtime needs pgbench", []string{"pgbench"}},
		{"an argv's program and prepare's", with(host, map[string]any{"command": []any{"/opt/bench", "-x"}, "prepare": "sync"}),
			"needs /opt/bench", []string{"/opt/bench", "sync"}},
		{"a shell line starting with a builtin is not looked for", with(host, map[string]any{"command": "cd src && make"}), "", nil},
		{"a relative path lives in the data directory", with(host, map[string]any{"command": "./run-tests"}), "", nil},
		{"an assignment first", with(host, map[string]any{"command": "N=3 make"}), "", nil},
		{"a container brings its own", with(docker, map[string]any{"command": "pgbench"}), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			looked = nil
			svcs, err := Command{}.Services(tt.c)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want services, got %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if !slices.Equal(looked, tt.looked) {
				t.Errorf("looked for %q, want %q", looked, tt.looked)
			}
			if err == nil && (len(svcs) != 1 || svcs[0].Name != commandService || svcs[0].DataDir != toolDataDir || svcs[0].Resources != tt.c.Resources) {
				t.Errorf("services %+v", svcs)
			}
		})
	}
	svcs, err := Command{}.Services(with(docker, map[string]any{"command": "x", "image": "postgres:16"}))
	if err != nil || svcs[0].Image != "postgres:16" {
		t.Errorf("image knob: %+v %v", svcs, err)
	}
	svcs, err = Command{}.Services(with(docker, map[string]any{"command": "x"}))
	if err != nil || svcs[0].Image != baseImage() {
		t.Errorf("default image: %+v %v, want %s", svcs, err, baseImage())
	}
}

func TestCommandArgvPassesEnvSorted(t *testing.T) {
	got := commandArgv("time", "M", map[string]string{"B": "2", "A": "x y"}, []string{"make", "-j2"})
	want := []string{"/bin/sh", "-c", commandScript, "ctrperf-command", "time", "M", "A=x y", "B=2", "--", "make", "-j2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestCommandHostAndContainerDocker runs one command on the host runtime
// and in a container of the Debian base: dd writing 8 MiB in the data
// directory (the working directory, checked by the command itself), after a
// prepare that removes the file, its own seconds parsed from stderr. Both
// must record the wall time of every execution and the parsed figure. The
// wrapper then times a sleep 0.3 in the same target: its wall time (date
// checked against /proc/uptime in the target's shell) is at least the
// sleep's, less uptime's 10 ms, and at most ctrperf's monotonic time
// around the whole exec.
func TestCommandHostAndContainerDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker := dockerEngine(t, ctx, image.DebianBase.Name)
	app := map[string]any{
		"command": `[ "$(pwd -P)" = "$(cd "$CTRPERF_DATA" && pwd -P)" ] && [ ! -e cmd.bin ] && dd if=/dev/zero of=cmd.bin bs=1M count=8 conv=fsync`,
		"prepare": []any{"rm", "-f", "cmd.bin"},
		"env":     map[string]any{"LC_ALL": "C"},
	}
	ld := map[string]any{"runs": 3, "warmup_runs": 1, "timeout": "30s", "figure": "dd_s", "better": "lower",
		"figure_regex": `copied, (?P<value>[0-9.e+-]+) s`, "figure_from": "stderr", "figure_unit": "s"}
	for _, tc := range []struct {
		name string
		eng  engine.Engine
		c    Config
	}{
		{"host", engine.NewBareMetal(), Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind, App: app, Load: ld}},
		{"docker", docker, Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkHost, Data: engine.DataVolume, App: app, Load: ld}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := deployWith(ctx, t, tc.eng, Command{}, tc.c, fmt.Sprintf("cmdtest-%s-%d", tc.name, os.Getpid()))
			m := driveWith(ctx, t, tc.eng, Command{}, target, tc.c)
			if len(m.Executions) != 3 {
				t.Fatalf("executions %+v, want 3 timed ones", m.Executions)
			}
			for i, e := range m.Executions {
				// dd's own time is inside the command's wall time.
				if e.WallS <= 0 || e.Figures["dd_s"] <= 0 || e.Figures["dd_s"] > e.WallS {
					t.Errorf("execution %d: wall %v s, dd %v s", i, e.WallS, e.Figures["dd_s"])
				}
			}
			for _, k := range []string{"wall_median_s", "wall_mean_s", "wall_min_s", "wall_max_s", "wall_stddev_s", "dd_s", results.MetricElapsed, results.MetricThroughput} {
				if _, ok := m.Metrics[k]; !ok {
					t.Errorf("no %s in %v", k, m.Metrics)
				}
			}
			if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "inside the target") }) {
				t.Errorf("notes %q: the Debian base has date +%%s%%N, the time must be taken inside", m.Notes)
			}
			t.Logf("%s: wall median %.4f s (min %.4f, max %.4f), dd %.4f s", tc.name,
				m.Metrics["wall_median_s"], m.Metrics["wall_min_s"], m.Metrics["wall_max_s"], m.Metrics["dd_s"])

			inTarget := load.EngineExec(tc.eng, target, commandService)
			t0 := time.Now()
			_, stderr, code, err := inTarget(ctx, commandArgv("time", "M-1", nil, []string{"sleep", "0.3"}))
			around := time.Since(t0)
			if err != nil || code != 0 {
				t.Fatalf("wrapper: status %d, %v: %s", code, err, stderr)
			}
			_, status, wall, err := splitTiming(stderr, "M-1")
			if err != nil || status != 0 {
				t.Fatalf("timing line in %q: status %d, %v", stderr, status, err)
			}
			if wall.Duration < 290*time.Millisecond || wall.Duration > around {
				t.Errorf("sleep 0.3 timed %v in the target (uptime's: %v), %v around the exec", wall.Duration, wall.Stepped, around)
			}
			t.Logf("%s: sleep 0.3 timed %v in the target (uptime's: %v), %v around the exec", tc.name, wall.Duration, wall.Stepped, around)
		})
	}
}

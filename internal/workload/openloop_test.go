package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
)

// TestOpenLoopKnobsAgree: every workload with an open-loop rate reads it,
// and its seed, with the same rules (they were parsed three times and
// disagreed: a ceiling of 1e6 in one, 1e7 in others, NaN accepted by all).
func TestOpenLoopKnobsAgree(t *testing.T) {
	parsers := map[string]func(map[string]any) error{
		"web": func(m map[string]any) error { _, err := ParseWebLoad(m); return err },
		"app": func(m map[string]any) error { _, err := ParseAppLoad(m, t.TempDir()); return err },
		"kv": func(m map[string]any) error {
			m["mode"] = "open"
			_, err := ParseKVLoad(m)
			return err
		},
		"noisy hot_rate": func(m map[string]any) error {
			if r, ok := m["rate"]; ok {
				m["hot_rate"] = r
				delete(m, "rate")
			}
			_, err := ParseNoisyLoad(m)
			return err
		},
	}
	tests := []struct {
		desc string
		knob map[string]any
		want string // "" for accepted
	}{
		{"NaN", map[string]any{"rate": math.NaN()}, "want a finite number"},
		{"+Inf", map[string]any{"rate": math.Inf(1)}, "want a finite number"},
		{"-Inf", map[string]any{"rate": math.Inf(-1)}, "want a finite number"},
		{"below the floor", map[string]any{"rate": 1e-11}, "want between 0.001 and 1e+07"},
		{"negative", map[string]any{"rate": -5}, "want between 0.001 and 1e+07"},
		{"above the shared ceiling", map[string]any{"rate": 2e7}, "want between 0.001 and 1e+07"},
		{"the floor", map[string]any{"rate": 0.001}, ""},
		{"the shared ceiling (web used to stop at 1e6)", map[string]any{"rate": 1e7}, ""},
		{"the largest seed", map[string]any{"rate": 10, "seed": 1 << 62}, ""},
		{"a negative seed", map[string]any{"rate": 10, "seed": -1}, "load.seed = -1: out of range"},
	}
	for name, parse := range parsers {
		for _, tc := range tests {
			t.Run(name+"/"+tc.desc, func(t *testing.T) {
				m := map[string]any{}
				for k, v := range tc.knob {
					m[k] = v
				}
				err := parse(m)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("err = %v, want none", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want one containing %q", err, tc.want)
				}
			})
		}
	}
}

// TestSearchRatesAreFinite: a capacity search's rates and SLO bounds
// refuse NaN and Inf like every other float knob.
func TestSearchRatesAreFinite(t *testing.T) {
	tests := []struct {
		desc   string
		search map[string]any
	}{
		{"a NaN from", map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": math.NaN(), "to": 100}},
		{"an infinite to", map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": 1, "to": math.Inf(1)}},
		{"a NaN SLO bound", map[string]any{"slo": map[string]any{"p99_ms": math.NaN()}, "from": 1, "to": 100}},
		{"a NaN error rate", map[string]any{"slo": map[string]any{"error_rate": math.NaN()}, "from": 1, "to": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseWebLoad(map[string]any{"search": tc.search})
			if err == nil || !strings.Contains(err.Error(), "finite") {
				t.Errorf("err = %v, want a refusal of the non-finite value", err)
			}
		})
	}
}

// openLoopDecoders decode a load map with each workload that embeds
// OpenLoop (kv in mode open), through Decode as a plan does.
var openLoopDecoders = []struct {
	workload   string
	app, extra map[string]any
}{
	{"web", nil, nil},
	{"app", map[string]any{"image": "app:1", "port": 80}, nil},
	{"kv", nil, map[string]any{"mode": "open"}},
}

// openLoopOf is the OpenLoop of a decoded load.
func openLoopOf(t *testing.T, ld any) OpenLoop {
	t.Helper()
	switch l := ld.(type) {
	case WebLoad:
		return l.OpenLoop
	case AppLoad:
		return l.OpenLoop
	case KVLoad:
		return l.OpenLoop
	}
	t.Fatalf("load %T embeds no OpenLoop", ld)
	return OpenLoop{}
}

// TestOpenLoopOneParser: web, app and kv read the open-loop knobs with one
// parser into one OpenLoop, and budget a capacity search's step the same
// way (the request timeout and a second). kv used to refuse timeout,
// max_inflight and poisson as unknown knobs (its generator ran with a
// fixed 10 s, 4096 and Poisson) and budgeted a step with a slack of its own.
func TestOpenLoopOneParser(t *testing.T) {
	search := map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": 10, "to": 100}
	tests := []struct {
		desc    string
		knobs   map[string]any
		want    func(OpenLoop) bool // nil when an error is wanted
		wantErr string
	}{
		{"a request timeout", map[string]any{"rate": 10, "timeout": "2s"},
			func(o OpenLoop) bool { return o.Timeout == 2*time.Second }, ""},
		{"a bound on sessions in flight", map[string]any{"rate": 10, "max_inflight": 16},
			func(o OpenLoop) bool { return o.MaxInFlight == 16 }, ""},
		{"fixed gaps", map[string]any{"rate": 10, "poisson": false},
			func(o OpenLoop) bool { return !o.Poisson }, ""},
		{"Poisson arrivals", map[string]any{"rate": 10, "poisson": true},
			func(o OpenLoop) bool { return o.Poisson }, ""},
		{"a seed", map[string]any{"rate": 10, "seed": 42},
			func(o OpenLoop) bool { return o.Seed == 42 }, ""},
		{"a timeout beyond an hour", map[string]any{"rate": 10, "timeout": "2h"}, nil, "load.timeout = 2h: out of range"},
		{"no session in flight", map[string]any{"rate": 10, "max_inflight": 0}, nil, "load.max_inflight = 0: out of range [1, 1000000]"},
		{"poisson not a boolean", map[string]any{"rate": 10, "poisson": "often"}, nil, "load.poisson = often"},
		{"a ramp over half the warm-up", map[string]any{"rate": 10, "ramp": 0.5},
			func(o OpenLoop) bool { return o.Ramp == 0.5 }, ""},
		{"a ramp beyond the warm-up", map[string]any{"rate": 10, "ramp": 1.5}, nil, "load.ramp = 1.5: out of range [0, 1]"},
		{"a ramp that is no share", map[string]any{"rate": 10, "ramp": "10s"}, nil, "load.ramp = 10s: want a number"},
		{"a ramp before each step of a search", map[string]any{"ramp": 1, "timeout": "4s", "search": search},
			func(o OpenLoop) bool { return o.Ramp == 1 && o.Search != nil }, ""},
		{"a search's step budget is the timeout and a second", map[string]any{"timeout": "4s", "search": search},
			func(o OpenLoop) bool {
				s, ok := o.CapacitySearch()
				return ok && s.StepSlack == 5*time.Second
			}, ""},
	}
	for _, d := range openLoopDecoders {
		for _, tc := range tests {
			t.Run(d.workload+"/"+tc.desc, func(t *testing.T) {
				m := maps.Clone(tc.knobs)
				maps.Copy(m, d.extra)
				w, err := Get(d.workload)
				if err != nil {
					t.Fatal(err)
				}
				_, ld, err := w.Decode(Knobs{Runtime: "docker", Network: "host", Data: "layer", Load: m, App: d.app})
				if tc.want == nil {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if o := openLoopOf(t, ld); !tc.want(o) {
					t.Errorf("decoded %+v", o)
				}
				// The runner sees the search through the load value itself.
				if _, searching := tc.knobs["search"]; searching {
					if s, ok := ld.(plan.Searching).CapacitySearch(); !ok || s.StepSlack != 5*time.Second {
						t.Errorf("plan.Searching: %+v, %v", s, ok)
					}
				}
			})
		}
	}
}

// TestOpenLoopRampNeedsOpenLoop: a ramp in a closed loop is refused at
// its knob, in every workload, rather than silently doing nothing.
func TestOpenLoopRampNeedsOpenLoop(t *testing.T) {
	tests := []struct {
		desc     string
		workload string
		app      map[string]any
		load     map[string]any
		wantErr  string // "" for accepted
	}{
		{"web closed loop", "web", nil, map[string]any{"concurrency": 4, "ramp": 0.5}, "load.ramp = 0.5 raises an open loop's rate"},
		{"web open loop", "web", nil, map[string]any{"rate": 20, "ramp": 0.5}, ""},
		{"app closed loop (its default)", "app", map[string]any{"image": "app:1", "port": 80}, map[string]any{"ramp": 0.5}, "load.ramp = 0.5 raises an open loop's rate"},
		{"app memcached open loop", "app", map[string]any{"image": "app:1", "port": 80}, map[string]any{"protocol": "memcached", "rate": 100, "ramp": 0.5}, ""},
		{"kv closed loop (its default)", "kv", nil, map[string]any{"ramp": 0.5}, "load.ramp = 0.5 raises an open loop's rate"},
		{"kv open loop", "kv", nil, map[string]any{"mode": "open", "rate": 100, "ramp": 0.5}, ""},
		{"no ramp in a closed loop", "kv", nil, map[string]any{"ramp": 0}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			w, err := Get(tc.workload)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = w.Decode(Knobs{Runtime: "docker", Network: "host", Data: "layer", Load: tc.load, App: tc.app})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ke *plan.KnobError
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ke) || ke.Knob != "load.ramp" {
				t.Errorf("err = %v, want a load.ramp error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestOpenLoopProfile: what each workload hands the generator for one
// window carries the open-loop knobs and the window, from one place
// (OpenLoop.profile); a closed loop has no rate and no arrivals.
func TestOpenLoopProfile(t *testing.T) {
	env := Env{Window: Window{Warmup: 3 * time.Second, Duration: 7 * time.Second}, LoadCPUSet: "1"}
	tests := []struct {
		desc    string
		profile func() (load.Profile, error)
		want    load.Profile
	}{
		{"kv open", func() (load.Profile, error) {
			l, err := ParseKVLoad(map[string]any{"mode": "open", "rate": 500, "max_inflight": 8, "timeout": "3s", "seed": 7})
			return kvProfile(l, env), err
		}, load.Profile{Rate: 500, Poisson: true, Seed: 7, Timeout: 3 * time.Second, MaxInFlight: 8,
			Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"kv open with a ramp over half the warm-up", func() (load.Profile, error) {
			l, err := ParseKVLoad(map[string]any{"mode": "open", "rate": 500, "ramp": 0.5})
			return kvProfile(l, env), err
		}, load.Profile{Rate: 500, Poisson: true, Seed: 1, Timeout: 10 * time.Second, MaxInFlight: load.DefaultMaxInFlight,
			Ramp: 1500 * time.Millisecond, Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"kv closed", func() (load.Profile, error) {
			l, err := ParseKVLoad(map[string]any{"concurrency": 2, "ops": 1000})
			return kvProfile(l, env), err
		}, load.Profile{Concurrency: 2, Ops: 1000, Seed: 1, Timeout: 10 * time.Second, MaxInFlight: load.DefaultMaxInFlight,
			Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"app open", func() (load.Profile, error) {
			l, err := ParseAppLoad(map[string]any{"rate": 50, "poisson": true, "max_inflight": 100}, t.TempDir())
			return l.profile(env), err
		}, load.Profile{Rate: 50, Poisson: true, Seed: 1, Timeout: 10 * time.Second, MaxInFlight: 100,
			Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"web open", func() (load.Profile, error) {
			l, err := ParseWebLoad(map[string]any{"rate": 20, "timeout": "5s"})
			return l.profile(env, nil), err
		}, load.Profile{Rate: 20, Seed: 1, Timeout: 5 * time.Second, MaxInFlight: load.DefaultMaxInFlight,
			Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"web open with a ramp over the whole warm-up", func() (load.Profile, error) {
			l, err := ParseWebLoad(map[string]any{"rate": 20, "ramp": 1})
			return l.profile(env, nil), err
		}, load.Profile{Rate: 20, Seed: 1, Timeout: load.DefaultTimeout, MaxInFlight: load.DefaultMaxInFlight,
			Ramp: 3 * time.Second, Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
		{"app memcached with a ramp", func() (load.Profile, error) {
			l, err := ParseAppLoad(map[string]any{"protocol": "memcached", "rate": 50, "ramp": 0.25}, t.TempDir())
			return l.profile(env), err
		}, load.Profile{Rate: 50, Poisson: true, Seed: 1, Timeout: 10 * time.Second, MaxInFlight: load.DefaultMaxInFlight,
			Ramp: 750 * time.Millisecond, Warmup: 3 * time.Second, Duration: 7 * time.Second, CPUSet: "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := tc.profile()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, tc.want) {
				t.Errorf("profile\n got %+v\nwant %+v", p, tc.want)
			}
		})
	}
}

// TestKVClientArgv: kv's client container runs `ctrperf load` with every
// open-loop knob of the profile, so load.client: container measures the
// load the host-side generator would offer (it had no --max-in-flight).
func TestKVClientArgv(t *testing.T) {
	env := Env{Window: Window{Warmup: time.Second, Duration: 2 * time.Second}}
	tests := []struct {
		desc string
		load map[string]any
		want []string // flags, each followed by its value when it has one
		not  []string
	}{
		{"open loop", map[string]any{"mode": "open", "rate": 250, "max_inflight": 8, "timeout": "3s", "seed": 9},
			[]string{"--rate 250", "--max-in-flight 8", "--poisson", "--timeout 3s", "--seed 9", "--warmup 1s", "--duration 2s"},
			[]string{"--concurrency", "--ops"}},
		{"open loop with fixed gaps", map[string]any{"mode": "open", "rate": 250, "poisson": false},
			[]string{"--rate 250", "--max-in-flight 4096"}, []string{"--poisson", "--ramp"}},
		{"open loop with a ramp over half the warm-up", map[string]any{"mode": "open", "rate": 250, "ramp": 0.5},
			[]string{"--rate 250", "--ramp 500ms", "--warmup 1s"}, nil},
		{"closed loop", map[string]any{"concurrency": 2, "ops": 500},
			[]string{"--concurrency 2", "--ops 500"}, []string{"--rate", "--max-in-flight", "--poisson"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, err := ParseKVLoad(tc.load)
			if err != nil {
				t.Fatal(err)
			}
			argv := " " + strings.Join(kvClientArgv("/ctrperf", l, kvProfile(l, env), "10.0.0.2:11211"), " ") + " "
			for _, w := range tc.want {
				if !strings.Contains(argv, " "+w+" ") {
					t.Errorf("argv %q lacks %q", argv, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(argv, " "+n+" ") {
					t.Errorf("argv %q has %q", argv, n)
				}
			}
		})
	}
}

// TestKVOpenLoopClientContainerDocker: kv's open loop from its client
// container honours the open-loop knobs end to end: `ctrperf load` in the
// container takes --ramp and --max-in-flight, ramps within the warm-up
// (memcached counts every set, warm-up included) and offers the measured
// window the full rate (fixed gaps: 300/s for 2 s after 1 s of warm-up;
// the measured window was 3 s until 2026-11-26, and 2 s keeps every check:
// a ramp that leaked into it would still leave out 75 of its 600 arrivals,
// far below the 20 of slack).
func TestKVOpenLoopClientContainerDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, image.DebianBase.Name, WebImageTicketd)
	// wantSets is what memcached served, warm-up included: 300/s for 3 s,
	// less the 75 arrivals a ramp over half the warm-up leaves out
	// (300/s × 0.5 s / 2).
	for i, tc := range []struct {
		desc, runID string
		ramp        float64
		wantSets    int64
	}{
		{"no ramp", "kvopenloop-flat", 0, 900},
		{"a ramp over half the warm-up", "kvopenloop-ramp", 0.5, 825},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP, Data: engine.DataLayer,
				Load: map[string]any{"mode": "open", "rate": 300, "poisson": false, "ramp": tc.ramp, "max_inflight": 16, "client": "container"}}
			target := deployWith(ctx, t, eng, KV{}, c, fmt.Sprintf("%s-%d", tc.runID, i))
			// The counts below are of this window: 1 s of warm-up, 2 s measured.
			m := driveWindowOf(ctx, t, eng, KV{}, target, c, Window{Warmup: time.Second, Duration: 2 * time.Second})
			if m.Load == nil || m.Load.Mode != "open" || m.Load.TargetRate != 300 || m.Load.Concurrency != 16 {
				t.Fatalf("load %+v, want open loop at 300/s with at most 16 in flight", m.Load)
			}
			if !strings.Contains(m.Tools["memcached-driver"], "in a container") {
				t.Errorf("driver %q, want the client container", m.Tools["memcached-driver"])
			}
			// The window's 600 arrivals; a ramp that reached it would offer fewer.
			if n := m.Operations["set"].Count; n < 580 || n > 600 {
				t.Errorf("%d sets measured, want the window's 600", n)
			}
			if sets := memcachedSets(ctx, t, target); sets < tc.wantSets-15 || sets > tc.wantSets+15 {
				t.Errorf("memcached served %d sets, want about %d", sets, tc.wantSets)
			}
		})
	}
}

// memcachedSets is memcached's own count of sets (stats cmd_set) on the
// kv service of target.
func memcachedSets(ctx context.Context, t *testing.T, target *engine.Target) int64 {
	t.Helper()
	ep, err := target.Endpoint("kv", 11211)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := target.Dialer()(ctx, "tcp", ep.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := sc.Text()
		if line == "END" {
			break
		}
		if v, ok := strings.CutPrefix(line, "STAT cmd_set "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("stats: %q", line)
			}
			return n
		}
	}
	t.Fatalf("no cmd_set in memcached's stats (%v)", sc.Err())
	return 0
}

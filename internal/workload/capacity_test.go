package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

// server is a fake system under test: below its capacity every request
// takes fast, above it slow (and, with failAbove, a share fails).
type server struct {
	capacity  float64
	fast      time.Duration
	slow      time.Duration
	failAbove float64 // error rate above capacity
}

// measurement is what a window at rate measures against s: 1000 requests
// with the latency of that rate, and the errors.
func (s server) measurement(t *testing.T, rate float64) *results.Measurement {
	t.Helper()
	lat, errRate := s.fast, 0.0
	if rate > s.capacity {
		lat, errRate = s.slow, s.failAbove
	}
	h := results.NewHistogram()
	const n = 1000
	for i := 0; i < n; i++ {
		if err := h.RecordValue(results.HistValue(lat)); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := results.EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	op := &results.Operation{Count: n, Histogram: enc}
	if e := int64(math.Round(errRate * n)); e > 0 {
		op.Errors = map[string]int64{"http_5xx": e}
	}
	return &results.Measurement{DurationS: 10, Operations: map[string]*results.Operation{"req": op},
		Metrics: map[string]float64{results.MetricThroughput: rate}, Load: &results.LoadStats{Mode: "open", TargetRate: rate}}
}

// fakeClock advances by step at every measured window.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func testSearch(mod func(*Search)) *Search {
	s := &Search{SLO: []Limit{{results.MetricP99Ms, 50}, {results.MetricErrorRate, 0.01}},
		From: 50, To: 5000, Factor: 2, Precision: 0.05, MaxSteps: 40}
	if mod != nil {
		mod(s)
	}
	return s
}

// runFake runs the pure search against srv with a clock that advances
// 10 s per step; it returns the record, the measurement kept, the error
// and the rates measured.
func runFake(t *testing.T, ctx context.Context, s *Search, srv server) (*results.CapacitySearch, *results.Measurement, []float64, error) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	var rates []float64
	var hooked int
	r := searchRun{s: s, now: clk.now,
		measure: func(ctx context.Context, rate float64) (*results.Measurement, error) {
			rates = append(rates, rate)
			clk.t = clk.t.Add(10 * time.Second)
			return srv.measurement(t, rate), nil
		},
		onStep: func(i int, st results.CapacityStep) {
			hooked++
			if i != hooked {
				t.Errorf("step hook numbered %d, want %d", i, hooked)
			}
		}}
	rec, m, err := r.run(ctx)
	if rec != nil && len(rec.Steps) != hooked {
		t.Errorf("%d steps recorded, %d reported", len(rec.Steps), hooked)
	}
	return rec, m, rates, err
}

func TestSearchFindsMonotoneCapacityWithinPrecision(t *testing.T) {
	for _, capacity := range []float64{50, 73, 333.3, 1234, 4321, 4999} {
		t.Run(fmt.Sprint(capacity), func(t *testing.T) {
			s := testSearch(nil)
			rec, m, rates, err := runFake(t, context.Background(), s, server{capacity: capacity, fast: 5 * time.Millisecond, slow: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != results.CapacityFound {
				t.Fatalf("outcome %q (%s), want found; rates %v", rec.Outcome, rec.Stopped, rates)
			}
			lo, hi := rec.CapacityPerS, rec.FailedAtPerS
			if lo > capacity || hi <= capacity {
				t.Errorf("capacity %g not in [%g, %g)", capacity, lo, hi)
			}
			if hi/lo-1 > s.Precision {
				t.Errorf("bracket [%g, %g) wider than %g", lo, hi, s.Precision)
			}
			// Bracketing: from, ×2, … until the first failure.
			for i := 1; i < len(rates) && rates[i-1] <= capacity; i++ {
				if want := math.Min(rates[i-1]*2, s.To); rates[i] != want {
					t.Errorf("bracket step %d at %g, want %g (rates %v)", i+1, rates[i], want, rates)
					break
				}
			}
			// The run keeps the highest passing step's measurement.
			if m.Load.TargetRate != lo {
				t.Errorf("kept the measurement at %g/s, want the highest passing %g/s", m.Load.TargetRate, lo)
			}
			for i, st := range rec.Steps {
				if st.Pass != (st.RatePerS <= capacity) {
					t.Errorf("step %d at %g: pass %v", i+1, st.RatePerS, st.Pass)
				}
				if !st.Pass && !strings.Contains(st.Reason, "p99_ms 200 > 50") {
					t.Errorf("step %d reason %q", i+1, st.Reason)
				}
			}
			if rec.ElapsedS != float64(10*len(rates)) {
				t.Errorf("elapsed %g s for %d steps of 10 s", rec.ElapsedS, len(rates))
			}
			out := Searched(rec, m)
			if out.Metrics[results.MetricCapacity] != lo || out.Metrics[results.MetricCapacitySteps] != float64(len(rates)) {
				t.Errorf("metrics %v", out.Metrics)
			}
		})
	}
}

func TestSearchNeverPassing(t *testing.T) {
	srv := server{capacity: 10, fast: time.Millisecond, slow: 80 * time.Millisecond}
	rec, m, rates, err := runFake(t, context.Background(), testSearch(nil), srv)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != results.CapacityBelow || len(rates) != 1 || rates[0] != 50 {
		t.Fatalf("outcome %q after rates %v, want below after [50]", rec.Outcome, rates)
	}
	if rec.CapacityPerS != 0 {
		t.Errorf("capacity %g, want none", rec.CapacityPerS)
	}
	out := Searched(rec, m)
	if _, has := out.Metrics[results.MetricCapacity]; has {
		t.Errorf("a search where nothing passed reports capacity_per_s = %g", out.Metrics[results.MetricCapacity])
	}
	if out.Metrics[results.MetricCapacitySteps] != 1 {
		t.Errorf("capacity_steps %g", out.Metrics[results.MetricCapacitySteps])
	}
	if len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "below the lowest rate tried (50/s)") {
		t.Errorf("notes %q", out.Notes)
	}
	if m.Load.TargetRate != 50 || out.Capacity != rec {
		t.Errorf("kept measurement at %g/s, record %p", m.Load.TargetRate, out.Capacity)
	}
}

func TestSearchAlwaysPassingStopsAtTo(t *testing.T) {
	rec, m, rates, err := runFake(t, context.Background(), testSearch(nil), server{capacity: math.Inf(1), fast: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{50, 100, 200, 400, 800, 1600, 3200, 5000}
	if fmt.Sprint(rates) != fmt.Sprint(want) {
		t.Errorf("rates %v, want %v", rates, want)
	}
	if rec.Outcome != results.CapacityAtLeast || rec.CapacityPerS != 5000 || rec.FailedAtPerS != 0 {
		t.Errorf("outcome %q capacity %g failed at %g", rec.Outcome, rec.CapacityPerS, rec.FailedAtPerS)
	}
	out := Searched(rec, m)
	if out.Metrics[results.MetricCapacity] != 5000 {
		t.Errorf("capacity_per_s %g", out.Metrics[results.MetricCapacity])
	}
	if len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "at least 5000/s") {
		t.Errorf("notes %q", out.Notes)
	}
}

func TestSearchStepBound(t *testing.T) {
	srv := server{capacity: 1234, fast: time.Millisecond, slow: time.Second}
	// Stopped while bracketing: a lower bound, not a capacity.
	rec, _, rates, err := runFake(t, context.Background(), testSearch(func(s *Search) { s.MaxSteps = 4 }), srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != 4 || rec.Outcome != results.CapacityAtLeast || rec.CapacityPerS != 400 || !strings.Contains(rec.Stopped, "max_steps 4") {
		t.Errorf("rates %v outcome %q capacity %g stopped %q", rates, rec.Outcome, rec.CapacityPerS, rec.Stopped)
	}
	// Stopped while bisecting: bounded, with the bracket it reached.
	rec, _, rates, err = runFake(t, context.Background(), testSearch(func(s *Search) { s.MaxSteps = 8 }), srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != 8 || rec.Outcome != results.CapacityBounded {
		t.Fatalf("rates %v outcome %q", rates, rec.Outcome)
	}
	if rec.CapacityPerS > 1234 || rec.FailedAtPerS <= 1234 || rec.FailedAtPerS/rec.CapacityPerS-1 <= 0.05 {
		t.Errorf("bounded bracket [%g, %g)", rec.CapacityPerS, rec.FailedAtPerS)
	}
	if !strings.Contains(OutcomeText(rec), "only within [") {
		t.Errorf("outcome text %q", OutcomeText(rec))
	}
}

func TestSearchTimeBound(t *testing.T) {
	// 10 s per step: after 3 steps (30 s) a fourth would end at 40 s > 35 s.
	s := testSearch(func(s *Search) { s.MaxTime = 35 * time.Second })
	rec, _, rates, err := runFake(t, context.Background(), s, server{capacity: math.Inf(1), fast: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != 3 || !strings.Contains(rec.Stopped, "max_time 35s") || rec.Outcome != results.CapacityAtLeast {
		t.Errorf("rates %v stopped %q outcome %q", rates, rec.Stopped, rec.Outcome)
	}
	// The first step always runs, however short max_time.
	s = testSearch(func(s *Search) { s.MaxTime = time.Second })
	_, _, rates, _ = runFake(t, context.Background(), s, server{capacity: math.Inf(1), fast: time.Millisecond})
	if len(rates) != 1 {
		t.Errorf("rates %v, want the first step only", rates)
	}
}

func TestSearchContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var rates []float64
	r := searchRun{s: testSearch(nil), now: time.Now,
		measure: func(ctx context.Context, rate float64) (*results.Measurement, error) {
			rates = append(rates, rate)
			if len(rates) == 3 {
				cancel() // Ctrl-C during the third window
				return nil, ctx.Err()
			}
			return server{capacity: math.Inf(1), fast: time.Millisecond}.measurement(t, rate), nil
		}}
	_, m, err := r.run(ctx)
	if !errors.Is(err, context.Canceled) || m != nil {
		t.Errorf("err %v, measurement %v; want context.Canceled and none", err, m)
	}
	if len(rates) != 3 {
		t.Errorf("measured %v after the cancel", rates)
	}
	// Cancelled before it starts: nothing is measured.
	rates = nil
	if _, _, err := r.run(ctx); !errors.Is(err, context.Canceled) || len(rates) != 0 {
		t.Errorf("err %v, rates %v", err, rates)
	}
}

func TestSearchMeasureErrorEndsIt(t *testing.T) {
	r := searchRun{s: testSearch(nil), now: time.Now,
		measure: func(ctx context.Context, rate float64) (*results.Measurement, error) {
			if rate > 100 {
				return nil, errors.New("generator broke")
			}
			return server{capacity: math.Inf(1), fast: time.Millisecond}.measurement(t, rate), nil
		}}
	_, _, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "step 3 at 200/s: generator broke") {
		t.Errorf("err %v", err)
	}
}

func TestSearchCheck(t *testing.T) {
	s := testSearch(nil)
	// Errors fail the SLO even when the latency is fine.
	m := server{capacity: 0, fast: time.Millisecond, slow: time.Millisecond, failAbove: 0.05}.measurement(t, 100)
	fig, pass, reason := s.Check(m)
	if pass || reason != "error_rate 5% > 1%" || fig[results.MetricErrorRate] != 0.05 {
		t.Errorf("pass %v reason %q figures %v", pass, reason, fig)
	}
	// Nothing completed: a failure, not a pass of an empty histogram.
	_, pass, reason = s.Check(&results.Measurement{Operations: map[string]*results.Operation{"req": {}}})
	if pass || reason != "no operation completed" {
		t.Errorf("pass %v reason %q", pass, reason)
	}
	// Every quantile an SLO may name is read from the merged histogram.
	all := testSearch(func(s *Search) {
		s.SLO = nil
		for _, f := range SLOFigures {
			s.SLO = append(s.SLO, Limit{f, 1e6})
		}
	})
	fig, pass, _ = all.Check(server{capacity: 1e9, fast: 20 * time.Millisecond}.measurement(t, 1))
	if !pass {
		t.Error("all quantiles below their bounds, yet failed")
	}
	for _, f := range SLOFigures[:5] {
		if math.Abs(fig[f]-20) > 0.1 {
			t.Errorf("%s = %g, want 20", f, fig[f])
		}
	}
}

// RunSearch calls env.Started once, at the first measured window, however
// many windows the search measures, and reports every step.
func TestRunSearchStartsObserversOnceAndReportsSteps(t *testing.T) {
	var started int
	var lines []string
	env := Env{Started: func() { started++ }, Progress: func(s string) { lines = append(lines, s) }}
	s := testSearch(func(s *Search) { s.To = 400 })
	m, err := RunSearch(context.Background(), env, s, func(ctx context.Context, rate float64, windowStart func()) (*results.Measurement, error) {
		windowStart()
		return server{capacity: 150, fast: time.Millisecond, slow: time.Second}.measurement(t, rate), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Errorf("env.Started called %d times, want 1", started)
	}
	steps := len(m.Capacity.Steps)
	if steps < 4 {
		t.Fatalf("%d steps", steps)
	}
	var stepLines int
	for _, l := range lines {
		if strings.HasPrefix(l, "capacity step ") {
			stepLines++
		}
	}
	if stepLines != steps || !strings.Contains(lines[1], "capacity step 1: 50/s → p99_ms 1, error_rate 0%: pass") {
		t.Errorf("progress lines %q", lines)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, fmt.Sprintf("%d steps in", steps)) {
		t.Errorf("last progress line %q does not give the cost", last)
	}
	if m.Metrics[results.MetricCapacity] != m.Capacity.CapacityPerS || m.Capacity.CapacityPerS > 150 {
		t.Errorf("capacity %v", m.Metrics)
	}
}

func TestSearchKnobs(t *testing.T) {
	search := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	slo := map[string]any{"p99_ms": 50}
	rows := []struct {
		desc     string
		workload string
		load     map[string]any
		wantErr  string // "" valid
		wantKnob string // the KnobError's knob
	}{
		{"web search", "web", map[string]any{"search": search("slo", slo, "from", 50, "to", 5000)}, "", ""},
		{"kv search (open loop implied)", "kv", map[string]any{"search": search("slo", slo, "from", 1000, "to", 100000)}, "", ""},
		{"floats from a re-read plan", "web", map[string]any{"search": search("slo", map[string]any{"p99_ms": 50.0}, "from", 50.0, "to", 5000.0, "max_steps", 8.0)}, "", ""},
		{"web search and rate", "web", map[string]any{"rate": 250, "search": search("slo", slo, "from", 50, "to", 5000)},
			"load.search with load.rate = 250", "load.search"},
		{"web search and concurrency", "web", map[string]any{"concurrency": 8, "search": search("slo", slo, "from", 50, "to", 5000)},
			"load.search with load.concurrency = 8", "load.search"},
		{"kv search and rate", "kv", map[string]any{"mode": "open", "rate": 10, "search": search("slo", slo, "from", 50, "to", 5000)},
			"load.search with load.rate = 10", "load.search"},
		{"kv search and closed mode", "kv", map[string]any{"mode": "closed", "search": search("slo", slo, "from", 50, "to", 5000)},
			"a capacity search is open loop", "load.mode"},
		{"from >= to", "web", map[string]any{"search": search("slo", slo, "from", 500, "to", 500)},
			"load.search.to = 500 is not above from = 500", "load.search.to"},
		{"empty slo", "web", map[string]any{"search": search("slo", map[string]any{}, "from", 50, "to", 500)},
			"load.search.slo is empty", "load.search.slo"},
		{"no slo", "web", map[string]any{"search": search("from", 50, "to", 500)}, "load.search: no slo", "load.search"},
		{"no from", "web", map[string]any{"search": search("slo", slo, "to", 500)}, "load.search: no from", "load.search"},
		{"unknown slo key", "web", map[string]any{"search": search("slo", map[string]any{"p98_ms": 5}, "from", 50, "to", 500)},
			"load.search.slo.p98_ms: unknown knob (known: error_rate, p50_ms, p90_ms, p95_ms, p999_ms, p99_ms)", "load.search.slo.p98_ms"},
		{"unknown search key", "web", map[string]any{"search": search("slo", slo, "from", 50, "to", 500, "steps", 3)},
			"load.search.steps: unknown knob", "load.search.steps"},
		{"error rate above 1", "web", map[string]any{"search": search("slo", map[string]any{"error_rate": 2}, "from", 50, "to", 500)},
			"load.search.slo.error_rate = 2: out of range [0, 1]", "load.search.slo.error_rate"},
		{"search not a mapping", "web", map[string]any{"search": 50}, "load.search = 50: want a mapping", "load.search"},
		{"precision out of range", "web", map[string]any{"search": search("slo", slo, "from", 50, "to", 500, "precision", 0.9)},
			"load.search.precision = 0.9: out of range", "load.search.precision"},
	}
	for _, r := range rows {
		t.Run(r.desc, func(t *testing.T) {
			w, err := Get(r.workload)
			if err != nil {
				t.Fatal(err)
			}
			_, ld, err := w.Decode(Knobs{Runtime: "docker", Network: "host", Data: "layer", Load: r.load})
			if r.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				s, ok := ld.(plan.Searching).CapacitySearch()
				if !ok || s.MaxSteps < 2 || !strings.Contains(s.Description, "p99_ms ≤ 50, error_rate ≤ 0.01 (default)") {
					t.Errorf("search %+v, %v", s, ok)
				}
				if kv, isKV := ld.(KVLoad); isKV && (kv.Mode != "open" || kv.Concurrency != 0) {
					t.Errorf("kv search mode %q concurrency %d", kv.Mode, kv.Concurrency)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), r.wantErr) {
				t.Fatalf("err %v, want %q", err, r.wantErr)
			}
			var ke *plan.KnobError
			if !errors.As(err, &ke) || ke.Knob != r.wantKnob {
				t.Errorf("knob error %#v, want knob %q", ke, r.wantKnob)
			}
		})
	}
	// Without a search the load measures one window, as before.
	_, ld, err := Web{}.Decode(Knobs{Load: map[string]any{"rate": 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ld.(plan.Searching).CapacitySearch(); ok {
		t.Error("a fixed rate reports a search")
	}
}

// The web workload's search against a real ticketd on the host: one
// deployment, a search that passes every rate up to `to` (at least 40/s)
// and one whose SLO nothing meets (below 5/s), each step a fresh generator
// window, the observers' start signalled once. Beside the package's other
// tests: its SLOs (p99 under 5 s, p50 under 1 µs) pass and fail whatever
// the load on the CPU.
func TestWebCapacitySearchRoot(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t, "the host runtime's cgroups")
	testenv.Ctrperf(t) // the host runs `ctrperf __ticketd`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eng := engine.NewBareMetal()
	c := Config{Runtime: engine.RuntimeHost, Network: engine.NetworkHost, Data: engine.DataBind,
		App: map[string]any{"hash_cost": 8, "seed_tickets": 30}}
	target := deployWith(ctx, t, eng, Web{}, c, "webtest-capacity-"+fmt.Sprint(os.Getpid()))
	search := func(slo map[string]any) (*results.Measurement, int, []string) {
		c.Load = map[string]any{"poisson": true, "search": map[string]any{"slo": slo, "from": 5, "to": 40}}
		var started atomic.Int32
		var lines []string
		m, err := Web{}.Drive(ctx, Env{Engine: eng, Target: target, Config: decoded(t, Web{}, c),
			Window:   Window{Warmup: 500 * time.Millisecond, Duration: 1500 * time.Millisecond},
			Started:  func() { started.Add(1) },
			Progress: func(s string) { lines = append(lines, s) }})
		if err != nil {
			t.Fatal(err)
		}
		return m, int(started.Load()), lines
	}

	m, started, lines := search(map[string]any{"p99_ms": 5000})
	if started != 1 {
		t.Errorf("Started called %d times over %d steps, want once", started, len(m.Capacity.Steps))
	}
	if m.Capacity.Outcome != results.CapacityAtLeast || m.Metrics[results.MetricCapacity] != 40 || len(m.Capacity.Steps) != 4 {
		t.Fatalf("search %+v, metrics %v", m.Capacity, m.Metrics)
	}
	if m.Load.TargetRate != 40 || m.Operations[LabelCreateTicket].Count == 0 {
		t.Errorf("kept measurement at %g/s with %+v", m.Load.TargetRate, m.Operations[LabelCreateTicket])
	}
	if len(lines) != 6 || !strings.Contains(lines[4], "capacity step 4: 40/s → p99_ms") || !strings.Contains(lines[5], "at least 40/s") {
		t.Errorf("progress %q", lines)
	}

	m, _, _ = search(map[string]any{"p50_ms": 0.001})
	if m.Capacity.Outcome != results.CapacityBelow || len(m.Capacity.Steps) != 1 {
		t.Fatalf("search %+v", m.Capacity)
	}
	if _, has := m.Metrics[results.MetricCapacity]; has {
		t.Errorf("capacity_per_s %v for a search that nothing passed", m.Metrics[results.MetricCapacity])
	}
}

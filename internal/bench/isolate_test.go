package bench

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

func TestSummarizeIsolate(t *testing.T) {
	t0 := time.Date(2016, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	events := []isolate.Event{
		{Time: at(-2000), Kind: "cpuset", Container: "q", Name: "q", New: "1"},
		{Time: at(-2000), Kind: "cpuset", Container: "h", Name: "h", New: "1"},
		{Time: at(700), Kind: "hot", Container: "h", Name: "h", Reason: "used 0.9"},
		{Time: at(700), Kind: "cpuset", Container: "h", Name: "h", New: "0"},
		{Time: at(900), Kind: "error", Reason: "list: boom"},
	}
	tests := []struct {
		desc      string
		hot       map[string]bool
		hotAt     time.Time
		reaction  float64 // NaN: none
		decisions int
	}{
		{"reaction of the hot tenant", map[string]bool{"h": true}, t0, 0.7, 3},
		{"no hot phase: no reaction", map[string]bool{"h": true}, time.Time{}, math.NaN(), 3},
		{"the hot tenant never moved", map[string]bool{"x": true}, t0, math.NaN(), 3},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := summarizeIsolate(events, tt.hot, tt.hotAt)
			if f.decisions != tt.decisions || f.transitions != 1 || f.errors != 1 {
				t.Errorf("facts %+v", f)
			}
			if math.IsNaN(tt.reaction) != !f.reacted || (f.reacted && math.Abs(f.reaction.Seconds()-tt.reaction) > 1e-9) {
				t.Errorf("reaction %v (reacted %v), want %v", f.reaction, f.reacted, tt.reaction)
			}
		})
	}
}

// fakeIsolator records the controller's life against the engine's.
type fakeIsolator struct {
	mu   sync.Mutex
	log  []string
	err  error
	prov *fakeProvider
}

func (f *fakeIsolator) start(_ context.Context, req IsolateRequest) (IsolateRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "start "+req.RunID+" "+req.Spec.Policy()+" "+filepath.Base(req.StateDir))
	if f.err != nil {
		return nil, f.err
	}
	return &fakeIsoRun{f: f, runID: req.RunID, events: req.Events}, nil
}

type fakeIsoRun struct {
	f      *fakeIsolator
	runID  string
	events func(isolate.Event)
}

func (r *fakeIsoRun) Stop(context.Context) error {
	r.f.prov.mu.Lock()
	gone := slices.Contains(r.f.prov.tornDown, r.runID)
	r.f.prov.mu.Unlock()
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if gone {
		r.f.log = append(r.f.log, "stop after teardown "+r.runID)
	}
	r.f.log = append(r.f.log, "stop "+r.runID)
	return nil
}

func TestIsolateLifecycle(t *testing.T) {
	src := `
name: unit
workload: benchfake
repetitions: 1
warmup: 0s
duration: 1ms
baseline: off
configurations:
  - name: off
    runtime: docker
  - name: strict
    runtime: docker
    isolate: {policy: strict}
`
	tests := []struct {
		desc     string
		driveErr error
		startErr error
		status   results.Status
	}{
		{"ok run: started before drive, stopped before teardown", nil, nil, results.StatusOK},
		{"failed drive still stops the controller", errors.New("reset"), nil, results.StatusFailed},
		{"a controller that cannot start fails the run", nil, errors.New("another ctrperf isolate holds the lock"), results.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := parsePlan(t, src, plan.Options{Only: []string{"strict"}})
			prov := &fakeProvider{}
			iso := &fakeIsolator{err: tt.startErr, prov: prov}
			wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
				iso.mu.Lock()
				iso.log = append(iso.log, "drive "+env.Target.RunID)
				iso.mu.Unlock()
				if env.HotPhase != nil {
					env.HotPhase([]string{"app"})
				}
				return measurement(1), tt.driveErr
			}}
			out := filepath.Join(t.TempDir(), "out")
			sum, err := Run(context.Background(), p, Options{Out: out, Engines: prov, Isolate: iso.start,
				Workload: func(string) (workload.Workload, error) { return wl, nil }})
			if err != nil {
				t.Fatal(err)
			}
			var strict *results.RunRecord
			for i := range sum.Records {
				if sum.Records[i].Config == "strict" {
					strict = &sum.Records[i]
				}
			}
			if strict == nil || strict.Status != tt.status {
				t.Fatalf("strict record %+v, want status %s", strict, tt.status)
			}
			log := strings.Join(iso.log, "\n")
			if strings.Count(log, "start ") != 1 {
				t.Errorf("controller started %d times (only the strict run has one):\n%s", strings.Count(log, "start "), log)
			}
			if !strings.Contains(log, "start "+strict.RunID+" strict isolate") {
				t.Errorf("not started for the strict run with OUT/isolate:\n%s", log)
			}
			if tt.startErr == nil {
				if !strings.Contains(log, "stop "+strict.RunID) {
					t.Errorf("controller not stopped:\n%s", log)
				}
				if strings.Contains(log, "stop after teardown") {
					t.Errorf("controller stopped after the teardown:\n%s", log)
				}
				if strings.Index(log, "start "+strict.RunID) > strings.Index(log, "drive "+strict.RunID) {
					t.Errorf("controller started after the drive:\n%s", log)
				}
			}
			if tt.status == results.StatusOK {
				m := strict.Result
				if _, ok := m.Metrics["reaction_s"]; ok {
					t.Errorf("reaction_s recorded without any placement change: %v", m.Metrics)
				}
				if m.Metrics["isolate_decisions"] != 0 || len(m.Notes) == 0 {
					t.Errorf("metrics %v notes %v", m.Metrics, m.Notes)
				}
			}
			// Every run was torn down.
			if len(prov.tornDown) != len(prov.deployed) {
				t.Errorf("deployed %v, torn down %v", prov.deployed, prov.tornDown)
			}
		})
	}
}

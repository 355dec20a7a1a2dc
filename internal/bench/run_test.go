package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// phaseLog records the phases and warnings a run reports.
type phaseLog struct {
	Discard
	mu     sync.Mutex
	phases []string
	warns  []string
}

func (l *phaseLog) Phase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases = append(l.phases, p)
}

func (l *phaseLog) Warn(w string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warns = append(l.warns, w)
}

// One run at a time, phase by phase: whatever was deployed is released
// exactly once by the runner's teardown, also after Ctrl-C; the force
// cleanup of a second Ctrl-C goes the same way, the isolate controller is
// stopped once and always before the containers go.
func TestRunPhasesAndRelease(t *testing.T) {
	const src = `
name: unit
workload: benchfake
repetitions: 1
warmup: 0s
duration: 1ms
baseline: strict
configurations:
  - name: strict
    runtime: docker
    isolate: {policy: strict}
`
	all := []string{"starting engine", "deploying", "starting isolate controller", "warming up", "measuring", "tearing down"}
	tests := []struct {
		desc      string
		engineErr error
		deployErr error
		isoErr    error
		// onDrive runs inside the driver with the runner and the plan's
		// cancel; the driver then returns the context's error, if any.
		onDrive func(r *runner, cancel context.CancelFunc)
		status  results.Status // "" when the run is not recorded
		errText string
		phases  []string
		// tornDown is how often the deployment was removed; stops how
		// often the controller was stopped.
		tornDown, stops int
	}{
		{desc: "ok run", status: results.StatusOK, phases: all, tornDown: 1, stops: 1},
		{desc: "engine unavailable: not_run, nothing to tear down", engineErr: errors.New("no btrfs"),
			status: results.StatusNotRun, errText: "engine docker (default) unavailable: no btrfs", phases: all[:1]},
		{desc: "failed deploy is torn down", deployErr: errors.New("no image"),
			status: results.StatusFailed, errText: "deploy: no image", phases: []string{"starting engine", "deploying", "tearing down"}, tornDown: 1},
		{desc: "missing image: not_run (ctrperf never pulls), torn down",
			deployErr: fmt.Errorf("deploy r: %w", &engine.ImageMissingError{Image: "postgres:16", Service: "command", Engine: "default"}),
			status:    results.StatusNotRun,
			errText:   "deploy r: image \"postgres:16\" of service \"command\" is not on docker engine default (ctrperf never pulls): build it with `docker build -t postgres:16 DIR` or load a saved copy with `docker load -i FILE.tar`",
			phases:    []string{"starting engine", "deploying", "tearing down"}, tornDown: 1},
		{desc: "an image that is not a recipe and not on the engine: not_run", deployErr: fmt.Errorf("deploy r: images: image x:1 is not on this engine: %w", image.ErrMissing),
			status: results.StatusNotRun, errText: "deploy r: images: image x:1 is not on this engine: image not on the engine",
			phases: []string{"starting engine", "deploying", "tearing down"}, tornDown: 1},
		{desc: "controller that cannot start: failed, torn down", isoErr: errors.New("locked"),
			status: results.StatusFailed, errText: "isolate controller: locked", phases: []string{"starting engine", "deploying", "starting isolate controller", "tearing down"}, tornDown: 1},
		{desc: "Ctrl-C during the drive: not recorded, torn down once",
			onDrive: func(_ *runner, cancel context.CancelFunc) { cancel() },
			phases:  all, tornDown: 1, stops: 1},
		{desc: "second Ctrl-C: the force cleanup releases, then the runner's teardown again",
			onDrive: func(r *runner, cancel context.CancelFunc) {
				if err := r.forceTeardown(context.Background()); err != nil {
					t.Errorf("force teardown: %v", err)
				}
				cancel()
			},
			phases: all, tornDown: 2, stops: 1},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := parsePlan(t, src, plan.Options{})
			prov := &fakeProvider{deployErr: tt.deployErr, err: map[string]error{"default": tt.engineErr}}
			iso := &fakeIsolator{err: tt.isoErr, prov: prov}
			log := &phaseLog{}
			var r *runner
			wl := &fakeWorkload{drive: func(dctx context.Context, env workload.Env) (*results.Measurement, error) {
				if tt.onDrive != nil {
					tt.onDrive(r, cancel)
					return nil, dctx.Err()
				}
				return measurement(1), nil
			}}
			r = &runner{opt: Options{Out: t.TempDir(), Engines: prov, Isolate: iso.start, Progress: log,
				Now: func() time.Time { return time.Unix(1, 0) }},
				p: p, wl: wl, notRun: map[string]string{}, engines: map[string]engine.Info{}}
			r.defaults()

			planned := p.Runs()[0]
			cfg, _ := p.Config(planned.Config)
			rn := r.newRun(ctx, planned, cfg)
			rec := rn.perform()
			r.setCurrent(nil)
			rn.teardown()

			switch {
			case tt.status == "" && rec != nil:
				t.Errorf("interrupted run recorded: %+v", rec)
			case tt.status != "" && (rec == nil || rec.Status != tt.status || rec.Error != tt.errText):
				t.Fatalf("record %+v, want status %q error %q", rec, tt.status, tt.errText)
			}
			if !slices.Equal(log.phases, tt.phases) {
				t.Errorf("phases %q, want %q", log.phases, tt.phases)
			}
			if len(log.warns) != 0 {
				t.Errorf("warnings %q", log.warns)
			}
			if len(prov.tornDown) != tt.tornDown || len(prov.teardownCtxErr) != 0 {
				t.Errorf("torn down %v (with a dead context %v), want %d times with a live one", prov.tornDown, prov.teardownCtxErr, tt.tornDown)
			}
			stops := 0
			for _, l := range iso.log {
				if strings.HasPrefix(l, "stop after teardown") {
					t.Errorf("controller stopped after the containers went: %q", iso.log)
				}
				if strings.HasPrefix(l, "stop ") {
					stops++
				}
			}
			if stops != tt.stops {
				t.Errorf("controller stopped %d times, want %d: %q", stops, tt.stops, iso.log)
			}
			// Releasing again after the run, as a late force cleanup
			// would, must not stop the controller a second time.
			if tt.tornDown > 0 {
				_ = rn.release(context.Background())
				if got := strings.Count(strings.Join(iso.log, "\n"), "stop "+rn.id); got != tt.stops {
					t.Errorf("controller stopped %d times after a second release, want %d", got, tt.stops)
				}
			}
			// A configuration that cannot run is not tried again.
			if tt.status == results.StatusNotRun {
				again := r.newRun(ctx, planned, cfg)
				if rec := again.perform(); rec == nil || rec.Status != results.StatusNotRun || rec.Error != tt.errText {
					t.Errorf("second run of a not_run configuration: %+v", rec)
				}
				again.teardown()
				if prov.calls["docker/default"] != 1 {
					t.Errorf("engine asked %d times, want once", prov.calls["docker/default"])
				}
			}
		})
	}
}

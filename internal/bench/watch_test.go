package bench

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// The engine dies, hangs or restarts in the middle of the first of three
// runs: the run is failed with the engine named, the driver blocked on the
// dead target is cancelled, teardown waits for the engine to answer again
// (or is left to clean with a note), and the plan goes on: on the
// restarted engine, or with not_run records saying why. Never a hang.
func TestEngineFaultDuringRun(t *testing.T) {
	const src = `
name: unit
workload: benchfake
repetitions: 3
warmup: 0s
duration: 1ms
baseline: docker
configurations:
  - name: docker
    runtime: docker
`
	type fault int
	const (
		none fault = iota
		dieInDeploy
		dieInDrive
		hangInDrive
		driverFails
	)
	tests := []struct {
		desc     string
		fault    fault
		restarts bool
		status   []results.Status
		errText  []string // substrings of the first record's error
		// later is a substring of the later records' errors (not_run).
		later     string
		restarted int
		// tornDown: the first run was removed through the engine.
		tornDown bool
		warn     string
	}{
		{desc: "dockerd dies mid-drive, the driver blocks until cancelled; the engine is restarted",
			fault: dieInDrive, restarts: true,
			status:    []results.Status{results.StatusFailed, results.StatusOK, results.StatusOK},
			errText:   []string{"engine docker/default stopped answering during drive: ", "cannot connect to unix:///run/fake/docker.sock: engine unreachable"},
			restarted: 1, tornDown: true, warn: "answers again"},
		{desc: "dockerd dies mid-drive and stays dead: later runs not_run, teardown left to clean",
			fault:   dieInDrive,
			status:  []results.Status{results.StatusFailed, results.StatusNotRun, results.StatusNotRun},
			errText: []string{"engine docker/default stopped answering during drive: "},
			later:   "stopped answering and did not answer again", warn: "`ctrperf clean`"},
		{desc: "dockerd hangs mid-drive: failed after the grace period, not at the budget",
			fault: hangInDrive, restarts: true,
			status:    []results.Status{results.StatusFailed, results.StatusOK, results.StatusOK},
			errText:   []string{"engine docker/default stopped answering during drive: ", "deadline exceeded"},
			restarted: 1, tornDown: true, warn: "answers again"},
		{desc: "dockerd dies during the deploy",
			fault: dieInDeploy, restarts: true,
			status:    []results.Status{results.StatusFailed, results.StatusOK, results.StatusOK},
			errText:   []string{"engine docker/default stopped answering during deploy: ", "create network"},
			restarted: 1, tornDown: true, warn: "answers again"},
		{desc: "a driver failing on its own with the engine fine is no engine fault",
			fault:   driverFails,
			status:  []results.Status{results.StatusFailed, results.StatusOK, results.StatusOK},
			errText: []string{"drive: connection reset by peer"}, tornDown: true},
		{desc: "no fault", status: []results.Status{results.StatusOK, results.StatusOK, results.StatusOK}, tornDown: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := parsePlan(t, src, plan.Options{})
			prov := &fakeProvider{restarts: tt.restarts}
			var once sync.Once
			wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
				var err error
				once.Do(func() {
					switch tt.fault {
					case dieInDrive, hangInDrive:
						prov.mu.Lock()
						prov.down, prov.hang = tt.fault == dieInDrive, tt.fault == hangInDrive
						prov.mu.Unlock()
						<-ctx.Done() // blocked on a dead target until cancelled
						err = ctx.Err()
					case driverFails:
						err = errors.New("connection reset by peer")
					}
				})
				if err != nil {
					return nil, err
				}
				return measurement(1), nil
			}}
			if tt.fault == dieInDeploy {
				prov.dieOnDeploy = true
			}
			log := &phaseLog{}
			out := filepath.Join(t.TempDir(), "out")
			start := time.Now()
			sum, err := Run(context.Background(), p, Options{Out: out, Engines: prov, Progress: log,
				Workload:    func(string) (workload.Workload, error) { return wl, nil },
				EngineCheck: 10 * time.Millisecond, EngineGrace: 200 * time.Millisecond, RunSlack: time.Minute})
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Run took %s", took)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			recs := readRecords(t, out)
			var got []results.Status
			for _, r := range recs {
				got = append(got, r.Status)
			}
			if !slices.Equal(got, tt.status) || len(sum.Records) != len(tt.status) {
				t.Fatalf("statuses %v, want %v; records %+v", got, tt.status, recs)
			}
			for _, want := range tt.errText {
				if !strings.Contains(recs[0].Error, want) {
					t.Errorf("first record's error %q lacks %q", recs[0].Error, want)
				}
			}
			if tt.errText == nil && recs[0].Error != "" {
				t.Errorf("first record's error %q", recs[0].Error)
			}
			for _, r := range recs[1:] {
				if !strings.Contains(r.Error, tt.later) {
					t.Errorf("run %d error %q lacks %q", r.Index, r.Error, tt.later)
				}
			}
			if prov.restarted != tt.restarted {
				t.Errorf("engine restarted %d times, want %d", prov.restarted, tt.restarted)
			}
			if slices.Contains(prov.tornDown, recs[0].RunID) != tt.tornDown {
				t.Errorf("first run torn down: %v, want %v (torn down: %v)", !tt.tornDown, tt.tornDown, prov.tornDown)
			}
			if len(prov.teardownCtxErr) != 0 {
				t.Errorf("teardown with a dead context: %v", prov.teardownCtxErr)
			}
			warns := strings.Join(log.warns, "\n")
			t.Logf("first record: %s\nwarnings:\n%s", recs[0].Error, warns)
			if tt.warn != "" && !strings.Contains(warns, tt.warn) {
				t.Errorf("warnings %q lack %q", warns, tt.warn)
			}
		})
	}
}

// fakeDaemon is a daemon that stops answering and may come back.
type fakeDaemon struct {
	mu          sync.Mutex
	alive       bool
	restartable bool
	restartErr  error
	// backAfter pings: a dead engine that is not ours answers again
	// after this many more pings (0: never).
	backAfter       int
	pings, restarts int
}

func (d *fakeDaemon) Name() string      { return "fake" }
func (d *fakeDaemon) Restartable() bool { return d.restartable }
func (d *fakeDaemon) Ping(context.Context, time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pings++
	if !d.alive && d.backAfter > 0 {
		if d.backAfter--; d.backAfter == 0 {
			d.alive = true
		}
	}
	if d.alive {
		return nil
	}
	return errEngineGone
}
func (d *fakeDaemon) Restart(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.restarts++
	if d.restartErr != nil {
		return d.restartErr
	}
	d.alive = true
	return nil
}

// An engine handed out before is asked whether it still answers; a dead
// one is restarted when it is ctrperf's, waited for (bounded) when it is
// the user's, and remembered as dead otherwise: never handed out as if
// alive.
func TestEnginesCheckCachedEngine(t *testing.T) {
	tests := []struct {
		desc       string
		d          *fakeDaemon
		errText    string // "" when the engine is handed out
		restarts   int
		slowerThan time.Duration
	}{
		{desc: "alive: handed out", d: &fakeDaemon{alive: true}},
		{desc: "private engine died: restarted", d: &fakeDaemon{restartable: true}, restarts: 1},
		{desc: "private engine that cannot restart: dead, with both reasons",
			d:       &fakeDaemon{restartable: true, restartErr: errors.New("dockerd exited during start")},
			errText: "engine fake stopped answering (cannot connect to unix:///run/fake/docker.sock: engine unreachable) and could not be restarted: dockerd exited during start", restarts: 1},
		{desc: "the user's engine comes back within the wait", d: &fakeDaemon{backAfter: 3}},
		{desc: "the user's engine stays dead: given up after the wait",
			d: &fakeDaemon{}, errText: "engine fake stopped answering and did not answer again within 100ms: cannot connect to unix:///run/fake/docker.sock: engine unreachable", slowerThan: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			eng := &fakeEngine{name: "fake", p: &fakeProvider{}}
			e := &Engines{EngineWait: 100 * time.Millisecond,
				entries: map[string]*engineEntry{"docker/default": {eng: eng, info: engine.Info{Name: "fake"}, d: tt.d}}}
			ctx := context.Background()
			start := time.Now()
			got, _, err := e.Engine(ctx, engine.RuntimeDocker, engine.EngineSpec{})
			took := time.Since(start)
			if tt.errText == "" {
				if err != nil || got != eng {
					t.Fatalf("Engine: %v, %v; want the cached engine", got, err)
				}
			} else if err == nil || err.Error() != tt.errText {
				t.Fatalf("Engine error %v, want %q", err, tt.errText)
			}
			if took < tt.slowerThan || took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if tt.d.restarts != tt.restarts {
				t.Errorf("restarted %d times, want %d", tt.d.restarts, tt.restarts)
			}
			// Dead is remembered: asked again, it answers at once.
			pings := tt.d.pings
			_, _, err2 := e.Engine(ctx, engine.RuntimeDocker, engine.EngineSpec{})
			if tt.errText != "" && (err2 == nil || err2.Error() != tt.errText || tt.d.pings != pings) {
				t.Errorf("second ask: %v after %d more pings; want the same error without asking", err2, tt.d.pings-pings)
			}
			if tt.errText == "" && err2 != nil {
				t.Errorf("second ask: %v", err2)
			}
		})
	}
}

// A cancelled ask (Ctrl-C while waiting for the user's engine) is not
// remembered as a dead engine.
func TestEnginesCancelledCheckIsNotRemembered(t *testing.T) {
	d := &fakeDaemon{}
	e := &Engines{EngineWait: time.Minute,
		entries: map[string]*engineEntry{"docker/default": {eng: &fakeEngine{p: &fakeProvider{}}, d: d}}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := e.Engine(ctx, engine.RuntimeDocker, engine.EngineSpec{}); err == nil {
		t.Fatal("dead engine handed out")
	}
	if err := e.entries["docker/default"].err; err != nil {
		t.Errorf("cancelled check remembered: %v", err)
	}
}

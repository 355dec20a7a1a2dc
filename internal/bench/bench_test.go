package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// stub makes the name "benchfake" known to plan validation; each test
// passes its own fakeWorkload to the runner through Options.Workload.
type stub struct{}

func (stub) Name() string                                       { return "benchfake" }
func (stub) Decode(workload.Knobs) (any, any, error)            { return nil, nil, nil }
func (stub) Services(workload.Config) ([]engine.Service, error) { return nil, nil }
func (stub) Drive(context.Context, workload.Env) (*results.Measurement, error) {
	return nil, errors.New("stub")
}

func init() { workload.Register(stub{}) }

type fakeWorkload struct {
	servicesErr map[string]error // by network mode, to refuse one configuration
	// drive decides each run; nil returns a measurement.
	drive func(ctx context.Context, env workload.Env) (*results.Measurement, error)
}

func (w *fakeWorkload) Name() string                            { return "benchfake" }
func (w *fakeWorkload) Decode(workload.Knobs) (any, any, error) { return nil, nil, nil }
func (w *fakeWorkload) Services(c workload.Config) ([]engine.Service, error) {
	if err := w.servicesErr[string(c.Network)]; err != nil {
		return nil, err
	}
	return []engine.Service{{Name: "app", Image: "ctrperf/fake", Ports: []int{8080}}}, nil
}
func (w *fakeWorkload) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	env.Started()
	if w.drive != nil {
		return w.drive(ctx, env)
	}
	return measurement(100), nil
}

func measurement(tput float64) *results.Measurement {
	return &results.Measurement{DurationS: 1, Metrics: map[string]float64{"throughput_per_s": tput},
		Operations: map[string]*results.Operation{"get": {Count: 100}}}
}

// fakeEngine records deployments and teardowns.
type fakeEngine struct {
	name string
	p    *fakeProvider
}

func (e *fakeEngine) Info(context.Context) (engine.Info, error) {
	return engine.Info{Name: e.name}, nil
}
func (e *fakeEngine) Ping(ctx context.Context) error {
	e.p.mu.Lock()
	down, hang := e.p.down, e.p.hang
	e.p.mu.Unlock()
	switch {
	case hang:
		<-ctx.Done()
		return ctx.Err()
	case down:
		return errEngineGone
	}
	return nil
}

// errEngineGone is what an engine call returns when dockerd is gone.
var errEngineGone = fmt.Errorf("cannot connect to unix:///run/fake/docker.sock: %w", engine.ErrUnreachable)

func (e *fakeEngine) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.p.deployed = append(e.p.deployed, spec.RunID)
	e.p.specs = append(e.p.specs, spec)
	e.p.dataRoots = append(e.p.dataRoots, spec.DataRoot)
	if e.p.dieOnDeploy {
		e.p.dieOnDeploy, e.p.down = false, true
	}
	if e.p.down {
		return nil, fmt.Errorf("deploy %s: create network: %w", spec.RunID, errEngineGone)
	}
	if e.p.deployErr != nil {
		return nil, e.p.deployErr
	}
	return &engine.Target{RunID: spec.RunID, Network: spec.Network}, nil
}
func (e *fakeEngine) Exec(context.Context, *engine.Target, string, []string) (engine.ExecResult, error) {
	return engine.ExecResult{}, nil
}
func (e *fakeEngine) Teardown(ctx context.Context, t *engine.Target) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if ctx.Err() != nil {
		e.p.teardownCtxErr = append(e.p.teardownCtxErr, t.RunID)
	}
	if e.p.down || e.p.hang {
		return fmt.Errorf("teardown %s: %w", t.RunID, errEngineGone)
	}
	e.p.tornDown = append(e.p.tornDown, t.RunID)
	return nil
}
func (e *fakeEngine) Close(context.Context) error { return nil }

type fakeProvider struct {
	mu             sync.Mutex
	err            map[string]error // by EngineSpec.Key()
	deployErr      error
	calls          map[string]int
	deployed       []string
	specs          []engine.DeploySpec
	dataRoots      []string // DeploySpec.DataRoot of each deploy
	tornDown       []string
	teardownCtxErr []string
	closed         int
	// down: the engine is gone (socket refused); hang: it takes every
	// ping without answering. Asked for the engine in either state, the
	// provider restarts it when restarts is set (counting restarted), as
	// Engines does with a private engine, and reports it dead otherwise.
	down, hang, restarts bool
	restarted            int
	// dieOnDeploy: the engine dies in the next Deploy.
	dieOnDeploy bool
}

func (p *fakeProvider) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	key := string(rt) + "/" + spec.Key()
	p.calls[key]++
	if err := p.err[spec.Key()]; err != nil {
		return nil, engine.Info{}, err
	}
	if p.down || p.hang {
		if !p.restarts {
			return nil, engine.Info{}, fmt.Errorf("engine %s stopped answering and did not answer again within 1s: %w", key, errEngineGone)
		}
		p.down, p.hang = false, false
		p.restarted++
	}
	e := &fakeEngine{name: key, p: p}
	return e, engine.Info{Runtime: string(rt), Name: key}, nil
}

func (p *fakeProvider) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed++
	return nil
}

type fakeObserver struct {
	err     error
	started bool
}

func (o *fakeObserver) Start(context.Context) error { o.started = true; return o.err }
func (o *fakeObserver) Stop() *results.Series {
	return &results.Series{IntervalS: 1, Samples: []results.Sample{{T: 1}}}
}

const planYAML = `
name: unit
workload: benchfake
repetitions: 2
warmup: 0s
duration: 1ms
seed: 3
baseline: bare
configurations:
  - name: bare
    runtime: host
  - name: published
    runtime: docker
  - name: btrfs
    runtime: docker
    engine: {storage_driver: btrfs}
  - name: refused
    runtime: docker
    network: container-ip
`

func parsePlan(t *testing.T, src string, opt plan.Options) *plan.Plan {
	t.Helper()
	p, err := ParsePlan("unit.yaml", []byte(src), opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readRecords(t *testing.T, dir string) []results.RunRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// Every line must be a complete JSON object.
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if !json.Valid(line) {
			t.Fatalf("line %d of results.jsonl is not valid JSON: %q", i+1, line)
		}
	}
	recs, err := results.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestRunRecordsEveryOutcome(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	prov := &fakeProvider{err: map[string]error{"btrfs-native": errors.New("btrfs: prerequisites not met")}}
	wl := &fakeWorkload{
		servicesErr: map[string]error{"container-ip": errors.New("needs a published port")},
		drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
			if env.Config.Network == engine.NetworkPublished && strings.HasSuffix(env.Target.RunID, firstPublished) {
				return nil, errors.New("connection reset by peer")
			}
			return measurement(100), nil
		},
	}
	// The first published run fails; find its index from the run order.
	for _, r := range p.Runs() {
		if r.Config == "published" {
			firstPublished = fmt.Sprintf("-%03d", r.Index)
			break
		}
	}
	var obs []*fakeObserver
	var lines bytes.Buffer
	sum, err := Run(context.Background(), p, Options{
		Out: out, Engines: prov, Workload: func(string) (workload.Workload, error) { return wl, nil },
		Observers: func(*engine.Target) Observer { o := &fakeObserver{}; obs = append(obs, o); return o },
		Progress:  &Lines{W: &lines},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.OK != 3 || sum.Failed != 1 || sum.NotRun != 4 || sum.Interrupted {
		t.Fatalf("summary ok=%d failed=%d not_run=%d interrupted=%v, want 3 1 4 false", sum.OK, sum.Failed, sum.NotRun, sum.Interrupted)
	}
	recs := readRecords(t, out)
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	for i, rec := range recs {
		if rec.Index != i || rec.Plan != "unit" || rec.Workload != "benchfake" || rec.RunID == "" {
			t.Errorf("record %d: %+v", i, rec)
		}
		switch rec.Config {
		case "btrfs", "refused":
			if rec.Status != results.StatusNotRun || rec.Result != nil || rec.Error == "" {
				t.Errorf("%s run %d: status %s result %v error %q; want not_run without numbers, with a reason", rec.Config, i, rec.Status, rec.Result, rec.Error)
			}
		case "bare":
			if rec.Status != results.StatusOK || rec.Result.Metrics["throughput_per_s"] != 100 || rec.System == nil || rec.Engine == nil || rec.WindowOffsetS <= 0 {
				t.Errorf("bare run %d: %+v", i, rec)
			}
		}
	}
	var failed *results.RunRecord
	for i := range recs {
		if recs[i].Status == results.StatusFailed {
			failed = &recs[i]
		}
	}
	if failed == nil || failed.Config != "published" || !strings.Contains(failed.Error, "drive: connection reset by peer") || failed.Result != nil {
		t.Errorf("failed record: %+v", failed)
	}
	// The engine that cannot start is asked once, not once per run.
	if n := prov.calls["docker/btrfs-native"]; n != 1 {
		t.Errorf("btrfs engine asked %d times, want 1", n)
	}
	// Every deployment is torn down, with a live context.
	if len(prov.deployed) != 4 || strings.Join(prov.deployed, ",") != strings.Join(prov.tornDown, ",") {
		t.Errorf("deployed %v, torn down %v", prov.deployed, prov.tornDown)
	}
	if prov.closed != 1 {
		t.Errorf("provider closed %d times, want 1", prov.closed)
	}
	if len(obs) != 4 {
		t.Errorf("%d observers, want one per deployed run", len(obs))
	}
	for _, f := range []string{PlanFile, MetaFile, EnvFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s missing: %v", f, err)
		}
	}
	// OUT/plan.yaml is a valid plan equal to the one run.
	again, err := LoadPlan(filepath.Join(out, PlanFile), plan.Options{})
	if err != nil {
		t.Fatalf("OUT/plan.yaml does not load: %v", err)
	}
	h1, _ := p.Hash()
	h2, _ := again.Hash()
	if h1 != h2 {
		t.Error("OUT/plan.yaml differs from the plan run")
	}
	var env envDoc
	b, _ := os.ReadFile(filepath.Join(out, EnvFile))
	if err := json.Unmarshal(b, &env); err != nil || len(env.Machine) == 0 || len(env.Engines) != 2 {
		t.Errorf("env.json = %s (err %v), want machine facts and the two engines used", b, err)
	}
	text := lines.String()
	for _, want := range []string{
		"failed: drive: connection reset by peer; it is recorded as failed and the report will mark it",
		"not run: engine docker (btrfs-native) unavailable: btrfs: prerequisites not met",
		"not run: workload benchfake cannot deploy this configuration: needs a published port",
		"bare",
		"ctrperf report " + out,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("progress output lacks %q:\n%s", want, text)
		}
	}
}

var firstPublished string

func TestRunFailedDeployAndObserver(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"bare"}})
	out := t.TempDir()
	prov := &fakeProvider{deployErr: errors.New("image ctrperf/fake not found")}
	wl := &fakeWorkload{}
	_, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
		Workload: func(string) (workload.Workload, error) { return wl, nil }})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, out)
	if len(recs) != 2 || recs[0].Status != results.StatusFailed || !strings.Contains(recs[0].Error, "deploy: image ctrperf/fake not found") {
		t.Fatalf("records %+v", recs)
	}
	// A failed deploy is still torn down: it may have left half a deployment.
	if len(prov.tornDown) != 2 {
		t.Errorf("torn down %v, want both runs", prov.tornDown)
	}

	// An observer that cannot start costs the series, not the run.
	out2 := t.TempDir()
	prov2 := &fakeProvider{}
	var warn bytes.Buffer
	_, err = Run(context.Background(), p, Options{Out: out2, Engines: prov2, Progress: &Lines{W: &warn, Quiet: true},
		Workload:  func(string) (workload.Workload, error) { return wl, nil },
		Observers: func(*engine.Target) Observer { return &fakeObserver{err: errors.New("no /proc")} }})
	if err != nil {
		t.Fatal(err)
	}
	recs = readRecords(t, out2)
	if recs[0].Status != results.StatusOK || recs[0].System == nil || recs[0].System.Unavailable["observer"] != "no /proc" {
		t.Errorf("record with failing observer: %+v", recs[0])
	}
	if c := strings.Count(warn.String(), `system sampler "observer" unavailable`); c != 1 {
		t.Errorf("sampler warning printed %d times, want once:\n%s", c, warn.String())
	}
}

func TestRunBudgetExceeded(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"bare"}})
	out := t.TempDir()
	wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		<-ctx.Done() // a driver that hangs until cut off
		return nil, ctx.Err()
	}}
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: &fakeProvider{}, RunSlack: 1,
		Workload: func(string) (workload.Workload, error) { return wl, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 2 {
		t.Fatalf("failed = %d, want 2", sum.Failed)
	}
	recs := readRecords(t, out)
	if !strings.Contains(recs[0].Error, "run exceeded its budget") {
		t.Errorf("error %q does not explain the budget", recs[0].Error)
	}
}

// Cancelling mid-run (SIGINT) keeps results.jsonl valid, does not record
// the interrupted run, tears it down with a live context, and --resume then
// finishes the plan without redoing finished runs.
func TestRunInterruptAndResume(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	out := t.TempDir()
	prov := &fakeProvider{err: map[string]error{"btrfs-native": errors.New("no btrfs")}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	driven := 0
	force := &lifecycle.Stack{}
	wl := &fakeWorkload{
		servicesErr: map[string]error{"container-ip": errors.New("refused")},
		drive: func(dctx context.Context, env workload.Env) (*results.Measurement, error) {
			driven++
			if driven == 3 {
				// A second Ctrl-C: the force cleanup tears the run down
				// while it is still running.
				if err := force.Run(time.Second); err != nil {
					t.Errorf("force cleanup: %v", err)
				}
				cancel()
				<-dctx.Done()
				return nil, dctx.Err()
			}
			return measurement(50), nil
		},
	}
	opts := Options{Out: out, Engines: prov, Force: force, Workload: func(string) (workload.Workload, error) { return wl, nil }}
	sum, err := Run(ctx, p, opts)
	if !errors.Is(err, ErrInterrupted) || !sum.Interrupted {
		t.Fatalf("err = %v, interrupted = %v; want ErrInterrupted", err, sum.Interrupted)
	}
	recs := readRecords(t, out)
	var interruptedID string
	for _, id := range prov.deployed {
		found := false
		for _, r := range recs {
			found = found || r.RunID == id
		}
		if !found {
			interruptedID = id
		}
	}
	if interruptedID == "" {
		t.Fatalf("the interrupted run was recorded: %+v", recs)
	}
	n := len(prov.tornDown)
	if len(prov.teardownCtxErr) != 0 || n < 2 || prov.tornDown[n-1] != interruptedID || prov.tornDown[n-2] != interruptedID {
		t.Errorf("interrupted run %s: torn down %v (want it by the force cleanup, then by the runner), with dead context %v", interruptedID, prov.tornDown, prov.teardownCtxErr)
	}
	if prov.closed != 1 {
		t.Errorf("engines closed %d times after interrupt, want 1", prov.closed)
	}

	// Simulate a kill while writing the next record: a half line at the end.
	f, err := os.OpenFile(filepath.Join(out, results.FileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"plan":"unit","run_id":"x","ind`)
	f.Close()

	before := len(recs)
	opts.Resume = true
	var warn bytes.Buffer
	opts.Progress = &Lines{W: &warn, Quiet: true}
	sum, err = Run(context.Background(), p, opts)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if kept, _ := os.ReadFile(filepath.Join(out, results.FileName+results.PartialSuffix)); string(kept) != `{"plan":"unit","run_id":"x","ind`+"\n" ||
		!strings.Contains(warn.String(), "ended in a partial record (32 bytes") {
		t.Errorf("repair on resume: kept %q, warnings:\n%s", kept, warn.String())
	}
	if sum.Skipped != before || len(sum.Records) != 8-before {
		t.Errorf("resume skipped %d ran %d, want %d and %d", sum.Skipped, len(sum.Records), before, 8-before)
	}
	recs = readRecords(t, out)
	if len(recs) != 8 {
		t.Fatalf("%d records after resume, want 8", len(recs))
	}
	seen := map[int]bool{}
	for _, r := range recs {
		if seen[r.Index] {
			t.Errorf("run %d recorded twice", r.Index)
		}
		seen[r.Index] = true
	}
}

func TestOutputDirectoryGuards(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"bare"}})
	wl := &fakeWorkload{}
	opts := func(out string, resume bool) Options {
		return Options{Out: out, Resume: resume, Engines: &fakeProvider{}, Workload: func(string) (workload.Workload, error) { return wl, nil }}
	}
	tests := []struct {
		desc    string
		setup   func(t *testing.T, out string)
		resume  bool
		plan    *plan.Plan
		wantErr string
	}{
		{"a fresh run refuses a directory with results", func(t *testing.T, out string) {
			if _, err := Run(context.Background(), p, opts(out, false)); err != nil {
				t.Fatal(err)
			}
		}, false, p, "already holds a plan's results"},
		{"resume refuses a changed plan", func(t *testing.T, out string) {
			if _, err := Run(context.Background(), p, opts(out, false)); err != nil {
				t.Fatal(err)
			}
		}, true, parsePlan(t, strings.Replace(planYAML, "seed: 3", "seed: 4", 1), plan.Options{Only: []string{"bare"}}), "the plan changed since it was started"},
		{"resume needs an output directory", func(*testing.T, string) {}, true, p, "is it an output directory"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			out := t.TempDir()
			tt.setup(t, out)
			_, err := Run(context.Background(), tt.plan, opts(out, tt.resume))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFinishedRuns(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	runs := p.Runs()
	rec := func(i int, st results.Status) results.RunRecord {
		return results.RunRecord{Plan: "unit", Index: i, Config: runs[i].Config, Repetition: runs[i].Repetition, Status: st}
	}
	tests := []struct {
		desc    string
		recs    []results.RunRecord
		want    []int
		wantErr string
	}{
		{"nothing yet", nil, nil, ""},
		{"ok, failed and not_run are all finished", []results.RunRecord{rec(0, results.StatusOK), rec(1, results.StatusFailed), rec(5, results.StatusNotRun)}, []int{0, 1, 5}, ""},
		{"a record of another plan", []results.RunRecord{{Plan: "other", Index: 0, Config: runs[0].Config}}, nil, "does not match the plan's run order"},
		{"a record whose configuration differs at that index", []results.RunRecord{{Plan: "unit", Index: 0, Config: "nope"}}, nil, "does not match"},
		{"an index beyond the plan", []results.RunRecord{{Plan: "unit", Index: 99, Config: runs[0].Config}}, nil, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			done, err := finishedRuns(p, tt.recs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != len(tt.want) {
				t.Fatalf("done = %v, want %v", done, tt.want)
			}
			for _, i := range tt.want {
				if !done[i] {
					t.Errorf("run %d not finished", i)
				}
			}
		})
	}
}

// failingDisk is the results file on a disk that fails after ok records:
// like a full disk it writes part of the next record before ENOSPC, like a
// read-only one it writes nothing, like a failing one it loses the fsync.
type failingDisk struct {
	*os.File
	ok      int
	partial bool  // write half the record before failing
	err     error // of the write (or of Sync, when sync)
	sync    bool
}

func (d *failingDisk) Write(b []byte) (int, error) {
	if d.ok > 0 || d.sync {
		d.ok--
		return d.File.Write(b)
	}
	n := 0
	if d.partial {
		n, _ = d.File.Write(b[:len(b)/2])
	}
	return n, &os.PathError{Op: "write", Path: d.Name(), Err: d.err}
}

func (d *failingDisk) Sync() error {
	if d.sync && d.ok < 0 {
		return &os.PathError{Op: "sync", Path: d.Name(), Err: d.err}
	}
	return d.File.Sync()
}

// A results file that cannot be written stops the plan with one error
// naming the file and the errno, leaves no half line, tears down the run
// whose record was lost and closes the engines; --resume then finishes.
func TestRunStopsWhenResultsCannotBeWritten(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"published"}})
	tests := []struct {
		desc string
		disk failingDisk
		want string
	}{
		{"disk full mid-record", failingDisk{ok: 1, partial: true, err: syscall.ENOSPC},
			"out of space writing %s: append: no space left on device (ENOSPC); free space on the disk of"},
		{"read-only file system", failingDisk{ok: 1, err: syscall.EROFS},
			"read-only file system writing %s: append: read-only file system (EROFS); make"},
		{"fsync fails", failingDisk{ok: 2, sync: true, err: syscall.EIO},
			"I/O error writing %s: sync: input/output error (EIO)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			out := t.TempDir()
			prov := &fakeProvider{}
			wl := &fakeWorkload{}
			opts := Options{Out: out, Engines: prov, Workload: func(string) (workload.Workload, error) { return wl, nil },
				OpenStore: func(dir string) (*results.Store, error) {
					path := filepath.Join(dir, results.FileName)
					f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
					if err != nil {
						return nil, err
					}
					d := tt.disk
					d.File = f
					return results.NewStore(&d, path, 0), nil
				}}
			sum, err := Run(context.Background(), p, opts)
			want := fmt.Sprintf(tt.want, filepath.Join(out, results.FileName))
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--resume "+out) {
				t.Fatalf("err = %v\nwant it to say %q and how to resume", err, want)
			}
			stored := tt.disk.ok
			if recs := readRecords(t, out); len(recs) != stored || len(sum.Records) != stored {
				t.Errorf("%d records on disk, %d in the summary; want %d", len(recs), len(sum.Records), stored)
			}
			if len(prov.deployed) != stored+1 || strings.Join(prov.deployed, ",") != strings.Join(prov.tornDown, ",") || prov.closed != 1 {
				t.Errorf("deployed %v, torn down %v, engines closed %d: want the failing run torn down and the plan stopped", prov.deployed, prov.tornDown, prov.closed)
			}

			opts.Resume, opts.OpenStore = true, nil
			sum, err = Run(context.Background(), p, opts)
			if err != nil || sum.Skipped != stored || len(readRecords(t, out)) != 4 {
				t.Fatalf("resume: %v, skipped %d", err, sum.Skipped)
			}
		})
	}
}

// hookFile calls onWrite before the first record is written.
type hookFile struct {
	*os.File
	once    sync.Once
	onWrite func()
}

func (f *hookFile) Write(b []byte) (int, error) {
	f.once.Do(f.onWrite)
	return f.File.Write(b)
}

// A second signal after the drive, while the record is written or the run
// torn down, still releases the deployment before the process exits.
func TestForceAfterTheDriveReleasesTheRun(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"bare"}})
	out := t.TempDir()
	prov := &fakeProvider{}
	force := &lifecycle.Stack{}
	var forcedTornDown []string
	_, err := Run(context.Background(), p, Options{Out: out, Engines: prov, Force: force,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil },
		OpenStore: func(dir string) (*results.Store, error) {
			path := filepath.Join(dir, results.FileName)
			f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			return results.NewStore(&hookFile{File: f, onWrite: func() {
				if err := force.Run(time.Second); err != nil {
					t.Errorf("force: %v", err)
				}
				prov.mu.Lock()
				forcedTornDown = slices.Clone(prov.tornDown)
				prov.mu.Unlock()
			}}, path, 0), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(prov.deployed) == 0 || !slices.Equal(forcedTornDown, prov.deployed[:1]) {
		t.Errorf("deployed %v; the force cleanup during the append tore down %v, want the first run", prov.deployed, forcedTornDown)
	}
}

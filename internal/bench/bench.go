// Package bench runs a plan: every run of the interleaved run order gets its
// engine, deploys the workload, starts the observers, drives warm-up and the
// measured window, and appends one RunRecord to OUT/results.jsonl as soon as
// it ends, then tears the deployment down (also after Ctrl-C).
//
// A run that fails mid-way is recorded as failed and the plan goes on; a
// configuration that cannot run at all (its engine cannot start, its
// workload refuses it) gets not_run records with the reason and never
// numbers. An interrupted run is not recorded, so `--resume` redoes it and a
// kill loses at most the run in progress.
//
// Everything with side effects sits behind small interfaces (EngineProvider,
// Observer, Progress) so that the runner is tested end to end with fakes.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/fsutil"
	"ctrperf/internal/isolate"
	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/owner"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// EngineProvider hands out the engine a configuration needs: the host, the
// default Docker engine, or a private engine per distinct EngineSpec,
// started once and shared by every run that asks for the same knobs. Close
// releases them all (stops private engines).
type EngineProvider interface {
	Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error)
	Close(ctx context.Context) error
}

// Observer samples the system during one run (internal/observe's Observer
// satisfies it).
type Observer interface {
	Start(ctx context.Context) error
	Stop() *results.Series
}

// ObserverFactory makes the observer of one run, knowing what was deployed.
type ObserverFactory func(t *engine.Target) Observer

// Options configure Run. Out and Engines are required.
type Options struct {
	Out     string // output directory
	Resume  bool   // continue the plan already in Out
	Engines EngineProvider
	// Observers makes one observer per run; nil records no system series.
	Observers ObserverFactory
	// Progress receives progress and warnings; nil discards them.
	Progress Progress
	// Workload resolves the plan's workload; nil means workload.Get.
	Workload func(name string) (workload.Workload, error)
	// Env gathers the environment facts written to OUT/env.json; nil means
	// GatherEnv.
	Env func(ctx context.Context) any
	// Kernel is where /proc, /sys and the cgroup mount are read (the zero
	// FS: the real ones).
	Kernel kernel.FS
	// Now is the clock of records; nil means time.Now.
	Now func() time.Time
	// TeardownTimeout bounds each teardown and the final Close (default 2 min).
	TeardownTimeout time.Duration
	// RunSlack is how long a run may take beyond warm-up and duration
	// (deploy, readiness, the driver's own overhead) before it is cut off
	// and recorded as failed (default 10 min).
	RunSlack time.Duration
	// EngineCheck is how often the engine of a running run is pinged
	// (default 1 s); EngineGrace how long it may go without answering
	// before the run is failed (default 15 s). An engine that is gone
	// (socket refused, connection broken) fails the run at once.
	EngineCheck, EngineGrace time.Duration
	// Force, when set, gets a step that tears down the run in progress: the
	// cleanup a second Ctrl-C runs before the process exits at once
	// (lifecycle.WithForceCleanup).
	Force *lifecycle.Stack
	// Only and Quick are recorded in OUT/meta.json (the plan already has
	// them applied).
	Only  []string
	Quick bool
	// Isolate starts the isolate controller of configurations with
	// `isolate:`; nil means DefaultIsolator.
	Isolate Isolator
	// IsolateStateDir is the isolate controller's state directory
	// (default isolate.DefaultStateDir, the machine's; tests give their own).
	IsolateStateDir string
	// OpenStore opens the record store of the output directory; nil means
	// results.OpenStore (tests give a store whose disk fails).
	OpenStore func(dir string) (*results.Store, error)
	// Session is the run-id prefix of this invocation, <plan>-<hex>
	// (NewSession); empty makes one. Private engines are named after it.
	Session string
	// Owners, when set, is where the session records itself as the owner of
	// everything it creates (owner.DefaultDir on a real machine), so that
	// `ctrperf clean` leaves it alone; and where it finds another live
	// session, which it refuses (ErrConcurrent) unless AllowConcurrent.
	Owners *owner.Dir
	// AllowConcurrent runs beside other live sessions; recorded in
	// OUT/env.json and warned about in the report.
	AllowConcurrent bool
	// DataFS mounts the data filesystem of configurations with
	// `filesystem:`; nil means LoopDataFS with the default roots.
	DataFS DataFSMounter
	// AcceptNewHostKey lets the SSH connections to the plan's hosts
	// (hosts:) record the key of a host not yet in known_hosts, like
	// StrictHostKeyChecking=accept-new (--accept-new-host-key); a changed
	// key is always refused.
	AcceptNewHostKey bool
	// HostDialer reaches the plan's hosts; nil means remote.Dial (SSH).
	HostDialer HostDialer
}

// Summary is what happened in one invocation.
type Summary struct {
	Out         string
	Plan        *plan.Plan
	Total       int // runs in the plan
	Skipped     int // already finished in Out (resume)
	OK          int
	Failed      int
	NotRun      int
	Interrupted bool // stopped by the context; the run in progress was not recorded
	// Records of this invocation, in run order.
	Records []results.RunRecord
}

// ErrInterrupted is returned (wrapped) when the context ended the plan
// before every run was done.
var ErrInterrupted = errors.New("interrupted")

// ErrConcurrent is returned (wrapped) when another `bench run` is live on
// this machine: two sessions disturb each other's measurements.
var ErrConcurrent = errors.New("another bench run is running")

// Run executes the plan into opt.Out. It returns the summary and, if the
// plan could not be completed, why: ErrInterrupted after a cancellation,
// or the failure to write the output directory (a full, read-only or
// failing disk: a *fsutil.WriteError naming the file and the errno), which
// stops the plan after the run in progress is torn down. Failed and not_run
// runs are not errors: they are recorded and reported.
func Run(ctx context.Context, p *plan.Plan, opt Options) (_ *Summary, err error) {
	if opt.Engines == nil {
		return nil, errors.New("bench: no engine provider")
	}
	if opt.Out == "" {
		return nil, errors.New("bench: no output directory")
	}
	r := &runner{opt: opt, p: p, notRun: map[string]string{}, engines: map[string]engine.Info{}, guests: map[string]results.HostInfo{}, samplerWarned: map[string]bool{}}
	r.defaults()
	wl, err := r.opt.Workload(p.Workload)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", p.Name, err)
	}
	r.wl = wl
	runs := p.Runs()
	// Ownership before anything exists: a `ctrperf clean` started now must
	// already see whose the first object is.
	conc, release, err := r.own()
	if err != nil {
		return nil, err
	}
	defer release()
	// OUT checked and locked before anything is read from it or deployed.
	lock, err := openOut(opt.Out, opt.Resume)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	done, repaired, err := prepareOut(opt.Out, p, opt.Resume, r.meta())
	if err != nil {
		return nil, err
	}
	store, err := r.opt.OpenStore(opt.Out)
	if err != nil {
		return nil, r.outFault(fsutil.Explain(err))
	}
	defer store.Close()
	if err := writeEnv(opt.Out, r.opt.Env(ctx), nil, conc); err != nil {
		return nil, r.outFault(err)
	}

	sum := &Summary{Out: opt.Out, Plan: p, Total: len(runs), Skipped: len(done)}
	if opt.Force != nil {
		opt.Force.Push("tear down the run in progress", r.forceTeardown)
	}
	pr := r.opt.Progress
	pr.Begin(p, len(runs), len(done))
	load1, _ := Loadavg(r.opt.Kernel.Proc())
	for _, w := range append(repaired, planWarnings(p, load1, runtime.NumCPU())...) {
		pr.Warn(w)
	}
	defer func() {
		cctx, cancel := lifecycle.Detached(ctx, r.opt.TeardownTimeout)
		defer cancel()
		if err := opt.Engines.Close(cctx); err != nil {
			pr.Warn(fmt.Sprintf("closing engines: %v; run `ctrperf clean` to remove what is left", err))
		}
	}()
	defer func() {
		cctx, cancel := lifecycle.Detached(ctx, r.opt.TeardownTimeout)
		defer cancel()
		if err := r.closeHosts(cctx); err != nil {
			pr.Warn(fmt.Sprintf("closing the sessions to the plan's hosts: %v; run `ctrperf clean --hosts` to remove what is left", err))
		}
	}()
	defer func() {
		werr := writeEnv(opt.Out, nil, r.engines, nil)
		if werr == nil && len(r.guests) > 0 {
			werr = writeEnvHosts(opt.Out, slices.Collect(maps.Values(r.guests)))
		}
		switch {
		case werr == nil:
		case err == nil:
			err = r.outFault(werr)
		default:
			pr.Warn(fmt.Sprintf("recording engine facts: %v", werr))
		}
	}()

	var stop error // a write to OUT failed: no later run could be recorded
	for _, run := range runs {
		if done[run.Index] {
			continue
		}
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		cfg, ok := p.Config(run.Config)
		if !ok {
			return sum, fmt.Errorf("run %d: configuration %q is not in plan %s", run.Index, run.Config, p.Name)
		}
		pr.RunStarted(run, cfg)
		rn := r.newRun(ctx, run, cfg)
		rec := rn.perform()
		var storeErr error
		if rec != nil {
			// Written before teardown: a kill during teardown must not lose it.
			storeErr = store.Append(rec)
		}
		rn.teardown()
		// Only now: a second signal during the append or the teardown
		// must still find the deployment to release.
		r.setCurrent(nil)
		if storeErr != nil {
			stop = r.outFault(fmt.Errorf("run %d/%d (%s) is not recorded: %w", run.Index+1, len(runs), run.Config, fsutil.Explain(storeErr)))
			break
		}
		if rec == nil {
			sum.Interrupted = true
			pr.Warn(fmt.Sprintf("run %d/%d (%s) was interrupted and is not recorded; `ctrperf bench run --resume %s` redoes it",
				run.Index+1, len(runs), run.Config, opt.Out))
			break
		}
		sum.add(rec)
		pr.RunFinished(run, rec)
		for _, w := range runWarnings(p, run, len(runs), rec) {
			pr.Warn(w)
		}
		r.warnSamplers(rec)
	}
	pr.End(sum)
	if stop != nil {
		return sum, stop
	}
	if sum.Interrupted {
		return sum, fmt.Errorf("plan %s: %w after %d of %d runs; continue with `ctrperf bench run --resume %s`",
			p.Name, ErrInterrupted, sum.Skipped+len(sum.Records), sum.Total, opt.Out)
	}
	return sum, nil
}

func (s *Summary) add(rec *results.RunRecord) {
	s.Records = append(s.Records, *rec)
	switch rec.Status {
	case results.StatusOK:
		s.OK++
	case results.StatusFailed:
		s.Failed++
	case results.StatusNotRun:
		s.NotRun++
	}
}

type runner struct {
	// mu guards current, which the force cleanup reads from the signal
	// goroutine.
	mu      sync.Mutex
	current *run // the deployed run, nil between runs

	opt     Options
	p       *plan.Plan
	wl      workload.Workload
	session string // run-id prefix <plan>-<hex>
	owner   *owner.Owner
	// notRun remembers configurations that cannot run at all, so their
	// later runs are recorded without trying (and failing slowly) again.
	notRun map[string]string
	// engines are the engines used, by name, for env.json.
	engines map[string]engine.Info
	// guests are the machines of engines that are a machine of their own
	// (engine.GuestHost: a VM guest), by name, for env.json's hosts.
	guests map[string]results.HostInfo
	// samplerWarned keeps an unavailable sampler from being reported after
	// every run: it is the same on this machine each time.
	samplerWarned map[string]bool
	// hosts are the agent sessions to the plan's hosts (hosts.go), nil
	// until a configuration needs one.
	hosts *hostSet
	// sites are where each configuration runs (site.go), by name.
	sites map[string]site
}

func (r *runner) warnSamplers(rec *results.RunRecord) {
	if rec.System == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(rec.System.Unavailable)) {
		if r.samplerWarned[k] {
			continue
		}
		r.samplerWarned[k] = true
		r.opt.Progress.Warn(fmt.Sprintf("system sampler %q unavailable: %s; the report will lack it", k, rec.System.Unavailable[k]))
	}
}

func (r *runner) setCurrent(rn *run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = rn
}

// forceTeardown tears down the deployed run, if any, when the user will
// not wait for the normal unwinding. Teardown is safe to repeat, so racing
// the runner's own teardown does no harm.
func (r *runner) forceTeardown(ctx context.Context) error {
	r.mu.Lock()
	rn := r.current
	r.mu.Unlock()
	if rn == nil {
		return nil
	}
	return rn.release(ctx)
}

func (r *runner) defaults() {
	if r.opt.Progress == nil {
		r.opt.Progress = Discard{}
	}
	if r.opt.Workload == nil {
		r.opt.Workload = workload.Get
	}
	if r.opt.Env == nil {
		r.opt.Env = func(ctx context.Context) any {
			return GatherEnv(ctx, r.opt.Kernel)
		}
	}
	if r.opt.Now == nil {
		r.opt.Now = time.Now
	}
	if r.opt.TeardownTimeout <= 0 {
		r.opt.TeardownTimeout = 2 * time.Minute
	}
	if r.opt.RunSlack <= 0 {
		r.opt.RunSlack = 10 * time.Minute
	}
	if r.opt.EngineCheck <= 0 {
		r.opt.EngineCheck = time.Second
	}
	if r.opt.EngineGrace <= 0 {
		r.opt.EngineGrace = 15 * time.Second
	}
	if r.opt.IsolateStateDir == "" {
		r.opt.IsolateStateDir = isolate.DefaultStateDir
	}
	if r.opt.Isolate == nil {
		r.opt.Isolate = DefaultIsolator
	}
	if r.opt.OpenStore == nil {
		r.opt.OpenStore = results.OpenStore
	}
	r.session = r.opt.Session
	if r.session == "" {
		r.session = NewSession(r.p)
	}
}

// outFault is the one message that stops a plan whose output directory
// cannot be written: what failed (the file and the errno) and how to go on.
func (r *runner) outFault(err error) error {
	how := "make " + r.opt.Out + " writable"
	if fsutil.DiskFault(err) == "out of space" {
		how = "free space on the disk of " + r.opt.Out
	}
	return fmt.Errorf("plan %s stopped: %w; %s and continue with `ctrperf bench run --resume %s`", r.p.Name, err, how, r.opt.Out)
}

// own makes this invocation the owner of its session, after refusing when
// another session is live (unless AllowConcurrent). It returns what
// env.json records about concurrency (nil: nothing to record) and the
// release to defer.
func (r *runner) own() (*results.Concurrency, func(), error) {
	if r.opt.Owners == nil {
		return nil, func() {}, nil
	}
	live, err := r.opt.Owners.Live(owner.KindBench)
	if err != nil && len(live) == 0 && !r.opt.AllowConcurrent {
		// An unreadable record may be a live session's: say so rather than guess.
		return nil, nil, fmt.Errorf("checking for other bench runs: %w", err)
	}
	var conc *results.Concurrency
	if r.opt.AllowConcurrent {
		conc = &results.Concurrency{AllowConcurrent: true}
		for _, s := range live {
			conc.Beside = append(conc.Beside, s.Record.String())
		}
	} else if len(live) > 0 {
		s := live[0]
		return nil, nil, fmt.Errorf("%w: %s; wait for it to finish, or pass --allow-concurrent to measure beside it (recorded in env.json and warned about in the report)",
			ErrConcurrent, s.Record.String())
	}
	o, err := r.opt.Owners.Acquire(owner.Record{Kind: owner.KindBench, Session: r.session, Out: r.opt.Out, AllowConcurrent: r.opt.AllowConcurrent})
	if err != nil {
		return nil, nil, fmt.Errorf("record the owner of session %s: %w", r.session, err)
	}
	r.owner = o
	return conc, func() {
		if err := o.Release(); err != nil {
			r.opt.Progress.Warn(fmt.Sprintf("releasing the owner record: %v; `ctrperf clean` treats it as orphaned once this process is gone", err))
		}
	}, nil
}

// claim records a run id in the owner record before anything of the run
// exists (its client namespace is named by a hash of it).
func (r *runner) claim(runID string) error {
	if r.owner == nil {
		return nil
	}
	return r.owner.Add(runID)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// runID is unique per run and invocation and safe as part of a container,
// network or namespace name: <plan>-<session>-<index>.
func (r *runner) runID(run plan.Run) string {
	return fmt.Sprintf("%s-%03d", r.session, run.Index)
}

// NewSession names one invocation of a plan, <plan>-<6 hex digits>: the
// prefix of its run ids, of its private engines' names and its owner record.
func NewSession(p *plan.Plan) string {
	name := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(p.Name), "-"), "-")
	if len(name) > 16 {
		name = name[:16]
	}
	if name == "" {
		name = "plan"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

// planWarnings are hints before the first run: too few repetitions for a
// confidence interval, or a machine already busy with other work.
func planWarnings(p *plan.Plan, load1 float64, cpus int) []string {
	var out []string
	if p.Repetitions < 3 && !p.Quicked {
		out = append(out, fmt.Sprintf("%d repetition(s) per configuration: the report needs at least 3 for a confidence interval; set repetitions: 3 or more", p.Repetitions))
	}
	if cpus > 0 && load1 > 0.5*float64(cpus) {
		out = append(out, fmt.Sprintf("the machine is busy before the plan starts (1-minute load %.2f on %d CPUs): other work distorts every run; interleaving spreads it over all configurations, but a quiet machine gives narrower intervals", load1, cpus))
	}
	return out
}

// Loadavg reads the 1-minute load average from procRoot/loadavg.
func Loadavg(procRoot string) (float64, error) {
	f, err := os.Open(filepath.Join(procRoot, "loadavg"))
	if err != nil {
		return 0, fmt.Errorf("load average: %w", err)
	}
	defer f.Close()
	return parseLoadavg(f)
}

func parseLoadavg(r io.Reader) (float64, error) {
	var l1 float64
	if _, err := fmt.Fscan(r, &l1); err != nil {
		return 0, fmt.Errorf("parse loadavg: %w", err)
	}
	return l1, nil
}

// runWarnings are hyperfine-like hints about a finished run.
func runWarnings(p *plan.Plan, run plan.Run, total int, rec *results.RunRecord) []string {
	where := fmt.Sprintf("run %d/%d (%s, repetition %d)", run.Index+1, total, run.Config, run.Repetition+1)
	switch rec.Status {
	case results.StatusFailed:
		return []string{fmt.Sprintf("%s failed: %s; it is recorded as failed and the report will mark it", where, rec.Error)}
	case results.StatusNotRun:
		return []string{fmt.Sprintf("%s not run: %s; check `ctrperf doctor` for what this machine supports", where, rec.Error)}
	}
	var out []string
	m := rec.Result
	if m.Load != nil && m.Load.TargetRate > 0 && m.Load.AchievedRate < 0.95*m.Load.TargetRate {
		out = append(out, fmt.Sprintf("%s achieved %.1f/s of the target %.1f/s: the workload or the load generator is saturated; lower load.rate, or pin the generator away from the workload with load_cpuset",
			where, m.Load.AchievedRate, m.Load.TargetRate))
	}
	var errs, count int64
	for _, op := range m.Operations {
		errs += op.ErrorCount()
		count += op.Count
	}
	if errs > 0 {
		out = append(out, fmt.Sprintf("%s had %d errors in %d operations (%.1f%%); error rates are reported, but latencies of a failing service mislead",
			where, errs, count, 100*float64(errs)/float64(max(count, 1))))
	}
	for _, n := range m.Notes {
		out = append(out, where+": "+n)
	}
	return out
}

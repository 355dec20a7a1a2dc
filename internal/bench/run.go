package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// run is one run of the plan in progress. Its phases are methods called in
// order by perform; whatever it deployed is released by one path, release,
// whether the run succeeded, failed or was interrupted, and also by the
// force cleanup of a second Ctrl-C.
type run struct {
	r   *runner
	cfg *plan.Configuration
	// site is where cfg runs (site.go): its engine, observer and driver.
	site site
	id   string
	rec  *results.RunRecord
	// dataFS is the run's data filesystem (the filesystem knob), nil
	// without one; release removes it after the services.
	dataFS *DataFS

	// ctx is the plan's: its end interrupts the run, which is then not
	// recorded. rctx adds the run's own budget: a hung deploy or driver
	// must not stall the whole plan, so its expiry fails the run. The
	// engine watch cancels rctx with an *EngineFault as its cause when the
	// engine stops answering.
	ctx         context.Context
	rctx        context.Context
	cancel      context.CancelFunc
	cancelCause context.CancelCauseFunc
	budget      time.Duration

	// watch pings the engine from the deploy to the end of the drive;
	// fault is what it (or a failed phase) found: the run is failed with
	// it, and teardown first waits for the engine to answer again.
	watch *engineWatch
	fault *EngineFault

	wcfg workload.Config
	// eng and target are set by deploy before the run is handed to the
	// force cleanup (runner.setCurrent) and never change after; target is
	// nil until there is something to tear down. targets are every
	// instance's deployment (instances.go), target the first of them.
	eng     engine.Engine
	target  *engine.Target
	targets []*engine.Target
	// iso is the isolate controller once it runs. The force cleanup reads
	// it from the signal goroutine.
	iso atomic.Pointer[isolateSession]

	obs    Observer
	obsErr error
	// obsStart is the wall clock, not opt.Now: the window offset relates
	// two real instants. windowOffset is stored by the driver's Started,
	// which may be called from the driver's goroutine.
	obsStart     time.Time
	windowOffset atomic.Int64
}

// newRun prepares a run of cfg; its budget starts now.
func (r *runner) newRun(ctx context.Context, planned plan.Run, cfg *plan.Configuration) *run {
	id := r.runID(planned)
	rn := &run{r: r, cfg: cfg, site: r.siteOf(cfg), id: id, ctx: ctx,
		rec: &results.RunRecord{
			Plan: r.p.Name, RunID: id, Index: planned.Index, Config: planned.Config, Repetition: planned.Repetition,
			Knobs: cfg.KnobMap(), Workload: r.p.Workload, Start: r.opt.Now(),
			Emulated: cfg.VM.Emulated(), // the vm block is runtime vm's alone
		},
		budget: r.p.Warmup + r.p.Duration + r.opt.RunSlack,
	}
	if s, ok := cfg.Search(); ok {
		// A capacity search measures up to its max_steps windows.
		rn.budget = s.MaxDrive(r.p.Warmup+r.p.Duration) + r.opt.RunSlack
	}
	var base context.Context
	base, rn.cancelCause = context.WithCancelCause(ctx)
	var cancelBudget context.CancelFunc
	rn.rctx, cancelBudget = context.WithTimeout(base, rn.budget)
	rn.cancel = func() { cancelBudget(); rn.cancelCause(nil) }
	return rn
}

// perform runs the phases up to the record. It returns the record to
// store, nil when ctx interrupted the run (it must be redone). The caller
// stores the record and then calls teardown.
func (rn *run) perform() *results.RunRecord {
	if reason, ok := rn.r.notRun[rn.cfg.Name]; ok {
		return rn.finish(results.StatusNotRun, errors.New(reason))
	}
	if err := rn.deploy(); err != nil {
		return rn.abort(err)
	}
	if err := rn.startIsolate(); err != nil {
		return rn.abort(err)
	}
	rn.startObserver()
	m, driveErr := rn.drive()
	rn.endWatch(driveErr)
	isoErr := rn.stopIsolateAfterDrive()
	series := rn.stopObserver()
	return rn.record(m, series, driveErr, isoErr)
}

// notRunnable is why a configuration cannot run at all: the run is
// recorded not_run with it, and the configuration's later runs are not
// tried again.
type notRunnable string

func (e notRunnable) Error() string { return string(e) }

// deploy gets the engine and deploys the workload's services on it.
func (rn *run) deploy() error {
	pr := rn.r.opt.Progress
	pr.Phase("starting engine")
	eng, info, err := rn.site.open(rn.rctx)
	rn.rec.Hosts = rn.site.hosts()
	if err != nil {
		if rn.interrupted() {
			return err // cancelled, not broken: the configuration may run next time
		}
		if u := runtimeUnavailable(""); errors.As(err, &u) {
			return notRunnable(err.Error()) // e.g. accel kvm where no stock guest boots: doctor's reason
		}
		return notRunnable(fmt.Sprintf("engine %s (%s) unavailable: %v", rn.cfg.Runtime, rn.cfg.Engine.Key(), err))
	}
	rn.rec.Engine = &info
	rn.r.engines[info.Name] = info
	if g, ok := eng.(engine.GuestHost); ok {
		h := g.Host()
		rn.r.guests[h.Name] = h
	}
	name := info.Name
	if name == "" {
		name = string(rn.cfg.Runtime)
	}
	rn.watch = watchEngine(eng, name, "deploy", rn.r.opt.EngineCheck, rn.r.opt.EngineGrace, rn.cancelCause)
	rn.wcfg = workload.ConfigFor(rn.cfg)
	services, err := rn.r.wl.Services(rn.wcfg)
	if err != nil {
		return notRunnable(fmt.Sprintf("workload %s cannot deploy this configuration: %v", rn.r.p.Workload, err))
	}

	for i := range services {
		services[i].Privileged = rn.cfg.Privileged
	}

	pr.Phase("deploying")
	ids := instanceIDs(rn.id, rn.cfg.Instances)
	if rn.cfg.Filesystem.On() {
		// The data filesystem is the run's (named by its id), shared by
		// its instances: their data directories are apart on it.
		if ids[0] != rn.id {
			if err := rn.r.claim(rn.id); err != nil {
				return fmt.Errorf("record run %s in the owner record: %w", rn.id, err)
			}
		}
		if err := rn.mountDataFS(); err != nil {
			return err
		}
	}
	var err2 error
	for k, id := range ids {
		if err := rn.r.claim(id); err != nil {
			err2 = fmt.Errorf("record run %s in the owner record: %w", id, err)
			break
		}
		spec := engine.DeploySpec{RunID: id, Network: rn.cfg.Network, Data: rn.cfg.Data, Services: services}
		if rn.dataFS != nil {
			spec.DataRoot = rn.dataFS.Root
		}
		target, err := eng.Deploy(rn.rctx, spec)
		if target == nil {
			// Teardown is safe on a partial target; it finds the rest by run id.
			target = &engine.Target{RunID: id, Runtime: rn.cfg.Runtime, Network: rn.cfg.Network}
		}
		rn.targets = append(rn.targets, target)
		if err != nil {
			if rn.cfg.Privileged && privilegedRefused(err) {
				err2 = notRunnable(fmt.Sprintf("engine %s cannot start privileged containers on this machine: %v (dockerd itself lacks a capability that --privileged grants, as when it runs in a container or sandbox without all of them)", name, err))
				break
			}
			var nr notRunnable
			if errors.As(err, &nr) { // a path the SUT refuses the load host (hosts.go)
				err2 = nr
				break
			}
			var missing *engine.ImageMissingError
			if errors.Is(err, image.ErrMissing) || errors.As(err, &missing) {
				// An image nobody can build here (ctrperf never pulls): every
				// repetition would fail alike until someone loads it.
				err2 = notRunnable(err.Error())
				break
			}
			if len(ids) > 1 {
				err = fmt.Errorf("instance %d of %d: %w", k+1, len(ids), err)
			}
			err2 = rn.explain("deploy", err)
			break
		}
	}
	if d, ok := eng.(engine.DeploymentInfo); ok && len(rn.targets) > 0 {
		if in := d.DeploymentInfo(rn.targets[0]); in != nil {
			rn.rec.Engine = in // the cluster's, with the run's pods (their QoS class, nodes)
		}
	}
	if len(rn.targets) > 0 {
		rn.eng, rn.target = eng, rn.targets[0]
		rn.r.setCurrent(rn)
	}
	return err2
}

// privilegedRefused recognizes runc's refusal of a privileged container
// when dockerd does not hold every capability (it must grant them all):
// "unable to apply caps: operation not permitted". No retry can change
// that, so the configuration is not runnable here rather than failed.
func privilegedRefused(err error) bool {
	return strings.Contains(err.Error(), "unable to apply caps")
}

// startIsolate starts the isolate controller of a configuration with
// `isolate:`, after the deployment and before the warm-up.
func (rn *run) startIsolate() error {
	if !rn.cfg.Isolate.On() {
		return nil
	}
	pr := rn.r.opt.Progress
	pr.Phase("starting isolate controller")
	rn.watch.setPhase("isolate controller")
	s := &isolateSession{spec: rn.cfg.Isolate}
	ctl, err := rn.r.opt.Isolate(rn.rctx, IsolateRequest{Engine: rn.eng, Runtime: rn.cfg.Runtime, RunID: rn.id, Spec: rn.cfg.Isolate,
		StateDir: rn.r.opt.IsolateStateDir, LogDir: filepath.Join(rn.r.opt.Out, "isolate"), Events: s.event, Warn: pr.Warn,
		Kernel: rn.r.opt.Kernel})
	if err != nil {
		return rn.explain("isolate controller", err)
	}
	s.run = ctl
	rn.iso.Store(s)
	return nil
}

// startObserver starts sampling the system, if the runner has observers.
func (rn *run) startObserver() {
	rn.obsStart = time.Now()
	if rn.r.opt.Observers == nil {
		return
	}
	rn.obs = rn.site.observer(rn.eng, instancesTarget(rn.targets))
	// An observer on another machine counts its samples' times from about
	// now, on this machine's clock (remote.Observer.From).
	if rn.obsErr = rn.obs.Start(rn.rctx); rn.obsErr != nil {
		rn.obs = nil
	}
}

// drive runs the workload's warm-up and measured window.
func (rn *run) drive() (*results.Measurement, error) {
	pr := rn.r.opt.Progress
	pr.Phase("warming up")
	rn.watch.setPhase("drive")
	env := workload.Env{
		Engine: rn.eng, Target: rn.target, Config: rn.wcfg, Window: workload.WindowOf(rn.r.p),
		Started: func() {
			rn.windowOffset.Store(int64(time.Since(rn.obsStart)))
			pr.Phase("measuring")
		},
		LoadCPUSet: rn.r.p.LoadCPUSet,
		Progress:   pr.Step,
	}
	if iso := rn.iso.Load(); iso != nil {
		env.HotPhase = iso.hotPhase
	}
	wl := rn.site.driver(rn)
	if len(rn.targets) > 1 {
		ms, err := driveInstances(rn.rctx, wl, env, rn.targets)
		if err != nil {
			return nil, err
		}
		return mergeInstances(ms)
	}
	return wl.Drive(rn.rctx, env)
}

// stopIsolateAfterDrive stops the controller, which restores everything it
// changed, before its decisions are recorded and before the containers go.
func (rn *run) stopIsolateAfterDrive() error {
	sctx, cancel := lifecycle.Detached(rn.ctx, rn.r.opt.TeardownTimeout)
	defer cancel()
	err := rn.stopIsolate(sctx)
	if err != nil {
		rn.r.opt.Progress.Warn(fmt.Sprintf("isolate controller of run %s: %v", rn.id, err))
	}
	return err
}

// stopIsolate stops the controller, if one runs; only the first call
// stops it, later ones return its error.
func (rn *run) stopIsolate(ctx context.Context) error {
	return rn.iso.Load().stop(ctx)
}

// stopObserver ends sampling. A failing observer costs the system series,
// not the run.
func (rn *run) stopObserver() *results.Series {
	if rn.obs != nil {
		return rn.obs.Stop()
	}
	if rn.obsErr != nil {
		return &results.Series{Unavailable: map[string]string{"observer": rn.obsErr.Error()}}
	}
	return nil
}

// record completes the record of a run that was driven: failed when the
// driver was, ok with the measurement, the controller's decisions and the
// system series otherwise.
func (rn *run) record(m *results.Measurement, series *results.Series, driveErr, isoErr error) *results.RunRecord {
	if rn.interrupted() {
		return nil
	}
	if rn.fault != nil {
		rn.rec.System = series
		return rn.finish(results.StatusFailed, rn.fault)
	}
	if driveErr != nil {
		rn.rec.System = series
		// A tool the drive needs and does not find where it runs (a client
		// command's program in its container) fails every repetition alike.
		var nr interface{ NotRunnable() bool }
		if errors.As(driveErr, &nr) && nr.NotRunnable() {
			rn.r.notRun[rn.cfg.Name] = driveErr.Error()
			return rn.finish(results.StatusNotRun, driveErr)
		}
		return rn.finish(results.StatusFailed, rn.explain("drive", driveErr))
	}
	if m == nil {
		return rn.finish(results.StatusFailed, errors.New("drive: the workload returned no measurement"))
	}
	if rp, ok := rn.eng.(engine.RelayedPath); ok {
		if np := rp.Path(rn.target); np != nil {
			// A relay of the runtime's in every figure: the record says so.
			m.Path = np
			note := "path: " + np.Via
			if len(np.Dialled) > 0 { // a workload with no endpoint (command, fileio) dials nothing
				note += "; dialled " + strings.Join(np.Dialled, ", ")
			}
			m.Notes = append(m.Notes, note)
		}
	}
	if iso := rn.iso.Load(); iso != nil {
		iso.record(m, rn.target)
		if isoErr != nil {
			m.Notes = append(m.Notes, "isolate: "+isoErr.Error())
		}
	}
	rn.rec.Result, rn.rec.System = m, series
	if series != nil {
		rn.rec.WindowOffsetS = time.Duration(rn.windowOffset.Load()).Seconds()
	}
	return rn.finish(results.StatusOK, nil)
}

// abort ends a run that stopped before its drive: not_run when its
// configuration cannot run, not recorded (nil) when ctx interrupted it,
// failed otherwise.
func (rn *run) abort(err error) *results.RunRecord {
	var reason notRunnable
	if errors.As(err, &reason) {
		rn.r.notRun[rn.cfg.Name] = string(reason)
		return rn.finish(results.StatusNotRun, reason)
	}
	if f := rn.endWatch(err); f != nil {
		err = f
	}
	if rn.interrupted() {
		return nil
	}
	return rn.finish(results.StatusFailed, err)
}

// endWatch stops watching the engine once the run no longer drives it and
// keeps the fault, if the engine failed the run: found by the watch, or,
// after a phase failed, by a look at that failure and a ping.
func (rn *run) endWatch(failure error) *EngineFault {
	if failure != nil {
		rn.fault = rn.watch.check(rn.rctx, failure)
	} else {
		rn.fault = rn.watch.found()
	}
	rn.watch.stop()
	return rn.fault
}

func (rn *run) finish(st results.Status, err error) *results.RunRecord {
	rn.rec.Status, rn.rec.End = st, rn.r.opt.Now()
	if err != nil {
		rn.rec.Error = err.Error()
	}
	return rn.rec
}

// interrupted tells a cancelled plan (not recorded, redone by --resume)
// from a failed run.
func (rn *run) interrupted() bool { return rn.ctx.Err() != nil }

// explain names the stage that failed and, when the run's budget cut it
// off, the budget.
func (rn *run) explain(stage string, err error) error {
	if rn.rctx.Err() == context.DeadlineExceeded && !rn.interrupted() {
		what := "warm-up + duration"
		if _, ok := rn.cfg.Search(); ok {
			what = "the capacity search's steps"
		}
		return fmt.Errorf("%s: run exceeded its budget of %s (%s + %s slack): %w", stage, rn.budget, what, rn.r.opt.RunSlack, err)
	}
	return fmt.Errorf("%s: %w", stage, err)
}

// teardown ends the run after its record is stored (a kill during teardown
// must not lose it), with a context of its own: after Ctrl-C the plan's is
// gone.
//
// After an engine fault nothing can be removed through the engine until it
// answers again: the provider restarts a private engine of ctrperf's or
// waits, within bounds, for the user's; when it stays dead, what the run
// deployed is left to `ctrperf clean`, with a note saying so.
func (rn *run) teardown() {
	defer rn.cancel()
	rn.watch.stop() // a run that ended early; safe to repeat
	if rn.target == nil && rn.dataFS == nil {
		return // nothing deployed, nothing mounted
	}
	pr := rn.r.opt.Progress
	pr.Phase("tearing down")
	tctx, cancel := lifecycle.Detached(rn.ctx, rn.r.opt.TeardownTimeout)
	defer cancel()
	if f := rn.fault; f != nil {
		if _, _, err := rn.site.open(tctx); err != nil {
			pr.Warn(fmt.Sprintf("run %s is not torn down: %v; remove what is left with `ctrperf clean` once the engine answers (or after restarting it)", rn.id, err))
			return
		}
		pr.Warn(fmt.Sprintf("engine %s answers again (a private engine of ctrperf's is restarted); tearing down run %s", f.Engine, rn.id))
	}
	if err := rn.release(tctx); err != nil {
		pr.Warn(fmt.Sprintf("teardown of run %s failed: %v; remove what is left with `ctrperf clean`", rn.id, err))
	}
}

// release is the one way a deployment ends, for teardown and for the force
// cleanup, which calls it from the signal goroutine, racing the runner: the
// controller is stopped first, having restored everything it changed, and
// then the containers go. Both steps are safe to repeat.
func (rn *run) release(ctx context.Context) error {
	_ = rn.stopIsolate(ctx) // its error was reported after the drive
	var errs []error
	for _, t := range rn.targets {
		errs = append(errs, rn.eng.Teardown(ctx, t))
	}
	// The data filesystem goes after the services that held it open.
	errs = append(errs, rn.removeDataFS(ctx))
	return errors.Join(errs...)
}

package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
)

// DefaultStateDir is where `ctrperf isolate run` keeps its lock, checkpoint,
// status and decision log.
const DefaultStateDir = "/run/ctrperf/isolate"

// DefaultSteeringDir holds the lock of the machine's one writer of IRQ
// affinities and RPS masks: they are the machine's, whatever state
// directory a controller (or a restore) uses.
const DefaultSteeringDir = "/run/ctrperf/isolate-steering"

// ErrSteeringHeld reports that another live ctrperf process steers IRQs
// and RPS masks.
var ErrSteeringHeld = errors.New("another ctrperf isolate steers IRQs and RPS masks")

// LockSteering makes this process the one writer of IRQ affinities and RPS
// masks on the machine, by an owner record (internal/owner) in dir whose
// flock is held until it is closed. The owner's start time is read from
// kfs's proc root.
func LockSteering(dir string, kfs kernel.FS) (*owner.Owner, error) {
	o, err := (owner.Dir{Path: dir, Kernel: kfs}).Acquire(owner.Record{Kind: owner.KindIsolate, Session: "steering"})
	var held *owner.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w (%s, lock in %s): IRQ affinity is the machine's, one writer at a time", ErrSteeringHeld, held.Holder.Record, dir)
	}
	return o, err
}

// Options configure a controller started with Start. Zero values take the
// defaults of `ctrperf isolate run`, except the booleans (IRQ and RPS
// steering are off unless asked for).
type Options struct {
	// Params are the controller's parameters, with the sampling interval
	// and the IRQ and RPS steering: IRQ steering is turned off, with a
	// warning, while irqbalance runs.
	Params Params
	// All manages every running container, not only those labelled
	// ctrperf.isolate; Labels narrows the selection further ("key" or
	// "key=value").
	All    bool
	Labels []string
	DryRun bool
	// StateDir holds the lock, the checkpoint, status.json and, unless
	// LogPath says otherwise, decisions.jsonl. Required. Keep the default
	// (DefaultStateDir) unless the controller is a test's: IRQ affinity is
	// machine-wide, and `ctrperf isolate restore` and the next start look
	// for a crashed controller's checkpoint there.
	StateDir string
	// SteeringDir holds the machine-wide lock of IRQ and RPS writers
	// (default DefaultSteeringDir; tests give their own).
	SteeringDir string
	LogPath     string    // decision log, JSON lines (default StateDir/decisions.jsonl)
	Log         io.Writer // a copy of the decision log (the CLI's stdout); nil: none
	Metrics     *Metrics
	// Events receives every event as it is emitted (from the control
	// loop's goroutine).
	Events func(Event)
	// Warn receives what the operator should know (a checkpoint restored
	// at start, irqbalance running); nil discards it.
	Warn func(string)
	// Kernel is the kernel read and written: /proc, /sys and the cgroup
	// mount (the zero FS: the real ones).
	Kernel kernel.FS
	// CRISocket: the controller is a Kubernetes node's (StartCRI), not
	// Docker's. Read by the command, which dials it.
	CRISocket string
}

// defaults fills in Start's own options; the controller's are New's.
func (o *Options) defaults() {
	if o.LogPath == "" {
		o.LogPath = filepath.Join(o.StateDir, "decisions.jsonl")
	}
	if o.SteeringDir == "" {
		o.SteeringDir = DefaultSteeringDir
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	o.Kernel = realIfZero(o.Kernel)
}

// realIfZero is kfs, or for the zero FS the real kernel with its cgroup
// layout detected once (the zero FS detects it at every call).
func realIfZero(kfs kernel.FS) kernel.FS {
	if kfs == (kernel.FS{}) {
		return kernel.DefaultFS()
	}
	return kfs
}

// Running is a controller started by Start: its loop runs in the
// background until Stop.
type Running struct {
	ctl        *Controller
	opt        Options
	ckptPath   string
	statusPath string
	closers    []io.Closer
	cancel     context.CancelFunc
	done       chan struct{}
	stopOnce   sync.Once
	stopErr    error
}

// DockerCgroups reads and writes the cgroups of the containers of cli's
// engine (every call resolves the container afresh: for tools and tests;
// the controller resolves from its cached membership).
func DockerCgroups(cli client.APIClient, kfs kernel.FS) CgroupFS {
	rt := &DockerRuntime{Client: cli, Kernel: realIfZero(kfs)}
	return CgroupFS{Layout: rt.layout(), Dirs: rt}
}

// actuators are the kernel writers of a controller over a source's
// containers; with demoteOnly it has no cpuset writer at all.
func actuators(src Source, kfs kernel.FS, ncpu int, demoteOnly bool) (CgroupFS, Actuators) {
	fs := CgroupFS{Layout: src.layout(), Dirs: src, Files: &StatFiles{}}
	act := Actuators{CPUs: fs, Class: fs, IRQ: ProcIRQ{Kernel: kfs}, RPS: SysRPS{Kernel: kfs, NCPU: ncpu}}
	if demoteOnly {
		act.CPUs = nil
	}
	return fs, act
}

// Start builds the controller over a Docker engine exactly as `ctrperf
// isolate run` does (Docker runtime, cgroup usage, pressure, class and
// cpuset, IRQ and RPS actuators, checkpoint and lock in StateDir), restores
// what a crashed controller left in StateDir's checkpoint, and starts the
// control loop. The loop stops when ctx ends or Stop is called; only Stop
// restores.
func Start(ctx context.Context, cli client.APIClient, o Options) (*Running, error) {
	o.Params.DemoteClass = o.Params.withDefaults().DemoteClass.resolve(false)
	return startWith(ctx, o, func(o Options) (Source, error) {
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			return nil, fmt.Errorf("no Docker engine answers (%v): isolate manages containers of a running engine; start one or set DOCKER_HOST", err)
		}
		return &DockerRuntime{Client: cli, Kernel: o.Kernel, All: o.All, Labels: o.Labels}, nil
	})
}

// startWith is Start and StartCRI: the options checked, the state
// directory (and, to steer, the machine's steering) locked, then the
// source the caller makes once the locks are held.
func startWith(ctx context.Context, o Options, source func(Options) (Source, error)) (_ *Running, err error) {
	if o.StateDir == "" {
		return nil, errors.New("isolate: no state directory")
	}
	o.defaults()
	if err := o.Params.Validate(); err != nil {
		return nil, err
	}
	listIRQ, err := irqLister(o)
	if err != nil {
		return nil, err
	}
	top, err := DiscoverTopology(o.Kernel)
	if err != nil {
		return nil, err
	}
	r := &Running{opt: o, ckptPath: filepath.Join(o.StateDir, "checkpoint.json"), statusPath: filepath.Join(o.StateDir, "status.json")}
	defer func() {
		if err != nil {
			r.release()
		}
	}()
	steering, err := r.lock()
	if err != nil {
		return nil, err
	}
	src, err := source(o)
	if err != nil {
		return nil, err
	}
	return r.start(ctx, src, top, listIRQ, steering)
}

// start is what startWith does once the locks are held and the source made.
func (r *Running) start(ctx context.Context, src Source, top Topology, listIRQ func() ([]IRQ, error), steering bool) (*Running, error) {
	o := r.opt
	fs, act := actuators(src, o.Kernel, len(top.CPUs), o.Params.DemoteOnly)
	r.closers = append(r.closers, fs.Files)
	if o.Params.Demotes() {
		if _, err := os.Stat(o.Kernel.Cgroup("cpu", "cpu.idle")); err != nil && src.layout().Mode != kernel.V2 {
			o.Warn("this kernel has no cpu.idle (before 5.15): hot containers are demoted to the lowest cpu.shares instead, which protects less under EEVDF")
		}
	}
	reconciled, err := r.reconcile(ctx, act, steering)
	if err != nil {
		return nil, err
	}
	log, err := r.openLog(reconciled)
	if err != nil {
		return nil, err
	}
	opts := append(r.controllerOptions(src, fs, act, listIRQ), WithDecisionLog(log))
	var cpus CPUSetter
	if act.CPUs != nil {
		cpus = fs
	}
	ctl, err := New(Config{Params: o.Params, DryRun: o.DryRun, CheckpointPath: r.ckptPath, NCPU: len(top.CPUs)}, top, src, fs, cpus, opts...)
	if err != nil {
		return nil, err
	}
	r.run(ctx, ctl, src)
	return r, nil
}

// irqLister lists the IRQs to steer: those IRQPattern names, else the
// network devices' (by driver).
func irqLister(o Options) (func() ([]IRQ, error), error) {
	if o.Params.IRQPattern == "" {
		return func() ([]IRQ, error) { return NetworkIRQs(o.Kernel) }, nil
	}
	re, err := regexp.Compile(o.Params.IRQPattern)
	if err != nil {
		return nil, fmt.Errorf("IRQ pattern %q: %w", o.Params.IRQPattern, err)
	}
	return func() ([]IRQ, error) { return ListIRQs(o.Kernel, re) }, nil
}

// lock takes the state directory and, when the controller is to steer
// IRQs or RPS, the machine's steering lock (steering: held).
func (r *Running) lock() (steering bool, err error) {
	o := r.opt
	f, err := Lock(o.StateDir)
	if err != nil {
		return false, err
	}
	r.closers = append(r.closers, f)
	if o.DryRun || (!o.Params.IRQ && !o.Params.RPS) {
		return false, nil
	}
	s, err := LockSteering(o.SteeringDir, o.Kernel)
	if err != nil {
		return false, fmt.Errorf("%w; run without IRQ and RPS steering, or stop it", err)
	}
	r.closers = append(r.closers, s)
	return true, nil
}

// reconcile restores a checkpoint left by a crashed controller first; its
// events go to the decision log once that is open.
func (r *Running) reconcile(ctx context.Context, act Actuators, steering bool) ([]Event, error) {
	o := r.opt
	old, err := LoadCheckpoint(r.ckptPath)
	if err != nil {
		return nil, fmt.Errorf("%w (inspect it, then remove it to start afresh)", err)
	}
	if old == nil || old.Empty() {
		return nil, nil
	}
	o.Warn(fmt.Sprintf("found a checkpoint of pid %d from %s in %s: restoring its originals first", old.PID, old.Started.Format(time.RFC3339), o.StateDir))
	if o.DryRun {
		return nil, nil
	}
	if (len(old.IRQs) > 0 || len(old.RPS) > 0) && !steering {
		s, err := LockSteering(o.SteeringDir, o.Kernel)
		if err != nil {
			return nil, fmt.Errorf("reconcile from %s: its IRQ affinities and RPS masks: %w", r.ckptPath, err)
		}
		defer s.Close()
	}
	var reconciled []Event
	if err := RestoreCheckpoint(ctx, old, act, func(e Event) { reconciled = append(reconciled, e) }); err != nil {
		return nil, fmt.Errorf("reconcile from %s: %w", r.ckptPath, err)
	}
	_ = os.Remove(r.ckptPath)
	if n := leftAlone(reconciled); n > 0 {
		o.Warn(fmt.Sprintf("%d values changed since the crashed controller wrote them were left alone (%q events in %s)", n, "left_alone", o.LogPath))
	}
	return reconciled, nil
}

// openLog opens the decision log (and its copy, Options.Log) and writes
// the reconciled events to it first.
func (r *Running) openLog(reconciled []Event) (io.Writer, error) {
	o := r.opt
	// Root appends here: no symbolic link, nobody else's file or directory.
	if err := fsutil.MakeDir(filepath.Dir(o.LogPath)); err != nil {
		return nil, fmt.Errorf("create the decision log's directory: %w", err)
	}
	logFile, err := fsutil.OpenTrusted(o.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open decision log: %w", err)
	}
	r.closers = append(r.closers, logFile)
	var log io.Writer = logFile
	if o.Log != nil {
		log = io.MultiWriter(logFile, o.Log)
	}
	for _, e := range reconciled {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		b, _ := json.Marshal(e)
		_, _ = log.Write(append(b, '\n'))
	}
	return log, nil
}

// controllerOptions are the controller's actuators and outputs as the
// options ask for them.
func (r *Running) controllerOptions(src Source, fs CgroupFS, act Actuators, listIRQ func() ([]IRQ, error)) []Option {
	o := r.opt
	opts := []Option{WithDemoter(fs)}
	if src.layout().Unified != "" {
		opts = append(opts, WithStall(fs))
	}
	if o.Metrics != nil {
		opts = append(opts, WithMetrics(o.Metrics))
	}
	if o.Events != nil {
		opts = append(opts, WithEvents(o.Events))
	}
	if o.Params.IRQ {
		if pid := IrqbalancePID(o.Kernel); pid != 0 {
			o.Warn(IrqbalanceAdvice(pid) + "; IRQ steering is off while irqbalance runs")
		} else {
			opts = append(opts, WithIRQ(act.IRQ, listIRQ))
		}
	}
	if o.Params.RPS {
		opts = append(opts, WithRPS(act.RPS, func(pid int) (string, error) { return HostVeth(o.Kernel, pid) }))
	}
	return opts
}

// run starts the control loop and the status writer.
func (r *Running) run(ctx context.Context, ctl *Controller, src Source) {
	r.ctl = ctl
	loopCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = ctl.Run(loopCtx, src.Events(loopCtx)) // step errors are events, not fatal
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(r.opt.Params.withDefaults().Interval, time.Second))
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				writeJSONFile(r.statusPath, ctl.Status())
			}
		}
	}()
	go func() { wg.Wait(); close(r.done) }()
}

// RestoreOption configures RestoreStateDir.
type RestoreOption func(*restoreConfig)

type restoreConfig struct{ steeringDir string }

// WithSteeringDir replaces DefaultSteeringDir (tests).
func WithSteeringDir(dir string) RestoreOption {
	return func(c *restoreConfig) { c.steeringDir = dir }
}

// RestoreStateDir restores a stopped or crashed controller's checkpoint in
// stateDir (only the values that are still the controller's: see
// RestoreCheckpoint) and removes it. It refuses while a controller holds
// the state directory's lock, or while another process steers IRQs and
// RPS masks and the checkpoint holds some: restoring under a live
// controller would be undone at its next step and leave its checkpoint
// wrong. cli may be nil when no engine answers: then a checkpoint that
// holds containers' values is kept, with an error.
func RestoreStateDir(ctx context.Context, cli client.APIClient, stateDir string, kfs kernel.FS, emit func(Event), opts ...RestoreOption) (restored bool, err error) {
	cfg := restoreConfig{steeringDir: DefaultSteeringDir}
	for _, o := range opts {
		o(&cfg)
	}
	kfs = realIfZero(kfs)
	lock, err := Lock(stateDir)
	if err != nil {
		return false, fmt.Errorf("%w; stop it (it restores on exit) instead of restoring under it", err)
	}
	defer lock.Close()
	path := filepath.Join(stateDir, "checkpoint.json")
	cp, err := LoadCheckpoint(path)
	if err != nil || cp == nil || cp.Empty() {
		if err == nil && cp != nil {
			_ = os.Remove(path)
		}
		return false, err
	}
	if len(cp.IRQs) > 0 || len(cp.RPS) > 0 {
		s, err := LockSteering(cfg.steeringDir, kfs)
		if err != nil {
			return false, fmt.Errorf("restore from %s: %w (the checkpoint is kept)", path, err)
		}
		defer s.Close()
	}
	top, err := DiscoverTopology(kfs)
	if err != nil {
		return false, err
	}
	act := Actuators{IRQ: ProcIRQ{Kernel: kfs}, RPS: SysRPS{Kernel: kfs, NCPU: len(top.CPUs)}}
	if cli != nil {
		_, act = actuators(&DockerRuntime{Client: cli, Kernel: kfs}, kfs, len(top.CPUs), false)
	}
	if err := RestoreCheckpoint(ctx, cp, act, emit); err != nil {
		return false, fmt.Errorf("restore from %s: %w (the checkpoint is kept)", path, err)
	}
	if err := os.Remove(path); err != nil {
		return true, fmt.Errorf("restored, but could not remove %s: %w", path, err)
	}
	return true, nil
}

// leftAlone counts the values a restore left alone.
func leftAlone(events []Event) int {
	n := 0
	for _, e := range events {
		if e.Kind == "left_alone" {
			n++
		}
	}
	return n
}

// Controller is the running controller (for its Status).
func (r *Running) Controller() *Controller { return r.ctl }

// CheckpointPath is where the originals are kept until Stop restores them.
func (r *Running) CheckpointPath() string { return r.ckptPath }

// Stop ends the control loop, restores every cpuset, IRQ affinity and RPS
// mask the controller changed, and releases the locks. It is safe to call
// more than once and from several goroutines; later calls return the first
// call's result.
func (r *Running) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case <-r.done:
		case <-ctx.Done():
			// Restore anyway: it waits for a step in progress, and a step
			// that starts after the cancel fails at its first Docker call.
		}
		err := r.ctl.Restore(ctx)
		_ = os.Remove(r.statusPath)
		r.release()
		if err != nil {
			r.stopErr = fmt.Errorf("restore on exit: %w (the checkpoint %s is kept; run 'ctrperf isolate restore --state-dir %s')", err, r.ckptPath, r.opt.StateDir)
		}
	})
	return r.stopErr
}

// release closes the decision log and the locks, last opened first.
func (r *Running) release() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		_ = r.closers[i].Close()
	}
	r.closers = nil
}

func writeJSONFile(path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return
	}
	_ = fsutil.ReplaceFile(path, b, 0o644) // a status snapshot: no fsync every second
}

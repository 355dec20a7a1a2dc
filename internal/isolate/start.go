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

	"github.com/docker/docker/client"
)

// DefaultStateDir is where `ctrperf isolate run` keeps its lock, checkpoint,
// status and decision log.
const DefaultStateDir = "/run/ctrperf/isolate"

// Options configure a controller started with Start. Zero values take the
// defaults of `ctrperf isolate run`, except the booleans (IRQ and RPS
// steering are off unless asked for).
type Options struct {
	Params   Params
	Interval time.Duration // sampling interval, default 1 s
	// All manages every running container, not only those labelled
	// ctrperf.isolate; Labels narrows the selection further ("key" or
	// "key=value").
	All    bool
	Labels []string
	// IRQ steers the network IRQs whose names match IRQPattern (default
	// DefaultIRQPattern) onto the shared pool, rotated every IRQRotate
	// (default 10 s). It is turned off, with a warning, while irqbalance runs.
	IRQ        bool
	IRQPattern string
	IRQRotate  time.Duration
	// RPS sets the RPS mask of managed containers' host veths to the pool.
	RPS    bool
	DryRun bool
	// StateDir holds the lock, the checkpoint, status.json and, unless
	// LogPath says otherwise, decisions.jsonl. Required.
	StateDir string
	// MachineLock, when set, is a second lock held as long as the
	// controller runs. A controller with a private StateDir (a bench run)
	// takes DefaultStateDir's lock too: IRQ affinity is machine-wide, and
	// two controllers would fight over it.
	MachineLock string
	LogPath     string    // decision log, JSON lines (default StateDir/decisions.jsonl)
	Log         io.Writer // a copy of the decision log (the CLI's stdout); nil: none
	Metrics     *Metrics
	// Events receives every event as it is emitted (from the control
	// loop's goroutine).
	Events func(Event)
	// Warn receives what the operator should know (a checkpoint restored
	// at start, irqbalance running); nil discards it.
	Warn func(string)
	// Roots of the kernel's file systems (default /proc, /sys,
	// /sys/fs/cgroup).
	ProcRoot, SysRoot, CgroupRoot string
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.IRQPattern == "" {
		o.IRQPattern = DefaultIRQPattern
	}
	if o.IRQRotate <= 0 {
		o.IRQRotate = 10 * time.Second
	}
	if o.LogPath == "" {
		o.LogPath = filepath.Join(o.StateDir, "decisions.jsonl")
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
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

// Start builds the controller over a Docker engine exactly as `ctrperf
// isolate run` does (Docker runtime, cgroup usage and cpuset, IRQ and RPS
// actuators, checkpoint and lock in StateDir), restores what a crashed
// controller left in StateDir's checkpoint, and starts the control loop. The
// loop stops when ctx ends or Stop is called; only Stop restores.
func Start(ctx context.Context, cli client.APIClient, o Options) (_ *Running, err error) {
	if o.StateDir == "" {
		return nil, errors.New("isolate: no state directory")
	}
	o.defaults()
	if err := o.Params.Validate(); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(o.IRQPattern)
	if err != nil {
		return nil, fmt.Errorf("IRQ pattern %q: %w", o.IRQPattern, err)
	}
	top, err := DiscoverTopology(o.SysRoot)
	if err != nil {
		return nil, err
	}
	r := &Running{opt: o, ckptPath: filepath.Join(o.StateDir, "checkpoint.json"), statusPath: filepath.Join(o.StateDir, "status.json")}
	defer func() {
		if err != nil {
			r.release()
		}
	}()
	for _, p := range []string{o.MachineLock, filepath.Join(o.StateDir, "lock")} {
		if p == "" {
			continue
		}
		f, err := Lock(p)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, f)
	}
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("no Docker engine answers (%v): isolate manages containers of a running engine; start one or set DOCKER_HOST", err)
	}

	v2 := cgroupV2Only(o.CgroupRoot)
	cpus := CgroupCPUSet{Root: o.CgroupRoot, V2: v2, Path: CgroupPathOf(cli, o.ProcRoot, v2)}
	irq := ProcIRQ{Root: o.ProcRoot}
	rps := SysRPS{Root: o.SysRoot, NCPU: len(top.CPUs)}

	// Reconcile: a checkpoint left by a crashed controller is restored first.
	if old, err := LoadCheckpoint(r.ckptPath); err != nil {
		return nil, fmt.Errorf("%w (inspect it, then remove it to start afresh)", err)
	} else if old != nil && !old.Empty() {
		o.Warn(fmt.Sprintf("found a checkpoint of pid %d from %s in %s: restoring its originals first", old.PID, old.Started.Format(time.RFC3339), o.StateDir))
		if !o.DryRun {
			if err := RestoreCheckpoint(ctx, old, cpus, irq, rps, func(Event) {}); err != nil {
				return nil, fmt.Errorf("reconcile from %s: %w", r.ckptPath, err)
			}
			_ = os.Remove(r.ckptPath)
		}
	}

	logFile, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open decision log: %w", err)
	}
	r.closers = append(r.closers, logFile)
	var log io.Writer = logFile
	if o.Log != nil {
		log = io.MultiWriter(logFile, o.Log)
	}
	opts := []Option{WithDecisionLog(log)}
	if o.Metrics != nil {
		opts = append(opts, WithMetrics(o.Metrics))
	}
	if o.Events != nil {
		opts = append(opts, WithEvents(o.Events))
	}
	if o.IRQ {
		if pid := IrqbalancePID(o.ProcRoot); pid != 0 {
			o.Warn(IrqbalanceAdvice(pid) + "; IRQ steering is off while irqbalance runs")
		} else {
			opts = append(opts, WithIRQ(irq, func() ([]IRQ, error) { return ListIRQs(o.ProcRoot, re) }))
		}
	}
	if o.RPS {
		opts = append(opts, WithRPS(rps, func(pid int) (string, error) { return HostVeth(o.ProcRoot, o.SysRoot, pid) }))
	}
	rt := &DockerRuntime{Client: cli, All: o.All, Labels: o.Labels}
	ctl, err := New(Config{Params: o.Params, Interval: o.Interval, IRQRotate: o.IRQRotate, DryRun: o.DryRun,
		CheckpointPath: r.ckptPath, NCPU: len(top.CPUs)}, top, rt, CgroupUsage{ProcRoot: o.ProcRoot, CgroupRoot: o.CgroupRoot}, cpus, opts...)
	if err != nil {
		return nil, err
	}
	r.ctl = ctl

	loopCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = ctl.Run(loopCtx, rt.Events(loopCtx)) // step errors are events, not fatal
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(o.Interval)
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
	return r, nil
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

// cgroupV2Only reports a unified-only hierarchy (no v1 cpuset controller).
func cgroupV2Only(root string) bool {
	_, errV1 := os.Stat(filepath.Join(root, "cpuset"))
	_, errV2 := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return errV1 != nil && errV2 == nil
}

// CgroupV2Only reports whether the cgroup root is a unified-only hierarchy.
func CgroupV2Only(root string) bool { return cgroupV2Only(root) }

func writeJSONFile(path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}

// ReactionTime is how long the controller took to react to a hot phase:
// from hotStart to the first placement change applied (a cpuset event,
// not a dry run) to one of the hot containers at or after hotStart. ok is
// false when there was none: a reaction that did not happen is no number.
func ReactionTime(events []Event, hot map[string]bool, hotStart time.Time) (d time.Duration, ok bool) {
	for _, e := range events {
		if e.Kind != "cpuset" || e.DryRun || !hot[e.Container] || e.Time.Before(hotStart) {
			continue
		}
		if !ok || e.Time.Sub(hotStart) < d {
			d, ok = e.Time.Sub(hotStart), true
		}
	}
	return d, ok
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/image"
	"ctrperf/internal/observe"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/selfbin"
	"ctrperf/internal/vm"
)

// Engines is the EngineProvider over the real engines: the host runtime,
// the default Docker engine (daemon.Default) and a private engine per
// distinct EngineSpec (daemon.Start), each started on first use, shared by
// every run that asks for it, and stopped by Close. Images are built on the
// default engine and copied into a private one before a deployment needs
// them (no registry exists to pull from).
type Engines struct {
	// RunID names private engines (ctrperf-<spec>-<run>) so that `ctrperf
	// clean` can tell whose they are.
	RunID string
	// DaemonOptions and HostOptions reach the daemon and host packages
	// (roots for tests).
	DaemonOptions []daemon.Option
	HostOptions   []engine.BareMetalOption
	// EngineWait bounds how long Engine waits for an engine that stopped
	// answering and is not ctrperf's to restart (the user's) to answer
	// again (default 30 s).
	EngineWait time.Duration
	// VM says why runtime vm with accel kvm does not run here ("" when a
	// stock guest boots under KVM): `ctrperf doctor`'s reason for the vm
	// capability. Nil: kvm is tried as if it did.
	VM func(ctx context.Context) string
	// VMMachine is what boots guests (vm.ThisMachine by default).
	VMMachine func(runID string) (*vm.Machine, error)
	// RuntimeFlags are the program's flags for the runtimes it registers,
	// by flag name (--kubeconfig: "kubeconfig", runtime kubernetes'
	// kubeconfig when a plan's kubernetes.kubeconfig names none), passed
	// to their openers unread.
	RuntimeFlags map[string]string

	mu      sync.Mutex
	host    *engine.BareMetal
	def     *daemon.Daemon
	entries map[string]*engineEntry
	daemons []*daemon.Daemon
	// others are the engines of registered runtimes (kubernetes), closed
	// with the provider: a cluster session's namespace goes then.
	others []engine.Engine
	// ensured are the image refs built or found on the default engine.
	ensured map[string]bool
}

var _ EngineProvider = (*Engines)(nil)

// nestedBase is the image a nested engine's dockerd runs in.
const nestedBase = "ctrperf/debian-base:latest"

type engineEntry struct {
	eng  engine.Engine
	info engine.Info
	err  error
	// d is the Docker engine's daemon, nil for the host.
	d engineDaemon
}

// engineDaemon is what Engine needs of a daemon to tell a live engine
// from a dead one and to bring a dead one back (*daemon.Daemon).
type engineDaemon interface {
	Name() string
	Ping(ctx context.Context, timeout time.Duration) error
	Restartable() bool
	Restart(ctx context.Context) error
}

var _ engineDaemon = (*daemon.Daemon)(nil)

// enginePingTimeout bounds the check that a cached engine still answers.
const enginePingTimeout = 3 * time.Second

// Engine returns the engine for a runtime and spec, one that answers. A
// failure to start is remembered: an engine that cannot start now will
// not start for the next run either, and trying again costs minutes. An
// engine handed out before is asked first whether it still answers: a
// private engine of ctrperf's that died is restarted, the user's engine is
// waited for (EngineWait); one that stays dead is remembered as such, so
// the remaining runs of its configurations are not_run with the reason.
// Teardown after an engine fault comes here too, for an engine that
// answers again.
func (e *Engines) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entries == nil {
		e.entries = map[string]*engineEntry{}
	}
	key := string(rt) + "/" + spec.Key()
	if en, ok := e.entries[key]; ok {
		if en.err == nil && en.d != nil {
			if err := e.answering(ctx, en.d); err != nil {
				if ctx.Err() != nil {
					return nil, engine.Info{}, err // cancelled: the engine may still come back
				}
				en.err = err
			}
		}
		return en.eng, en.info, en.err
	}
	en := &engineEntry{}
	en.eng, en.info, en.d, en.err = e.open(ctx, rt, spec)
	if en.err != nil && ctx.Err() != nil {
		// Cancelled, not broken: do not remember.
		return nil, engine.Info{}, en.err
	}
	e.entries[key] = en
	return en.eng, en.info, en.err
}

// answering makes sure an engine handed out before still answers: it is
// pinged with a short deadline; when it does not answer, a private engine
// of this process is restarted, any other is given EngineWait to answer
// again. Never reused as if alive when it is not.
func (e *Engines) answering(ctx context.Context, d engineDaemon) error {
	err := d.Ping(ctx, enginePingTimeout)
	if err == nil {
		return nil
	}
	if d.Restartable() {
		if rerr := d.Restart(ctx); rerr != nil {
			return fmt.Errorf("engine %s stopped answering (%v) and could not be restarted: %w", d.Name(), err, rerr)
		}
		return nil
	}
	wait := e.EngineWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(min(time.Second, wait/4+1))
	defer tick.Stop()
	for {
		select {
		case <-wctx.Done():
			return fmt.Errorf("engine %s stopped answering and did not answer again within %s: %w", d.Name(), wait, err)
		case <-tick.C:
			if err = d.Ping(wctx, enginePingTimeout); err == nil {
				return nil
			}
		}
	}
}

// openVM boots runtime vm's guest for spec: accel kvm only where doctor
// finds that a stock guest boots under KVM (else its reason, not_run),
// accel tcg wherever QEMU and a guest kernel are (a plan asked for it).
func (e *Engines) openVM(ctx context.Context, spec plan.VMSpec) (engine.Engine, engine.Info, error) {
	d := spec.Defaulted()
	if d.Accel == vm.AccelKVM && e.VM != nil {
		if why := e.VM(ctx); why != "" {
			return nil, engine.Info{}, runtimeUnavailable("vm with accel kvm: " + why)
		}
	}
	machine := e.VMMachine
	if machine == nil {
		machine = func(runID string) (*vm.Machine, error) {
			self, err := selfbin.Read()
			if err != nil {
				return nil, err
			}
			if err := selfbin.CheckStatic(self.Data); err != nil {
				return nil, fmt.Errorf("the guest's init: %w", err)
			}
			return vm.ThisMachine(self.Path, runID, os.Stderr)
		}
	}
	m, err := machine(e.RunID)
	if err != nil {
		return nil, engine.Info{}, runtimeUnavailable(fmt.Sprintf("vm with accel %s: %v", d.Accel, err))
	}
	if d.Docker && m.Images == nil {
		// The guest's engine gets its images from this machine's.
		m.Images = e.hostImages()
	}
	if d.Disk == vm.DiskVirtiofs && m.Virtiofsd == "" {
		return nil, engine.Info{}, runtimeUnavailable("vm with disk virtiofs: " + vm.ErrNoVirtiofsd.Error())
	}
	eng, info, err := vm.Open(ctx, m, spec, remote.ClientOptions{Session: e.RunID})
	if err != nil {
		return nil, engine.Info{}, err
	}
	return eng, info, nil
}

// runtimeUnavailable is the error of a runtime ctrperf cannot run on this
// machine at all (vm): its configurations are not_run with these words
// alone, whatever the runtime.
type runtimeUnavailable string

func (e runtimeUnavailable) Error() string { return string(e) }

func (e *Engines) open(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, engineDaemon, error) {
	switch rt {
	case engine.RuntimeHost:
		if e.host == nil {
			e.host = engine.NewBareMetal(e.HostOptions...)
		}
		info, err := e.host.Info(ctx)
		return e.host, info, nil, err
	case engine.RuntimeDocker:
	case engine.RuntimePodman:
		return e.podman(ctx)
	case engine.RuntimeVM:
		eng, info, err := e.openVM(ctx, spec.VM)
		if eng != nil {
			e.others = append(e.others, eng)
		}
		return eng, info, nil, err
	default:
		// A runtime registered by the program (runtimes.go): kubernetes.
		if !rt.Known() {
			return nil, engine.Info{}, nil, fmt.Errorf("unknown runtime %q", rt)
		}
		open := registeredOpener(rt)
		if open == nil {
			return nil, engine.Info{}, nil, runtimeUnavailable(fmt.Sprintf("%s: this program was built without runtime %s", rt, rt))
		}
		eng, info, err := open(ctx, spec, OpenOptions{RunID: e.RunID, Flags: e.RuntimeFlags})
		if eng != nil {
			e.others = append(e.others, eng)
		}
		return eng, info, nil, err
	}
	def, err := e.defaultDaemon(ctx)
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	if spec.IsDefault() {
		eng, info, err := dockerOn(ctx, def)
		if err != nil {
			return nil, engine.Info{}, nil, err
		}
		return e.prepared(eng, def, nil), info, def, nil
	}
	var d *daemon.Daemon
	if spec.Nested {
		// Docker in Docker: the inner dockerd runs in a container of
		// ctrperf's Debian base on the default engine.
		if _, err := image.Ensure(ctx, def.Client(), nestedBase); err != nil {
			return nil, engine.Info{}, nil, fmt.Errorf("nested engine: image %s: %w", nestedBase, err)
		}
		d, err = daemon.StartNested(ctx, def, spec, e.RunID, nestedBase, e.DaemonOptions...)
	} else {
		d, err = daemon.Start(ctx, spec, e.RunID, e.DaemonOptions...)
	}
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	e.daemons = append(e.daemons, d)
	eng, info, err := dockerOn(ctx, d)
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	return e.prepared(eng, def, d), info, d, nil
}

// podman starts the session's podman service (daemon.StartPodman), an
// engine of its own that the Docker engine deploys through; its images are
// built on the default engine and loaded into podman's store like a
// private engine's.
func (e *Engines) podman(ctx context.Context) (engine.Engine, engine.Info, engineDaemon, error) {
	def, err := e.defaultDaemon(ctx)
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	d, err := daemon.StartPodman(ctx, e.RunID, e.DaemonOptions...)
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	e.daemons = append(e.daemons, d)
	eng, info, err := dockerOn(ctx, d)
	if err != nil {
		return nil, engine.Info{}, nil, err
	}
	return e.prepared(eng, def, d), info, d, nil
}

func (e *Engines) prepared(eng engine.Engine, def, private *daemon.Daemon) engine.Engine {
	if e.ensured == nil {
		e.ensured = map[string]bool{}
	}
	return &imagePreparer{Engine: eng, def: def, private: private, ensured: e.ensured, copied: map[string]bool{}}
}

func (e *Engines) defaultDaemon(ctx context.Context) (*daemon.Daemon, error) {
	if e.def != nil {
		return e.def, nil
	}
	d, err := daemon.Default(ctx, e.DaemonOptions...)
	if err != nil {
		return nil, fmt.Errorf("default docker engine: %w", err)
	}
	e.def = d
	e.daemons = append(e.daemons, d)
	return d, nil
}

// dockerOn wraps a daemon in the Docker engine; the daemon's own Info knows
// the userland-proxy setting, which the Engine API does not report.
func dockerOn(ctx context.Context, d *daemon.Daemon) (engine.Engine, engine.Info, error) {
	info, err := d.Info(ctx)
	if err != nil {
		return nil, engine.Info{}, err
	}
	opts := []engine.DockerOption{engine.WithEngineName(d.Name()), engine.WithRuntime(engine.Runtime(info.Runtime))}
	if info.UserlandProxy != nil {
		opts = append(opts, engine.WithUserlandProxy(*info.UserlandProxy))
	}
	if d.Private() {
		// Stopped by Engines.Close, not by each engine's Close.
		opts = append(opts, engine.WithPrivateEngine(func(context.Context) error { return nil }))
	}
	if d.Podman() {
		// netavark accepts only replies in FORWARD (engine.WithAcceptForwarded).
		opts = append(opts, engine.WithAcceptForwarded())
	}
	if d.Nested() {
		opts = append(opts, engine.WithHostPID(func(pid int) (int, error) { return d.HostPID(context.Background(), pid) }))
	}
	return engine.NewDocker(d.Client(), opts...), info, nil
}

// Close stops the private engines this provider started (last first) and
// releases the clients; the user's engine is never touched. It gives up when
// ctx ends while an engine is still starting (a forced exit must not hang).
func (e *Engines) Close(ctx context.Context) error {
	for !e.mu.TryLock() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("close engines: an engine is still starting: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer e.mu.Unlock()
	var errs []error
	for i := len(e.others) - 1; i >= 0; i-- {
		if err := e.others[i].Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	e.others = nil
	for i := len(e.daemons) - 1; i >= 0; i-- {
		if err := e.daemons[i].Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	e.daemons, e.def, e.entries = nil, nil, nil
	return errors.Join(errs...)
}

// imagePreparer makes sure the images of a deployment exist before it is
// deployed: built from their recipes (internal/image) on the default engine
// when missing or stale, then copied into a private engine. It happens in
// the deploy phase, outside the measured window, once per image.
type imagePreparer struct {
	engine.Engine
	def, private *daemon.Daemon
	ensured      map[string]bool // shared by all engines of the provider
	copied       map[string]bool
}

func (p *imagePreparer) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	var build, cp []string
	for _, s := range spec.Services {
		if s.Image == "" {
			continue
		}
		if s.Build != nil {
			if !p.ensured[s.Image] {
				// A user's Dockerfile context: built locally (never
				// pulled), cached by its content.
				if _, err := image.BuildDir(ctx, p.def.Client(), image.Dir{Name: s.Build.Name, Ref: s.Image,
					Path: s.Build.Dir, Dockerfile: s.Build.Dockerfile, Content: s.Build.Content}, image.WithProgress(os.Stderr)); err != nil {
					return nil, fmt.Errorf("deploy %s: service %q: %w", spec.RunID, s.Name, err)
				}
				p.ensured[s.Image] = true
			}
		} else if !p.ensured[s.Image] && !slices.Contains(build, s.Image) {
			build = append(build, s.Image)
		}
		if p.private != nil && !p.copied[s.Image] && !slices.Contains(cp, s.Image) {
			cp = append(cp, s.Image)
		}
	}
	if len(build) > 0 {
		if _, err := image.Ensure(ctx, p.def.Client(), build...); err != nil {
			return nil, fmt.Errorf("deploy %s: images: %w", spec.RunID, err)
		}
		for _, r := range build {
			p.ensured[r] = true
		}
	}
	if len(cp) > 0 {
		if err := daemon.CopyImages(ctx, p.def, p.private, cp...); err != nil {
			return nil, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
		for _, r := range cp {
			p.copied[r] = true
		}
	}
	return p.Engine.Deploy(ctx, spec)
}

// SystemObservers makes the real observer of each run: every sampler of
// internal/observe, plus the cgroups of the run's containers (host services
// have cgroups of their own too), named by service so that runs of
// different configurations line up in reports.
func SystemObservers(opts ...observe.Option) ObserverFactory {
	return func(t *engine.Target) Observer {
		var cs []observe.Container
		for _, c := range t.Containers {
			if c.CgroupPath != "" {
				name := c.Service
				if name == "" {
					name = c.Name
				}
				cs = append(cs, observe.Container{Name: name, CgroupPath: c.CgroupPath})
			}
		}
		o := append(append([]observe.Option(nil), opts...), observe.WithContainers(cs))
		return observe.New(o...)
	}
}

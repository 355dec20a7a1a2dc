package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
)

// Managed is a container the controller manages.
type Managed struct {
	ID   string
	Name string
	CPUs int // CPUs it is entitled to by label; 0 = a fair share
	// Request is the CPU its pod asked for (Kubernetes: its request, or its
	// limit when only a limit is set); 0 = none stated.
	Request float64
	PID     int  // init process on the host (for the veth); 0 = unknown
	Paused  bool // frozen: still managed, its cgroup is alive
}

// Runtime lists the containers that opted in and are running or paused. A
// container it no longer returns is gone for the controller (its cgroup no
// longer exists), so a Runtime must leave one out only when the engine
// confirmed that; on doubt it returns an error.
type Runtime interface {
	Managed(ctx context.Context) ([]Managed, error)
}

// Source is where the managed containers and their cgroups come from: a
// Docker engine (DockerRuntime) or a Kubernetes node's CRI runtime
// (CRIRuntime). The policy and the actuators do not know which.
type Source interface {
	Runtime
	DirResolver
	// Events fires when membership may have changed (a container started,
	// died, was updated); the channel closes when ctx ends.
	Events(ctx context.Context) <-chan struct{}
	layout() kernel.Layout
}

// UsageReader returns a container's cumulative CPU time.
type UsageReader interface {
	CPUTime(ctx context.Context, m Managed) (time.Duration, error)
}

// IRQSetter reads and steers interrupt affinity.
type IRQSetter interface {
	Affinity(irq int) (cpuset.CPUSet, error)
	SetAffinity(irq int, cpus cpuset.CPUSet) (cpuset.CPUSet, error)
}

// RPSSetter reads and writes receive packet steering masks.
type RPSSetter interface {
	Masks(dev string) (map[string]string, error)
	SetMask(dev, queue, mask string) error
}

var (
	_ IRQSetter = ProcIRQ{}
	_ RPSSetter = SysRPS{}
)

// Event is one line of the JSON-lines decision log.
type Event struct {
	Time time.Time `json:"time"`
	// Kind: cpuset, demote, undemote, drift, hot, normal, irq,
	// irq_skipped, rps, refused, error, restore, left_alone (a restore
	// that found the value changed since the controller wrote it).
	Kind      string `json:"kind"`
	Container string `json:"container,omitempty"`
	Name      string `json:"name,omitempty"`
	IRQ       int    `json:"irq,omitempty"`
	Device    string `json:"device,omitempty"`
	Old       string `json:"old,omitempty"`
	New       string `json:"new,omitempty"`
	Reason    string `json:"reason,omitempty"`
	DryRun    bool   `json:"dry_run,omitempty"`
	// ApplyMs: from the start of the step that decided to the write done.
	ApplyMs float64 `json:"apply_ms,omitempty"`
}

// Config tunes the controller.
type Config struct {
	Params         Params
	IRQRetry       time.Duration // skipped IRQs are tried again after this, default 6 × Params.IRQRotate
	DryRun         bool          // decide and log, write nothing
	CheckpointPath string        // where originals are kept
	NCPU           int           // CPUs on the machine, for mask widths
}

// withDefaults fills in what cfg leaves zero; the parameters' defaults
// (the interval, the IRQ rotation) are Params'.
func (cfg Config) withDefaults(top Topology) Config {
	cfg.Params = cfg.Params.withDefaults()
	if cfg.IRQRetry <= 0 {
		cfg.IRQRetry = 6 * cfg.Params.IRQRotate
	}
	if cfg.NCPU <= 0 {
		cfg.NCPU = len(top.CPUs)
	}
	return cfg
}

// Controller is the control loop. Build it with New. Its parts, by job:
// the sampler reads, Decide decides, the state checkpoints, applyValue
// writes through the settings (the dry-run ones write nothing), the IRQ
// rotation and RPS steering place interrupts.
type Controller struct {
	cfg     Config
	top     Topology
	rt      Runtime
	sampler *sampler
	act     Actuators
	set     settings
	irqs    irqRotation
	rps     rpsSteering
	clock   func() time.Time
	log     io.Writer
	events  func(Event)
	metrics *Metrics

	mu          sync.Mutex
	state       *state
	decision    Decision // the last step's, with the policy's state
	sample      sample   // the last step's
	lastRefusal string
	stepCPU     time.Duration
	saturation  saturation

	recentMu sync.Mutex
	recent   []Event // the last RecentEvents decisions, oldest first (Status)
}

// RecentEvents is how many of the last decisions Status carries.
const RecentEvents = 10

// Option configures a Controller.
type Option func(*Controller)

// WithIRQ enables IRQ steering with a setter and a lister.
func WithIRQ(s IRQSetter, list func() ([]IRQ, error)) Option {
	return func(c *Controller) { c.act.IRQ, c.irqs.list = s, list }
}

// WithRPS enables RPS steering with a setter and a veth finder.
func WithRPS(s RPSSetter, veth func(pid int) (string, error)) Option {
	return func(c *Controller) { c.act.RPS, c.rps.veth = s, veth }
}

// WithDemoter lets the controller demote hot containers (policy shield, or
// Params.Demote). Without it a policy that demotes cannot start.
func WithDemoter(d Demoter) Option { return func(c *Controller) { c.act.Class = d } }

// WithStall reads each container's CPU pressure (for the stall gate, the
// metrics and the status).
func WithStall(s StallReader) Option { return func(c *Controller) { c.sampler.stall = s } }

// WithClock replaces time.Now (tests).
func WithClock(f func() time.Time) Option { return func(c *Controller) { c.clock = f } }

// WithDecisionLog writes JSON-lines events to w.
func WithDecisionLog(w io.Writer) Option { return func(c *Controller) { c.log = w } }

// WithEvents hands every event to f as it is emitted (a bench run keeps
// them to time the controller's reaction).
func WithEvents(f func(Event)) Option { return func(c *Controller) { c.events = f } }

// WithMetrics exports Prometheus metrics.
func WithMetrics(m *Metrics) Option { return func(c *Controller) { c.metrics = m } }

// New builds a controller.
func New(cfg Config, top Topology, rt Runtime, usage UsageReader, cpus CPUSetter, opts ...Option) (*Controller, error) {
	if err := cfg.Params.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(top)
	c := &Controller{cfg: cfg, top: top, rt: rt, sampler: newSampler(usage), act: Actuators{CPUs: cpus}, clock: time.Now,
		irqs:       irqRotation{rotate: cfg.Params.IRQRotate, retry: cfg.IRQRetry, skipped: map[int]string{}},
		rps:        rpsSteering{vethOf: map[string]string{}, masked: map[string]string{}},
		saturation: saturation{}}
	for _, o := range opts {
		o(c)
	}
	if cfg.Params.Demotes() && c.act.Class == nil {
		return nil, fmt.Errorf("policy %s demotes hot containers, but no demoter was given", cfg.Params.Policy)
	}
	c.set = newSettings(c.act)
	path := cfg.CheckpointPath
	if cfg.DryRun { // the one difference of a dry run: it writes nothing, not even the checkpoint
		c.set, path = c.set.dryRun(), ""
	}
	c.state = newState(path, c.clock())
	return c, nil
}

func (c *Controller) emit(e Event) {
	e.DryRun = c.cfg.DryRun
	if e.Time.IsZero() {
		e.Time = c.clock()
	}
	if c.log != nil {
		b, _ := json.Marshal(e)
		_, _ = c.log.Write(append(b, '\n'))
	}
	if c.events != nil {
		c.events(e)
	}
	c.recentMu.Lock()
	if c.recent = append(c.recent, e); len(c.recent) > RecentEvents {
		c.recent = slices.Delete(c.recent, 0, len(c.recent)-RecentEvents)
	}
	c.recentMu.Unlock()
	c.metrics.event(e)
	if d, ok := c.saturation.reaction(e, c.decision.State[e.Container].Hot); ok {
		c.metrics.reacted(d)
	}
}

// Step runs one iteration: sample, forget the containers that are gone,
// decide, apply what changed (checking that what was applied is still
// there) and steer the interrupts.
func (c *Controller) Step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.clock()
	defer c.timeStep(start, threadCPU())
	ms, err := c.rt.Managed(ctx)
	if ms == nil && err != nil {
		return fmt.Errorf("list managed containers: %w", err) // forget nothing on doubt
	}
	errs := []error{err}
	c.sample = c.sampler.sample(ctx, ms, start)
	if err := c.forgetGone(c.sample.live); err != nil {
		return err
	}
	d := c.decide(c.sample)
	if err := c.place(ctx, start, d); errors.Is(err, errStop) {
		return err
	} else if err != nil {
		errs = append(errs, err)
	}
	if c.act.IRQ != nil {
		errs = append(errs, c.steerIRQs(ctx, start, d.SharedPool))
	}
	if c.act.RPS != nil {
		for _, m := range ms {
			errs = append(errs, c.steerRPS(ctx, m, d.SharedPool))
		}
	}
	c.irqs.pool = d.SharedPool.String()
	return errors.Join(errs...)
}

// timeStep accounts for a step that began at start, with the thread's CPU
// time then.
func (c *Controller) timeStep(start time.Time, cpu0 time.Duration) {
	used := max(threadCPU()-cpu0, 0) // 0 when a caller other than Run moved the goroutine between threads
	c.stepCPU += used
	c.metrics.step(c.clock().Sub(start), used)
}

// forgetGone forgets the containers the runtime no longer returns: the
// engine says they are not running, so their cgroups and what was written
// to them are gone.
func (c *Controller) forgetGone(live map[string]bool) error {
	changed := false
	for _, id := range c.knownIDs() {
		if live[id] {
			continue
		}
		c.sampler.forget(id)
		delete(c.rps.vethOf, id)
		if c.state.forgetContainer(id) {
			changed = true
		}
		c.metrics.forget(id)
	}
	if changed {
		return c.state.save()
	}
	return nil
}

// knownIDs are the containers the controller holds anything for.
func (c *Controller) knownIDs() []string {
	ids := append(c.sampler.known(), c.state.containers()...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// decide runs the policy over a sample and logs its transitions.
func (c *Controller) decide(s sample) Decision {
	d := Decide(c.top, c.cfg.Params, c.decision.State, s.containers, s.usage, s.stall)
	c.saturation.track(c.decision.State, d.State, s.from)
	c.decision = d
	for _, tr := range d.Transitions {
		kind := "normal"
		if tr.Hot {
			kind = "hot"
		}
		c.emit(Event{Kind: kind, Container: tr.ContainerID, Name: tr.Name, Reason: tr.Reason})
	}
	if d.PinRefused != c.lastRefusal {
		if d.PinRefused != "" {
			c.emit(Event{Kind: "refused", Reason: d.PinRefused})
		}
		c.lastRefusal = d.PinRefused
	}
	return d
}

// Run steps every interval until ctx is done, and steps at once when
// trigger fires (a container started or stopped). Step errors are logged,
// not fatal: one container or IRQ failing must not stop the others.
func (c *Controller) Run(ctx context.Context, trigger <-chan struct{}) error {
	// One OS thread for the loop, so that a step's CPU time can be read
	// from the thread's rusage.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(c.cfg.Params.Interval)
	defer t.Stop()
	for {
		if err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.emit(Event{Kind: "error", Reason: err.Error()})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-trigger:
		}
	}
}

// Restore writes back every original value the checkpoint holds where the
// controller's value is still in place (RestoreCheckpoint), then removes
// the checkpoint. Containers that are gone are skipped.
func (c *Controller) Restore(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := restoreAll(ctx, c.state.ckpt, c.set, c.emit)
	if err == nil {
		if rmErr := c.state.remove(); rmErr != nil {
			return rmErr
		}
	}
	cp := c.state.ckpt
	if err == nil {
		cp = NewCheckpoint(c.clock())
	}
	c.state.reset(cp) // nothing is applied any more
	c.rps.masked = map[string]string{}
	return err
}

// threadCPU is the CPU time of the calling OS thread (a step runs on one:
// see Run).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Lock makes this process the one writer of stateDir: an owner record
// (internal/owner, kind isolate) whose flock is held for as long as it
// lives, so that a second controller, or a restore, refuses by the same
// rule `ctrperf clean` decides liveness by. Release it by closing it.
func Lock(stateDir string) (*owner.Owner, error) {
	o, err := (owner.Dir{Path: stateDir}).Acquire(owner.Record{Kind: owner.KindIsolate, Session: "controller"})
	var held *owner.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("another ctrperf isolate holds %s (%s): only one writer at a time", stateDir, held.Holder.Record)
	}
	return o, err
}

// ckptCopy is a copy of the checkpoint in memory (tests, status).
func (c *Controller) ckptCopy() Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	src := c.state.ckpt
	cp := *src
	cp.CPUSets, cp.Classes, cp.IRQs, cp.RPS = maps.Clone(src.CPUSets), maps.Clone(src.Classes), maps.Clone(src.IRQs), maps.Clone(src.RPS)
	cp.Written = Written{CPUSets: maps.Clone(src.Written.CPUSets), Classes: maps.Clone(src.Written.Classes),
		IRQs: maps.Clone(src.Written.IRQs), RPS: maps.Clone(src.Written.RPS)}
	return cp
}

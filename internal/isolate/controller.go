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
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// Managed is a container the controller manages.
type Managed struct {
	ID   string
	Name string
	CPUs int // dedicated CPUs asked for by label; 0 = default
	PID  int // init process on the host (for the veth); 0 = unknown
}

// Runtime lists the containers that opted in.
type Runtime interface {
	Managed(ctx context.Context) ([]Managed, error)
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
	_ CPUSetter = CgroupCPUSet{}
)

// Event is one line of the JSON-lines decision log.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // cpuset, hot, normal, irq, irq_skipped, rps, error, restore
	Container string    `json:"container,omitempty"`
	Name      string    `json:"name,omitempty"`
	IRQ       int       `json:"irq,omitempty"`
	Device    string    `json:"device,omitempty"`
	Old       string    `json:"old,omitempty"`
	New       string    `json:"new,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	DryRun    bool      `json:"dry_run,omitempty"`
	// ApplyMs: from the start of the step that decided to the write done.
	ApplyMs float64 `json:"apply_ms,omitempty"`
}

// Config tunes the controller.
type Config struct {
	Params         Params
	Interval       time.Duration  // sampling interval, default 1 s
	IRQPattern     *regexp.Regexp // nil: no IRQ steering
	IRQRotate      time.Duration  // default 10 s, the paper's period
	RPS            bool           // steer container veths' RPS to the shared pool
	DryRun         bool           // decide and log, write nothing
	CheckpointPath string         // where originals are kept
	NCPU           int            // CPUs on the machine, for mask widths
}

// Controller is the control loop. Build it with New.
type Controller struct {
	cfg     Config
	top     Topology
	rt      Runtime
	usage   UsageReader
	cpus    CPUSetter
	irq     IRQSetter
	listIRQ func() ([]IRQ, error)
	rps     RPSSetter
	veth    func(pid int) (string, error)
	clock   func() time.Time
	log     io.Writer
	events  func(Event)
	metrics *Metrics

	mu         sync.Mutex
	ckpt       *Checkpoint
	state      State
	last       map[string]cpuSample
	applied    map[string]string // container -> cpuset we wrote
	names      map[string]string
	vethOf     map[string]string // container -> host veth
	rpsApplied map[string]string // dev -> mask we wrote
	irqApplied map[int]int
	skipped    map[int]string
	irqStep    int
	lastRotate time.Time
	lastPool   string
	decision   Decision
}

type cpuSample struct {
	cpu time.Duration
	at  time.Time
}

// Option configures a Controller.
type Option func(*Controller)

// WithIRQ enables IRQ steering with a setter and a lister.
func WithIRQ(s IRQSetter, list func() ([]IRQ, error)) Option {
	return func(c *Controller) { c.irq, c.listIRQ = s, list }
}

// WithRPS enables RPS steering with a setter and a veth finder.
func WithRPS(s RPSSetter, veth func(pid int) (string, error)) Option {
	return func(c *Controller) { c.rps, c.veth = s, veth }
}

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
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.IRQRotate <= 0 {
		cfg.IRQRotate = 10 * time.Second
	}
	if cfg.NCPU <= 0 {
		cfg.NCPU = len(top.CPUs)
	}
	c := &Controller{cfg: cfg, top: top, rt: rt, usage: usage, cpus: cpus, clock: time.Now,
		state: State{}, last: map[string]cpuSample{}, applied: map[string]string{}, names: map[string]string{},
		vethOf: map[string]string{}, rpsApplied: map[string]string{}, irqApplied: map[int]int{}, skipped: map[int]string{}}
	for _, o := range opts {
		o(c)
	}
	c.ckpt = NewCheckpoint(c.clock())
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
	if c.metrics != nil {
		c.metrics.event(e)
	}
}

func (c *Controller) saveCheckpoint() error {
	if c.cfg.DryRun || c.cfg.CheckpointPath == "" {
		return nil
	}
	return c.ckpt.Save(c.cfg.CheckpointPath)
}

// Step runs one iteration: sample, decide, apply what changed.
func (c *Controller) Step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.clock()
	defer func() {
		if c.metrics != nil {
			c.metrics.loopSeconds.Observe(c.clock().Sub(start).Seconds())
		}
	}()
	ms, err := c.rt.Managed(ctx)
	if err != nil {
		return fmt.Errorf("list managed containers: %w", err)
	}
	live := map[string]bool{}
	var containers []Container
	usage := map[string]float64{}
	for _, m := range ms {
		live[m.ID] = true
		c.names[m.ID] = m.Name
		containers = append(containers, Container{ID: m.ID, Name: m.Name, CPUs: m.CPUs})
		t, err := c.usage.CPUTime(ctx, m)
		if err != nil {
			continue // it may be stopping; a missing sample keeps its streaks
		}
		if p, ok := c.last[m.ID]; ok && start.After(p.at) {
			usage[m.ID] = (t - p.cpu).Seconds() / start.Sub(p.at).Seconds()
		}
		c.last[m.ID] = cpuSample{t, start}
	}
	// Forget containers that are gone: nothing to restore for them.
	changed := false
	for id := range c.last {
		if !live[id] {
			delete(c.last, id)
			delete(c.applied, id)
			delete(c.names, id)
			delete(c.vethOf, id)
			if _, ok := c.ckpt.CPUSets[id]; ok {
				delete(c.ckpt.CPUSets, id)
				changed = true
			}
			if c.metrics != nil {
				c.metrics.forget(id)
			}
		}
	}
	if changed {
		if err := c.saveCheckpoint(); err != nil {
			return err
		}
	}

	d := Decide(c.top, c.cfg.Params, c.state, containers, usage)
	c.state = d.State
	c.decision = d
	for _, tr := range d.Transitions {
		kind := "normal"
		if tr.Hot {
			kind = "hot"
		}
		c.emit(Event{Kind: kind, Container: tr.ContainerID, Name: tr.Name, Reason: tr.Reason})
	}

	var errs []error
	ids := make([]string, 0, len(d.Placements))
	for id := range d.Placements {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		pl := d.Placements[id]
		if pl.CPUs.IsEmpty() {
			errs = append(errs, fmt.Errorf("policy produced an empty cpuset for %s: not applied", id))
			continue
		}
		want := pl.CPUs.String()
		old, known := c.applied[id]
		if known && old == want {
			continue
		}
		if !known {
			orig, err := c.cpus.CPUs(ctx, id)
			if err != nil {
				if !gone(err) {
					errs = append(errs, fmt.Errorf("read cpuset of %s: %w", pl.Name, err))
				}
				continue
			}
			old = orig
			if !c.cfg.DryRun && c.ckpt.RememberCPUSet(id, orig) {
				if err := c.saveCheckpoint(); err != nil {
					return err // never change what we could not remember
				}
			}
		}
		if !c.cfg.DryRun {
			if err := c.cpus.SetCPUs(ctx, id, pl.CPUs); err != nil {
				if gone(err) {
					continue // removed while we decided: churn, not a failure
				}
				errs = append(errs, err)
				c.emit(Event{Kind: "error", Container: id, Name: pl.Name, New: want, Reason: err.Error()})
				if c.metrics != nil {
					c.metrics.writeFailures.WithLabelValues("cpuset").Inc()
				}
				continue
			}
		}
		c.applied[id] = want
		c.emit(Event{Kind: "cpuset", Container: id, Name: pl.Name, Old: old, New: want, Reason: pl.Reason,
			ApplyMs: float64(c.clock().Sub(start).Microseconds()) / 1000})
		if c.metrics != nil {
			c.metrics.placement(id, pl)
		}
	}

	pool := d.SharedPool
	if c.irq != nil {
		if err := c.steerIRQs(start, pool); err != nil {
			errs = append(errs, err)
		}
	}
	if c.rps != nil {
		for _, m := range ms {
			if err := c.steerRPS(m, pool); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.lastPool = pool.String()
	return errors.Join(errs...)
}

// steerIRQs points the selected IRQs at the shared pool, one CPU each,
// rotating round-robin every IRQRotate (and at once when the pool changes).
func (c *Controller) steerIRQs(now time.Time, pool cpuset.CPUSet) error {
	if !c.lastRotate.IsZero() && now.Sub(c.lastRotate) < c.cfg.IRQRotate && pool.String() == c.lastPool {
		return nil
	}
	irqs, err := c.listIRQ()
	if err != nil {
		return fmt.Errorf("list IRQs: %w", err)
	}
	if !c.lastRotate.IsZero() {
		c.irqStep++
	}
	c.lastRotate = now
	var errs []error
	for i, irq := range irqs {
		if _, skip := c.skipped[irq.Num]; skip {
			continue
		}
		cpu, err := IRQCPU(pool, c.irqStep+i)
		if err != nil {
			return err
		}
		if prev, ok := c.irqApplied[irq.Num]; ok && prev == cpu {
			continue
		}
		orig, err := c.irq.Affinity(irq.Num)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c.cfg.DryRun {
			c.irqApplied[irq.Num] = cpu
			c.emit(Event{Kind: "irq", IRQ: irq.Num, Name: irq.Name, Old: orig.String(), New: strconv.Itoa(cpu), Reason: "rotate over the shared pool"})
			continue
		}
		if c.ckpt.RememberIRQ(irq.Num, orig.String()) {
			if err := c.saveCheckpoint(); err != nil {
				return err
			}
		}
		eff, err := c.irq.SetAffinity(irq.Num, cpuset.New(cpu))
		if err != nil {
			if errors.Is(err, ErrIRQNotMoved) || errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) {
				c.skipped[irq.Num] = err.Error()
				c.emit(Event{Kind: "irq_skipped", IRQ: irq.Num, Name: irq.Name, New: strconv.Itoa(cpu), Reason: err.Error()})
				if c.metrics != nil {
					c.metrics.writeFailures.WithLabelValues("irq").Inc()
				}
				continue
			}
			errs = append(errs, err)
			continue
		}
		c.irqApplied[irq.Num] = cpu
		c.emit(Event{Kind: "irq", IRQ: irq.Num, Name: irq.Name, Old: orig.String(), New: eff.String(), Reason: "rotate over the shared pool"})
	}
	return errors.Join(errs...)
}

func (c *Controller) steerRPS(m Managed, pool cpuset.CPUSet) error {
	if m.PID <= 0 {
		return nil
	}
	dev, ok := c.vethOf[m.ID]
	if !ok {
		d, err := c.veth(m.PID)
		if err != nil {
			c.vethOf[m.ID] = "" // host network or none: nothing to steer
			return nil
		}
		dev, c.vethOf[m.ID] = d, d
	}
	if dev == "" {
		return nil
	}
	mask := HexMask(pool, c.cfg.NCPU)
	if c.rpsApplied[dev] == mask {
		return nil
	}
	qs, err := c.rps.Masks(dev)
	if err != nil {
		return err
	}
	for q, orig := range qs {
		if !c.cfg.DryRun {
			if c.ckpt.RememberRPS(dev, q, orig) {
				if err := c.saveCheckpoint(); err != nil {
					return err
				}
			}
			if err := c.rps.SetMask(dev, q, mask); err != nil {
				if c.metrics != nil {
					c.metrics.writeFailures.WithLabelValues("rps").Inc()
				}
				return err
			}
		}
		c.emit(Event{Kind: "rps", Container: m.ID, Name: m.Name, Device: dev + "/" + q, Old: orig, New: mask, Reason: "packet steering to the shared pool"})
	}
	c.rpsApplied[dev] = mask
	return nil
}

// Run steps every interval until ctx is done, and steps at once when
// trigger fires (a container started or stopped). Step errors are logged,
// not fatal: one container or IRQ failing must not stop the others.
func (c *Controller) Run(ctx context.Context, trigger <-chan struct{}) error {
	t := time.NewTicker(c.cfg.Interval)
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

// Restore writes back every original value the checkpoint holds, then
// removes the checkpoint. Containers that are gone are skipped.
func (c *Controller) Restore(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := RestoreCheckpoint(ctx, c.ckpt, c.cpus, c.irq, c.rps, c.emit)
	if err == nil && c.cfg.CheckpointPath != "" && !c.cfg.DryRun {
		if rmErr := os.Remove(c.cfg.CheckpointPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return rmErr
		}
	}
	c.applied = map[string]string{}
	c.rpsApplied = map[string]string{}
	c.irqApplied = map[int]int{}
	return err
}

// ErrContainerGone lets a CPUSetter say the container no longer exists.
var ErrContainerGone = errors.New("container is gone")

// gone reports an error that only means the container went away.
func gone(err error) bool {
	return errors.Is(err, ErrContainerGone) || errors.Is(err, os.ErrNotExist)
}

// RestoreCheckpoint writes back what cp remembers, through the given
// actuators (nil ones are skipped only if cp has nothing for them).
func RestoreCheckpoint(ctx context.Context, cp *Checkpoint, cpus CPUSetter, irq IRQSetter, rps RPSSetter, emit func(Event)) error {
	if cp == nil {
		return nil
	}
	var errs []error
	for id, orig := range cp.CPUSets {
		set, err := cpuset.Parse(orig)
		if err != nil || set.IsEmpty() {
			errs = append(errs, fmt.Errorf("checkpoint cpuset of %s is %q: %v", id, orig, err))
			continue
		}
		if err := cpus.SetCPUs(ctx, id, set); err != nil {
			if gone(err) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		emit(Event{Kind: "restore", Container: id, New: orig})
	}
	for k, orig := range cp.IRQs {
		n, _ := strconv.Atoi(k)
		set, err := cpuset.Parse(orig)
		if err != nil || irq == nil {
			errs = append(errs, fmt.Errorf("cannot restore IRQ %s to %q: %v", k, orig, err))
			continue
		}
		if _, err := irq.SetAffinity(n, set); err != nil && !errors.Is(err, ErrIRQNotMoved) {
			errs = append(errs, err)
			continue
		}
		emit(Event{Kind: "restore", IRQ: n, New: orig})
	}
	for k, orig := range cp.RPS {
		dev, q := filepath.Split(k)
		dev = filepath.Clean(dev)
		if rps == nil {
			errs = append(errs, fmt.Errorf("cannot restore RPS of %s", k))
			continue
		}
		if err := rps.SetMask(dev, q, orig); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the veth went away with its container
			}
			errs = append(errs, err)
			continue
		}
		emit(Event{Kind: "restore", Device: k, New: orig})
	}
	return errors.Join(errs...)
}

// Status is what `ctrperf isolate status` shows.
type Status struct {
	Time       time.Time         `json:"time"`
	PID        int               `json:"pid"`
	Policy     Policy            `json:"policy"`
	DryRun     bool              `json:"dry_run"`
	SharedPool string            `json:"shared_pool"`
	Oversub    bool              `json:"oversubscribed"`
	Containers []ContainerStatus `json:"containers"`
	IRQs       map[int]int       `json:"irqs,omitempty"`
	Skipped    map[int]string    `json:"irqs_skipped,omitempty"`
	RPS        map[string]string `json:"rps,omitempty"`
}

// ContainerStatus is one row of the placement table.
type ContainerStatus struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	CPUs   string `json:"cpus"`
	Hot    bool   `json:"hot"`
	Shared bool   `json:"shared"`
	Reason string `json:"reason"`
}

// Status returns the current placement table.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Time: c.clock(), PID: os.Getpid(), Policy: c.cfg.Params.withDefaults().Policy, DryRun: c.cfg.DryRun,
		SharedPool: c.decision.SharedPool.String(), Oversub: c.decision.Oversubscribed,
		IRQs: map[int]int{}, Skipped: map[int]string{}, RPS: map[string]string{}}
	for id, pl := range c.decision.Placements {
		s.Containers = append(s.Containers, ContainerStatus{ID: id, Name: pl.Name, CPUs: pl.CPUs.String(), Hot: pl.Hot, Shared: pl.Shared, Reason: pl.Reason})
	}
	sort.Slice(s.Containers, func(i, j int) bool { return s.Containers[i].Name < s.Containers[j].Name })
	for k, v := range c.irqApplied {
		s.IRQs[k] = v
	}
	for k, v := range c.skipped {
		s.Skipped[k] = v
	}
	for k, v := range c.rpsApplied {
		s.RPS[k] = v
	}
	return s
}

// Lock takes the one-writer-at-a-time lock at path (flock). Release it by
// closing the returned file.
func Lock(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another ctrperf isolate holds %s (pid %s): only one writer at a time", path, string(b))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	return f, nil
}

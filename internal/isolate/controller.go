package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/owner"
)

// Managed is a container the controller manages.
type Managed struct {
	ID     string
	Name   string
	CPUs   int  // CPUs it is entitled to by label; 0 = a fair share
	PID    int  // init process on the host (for the veth); 0 = unknown
	Paused bool // frozen: still managed, its cgroup is alive
}

// Runtime lists the containers that opted in and are running or paused. A
// container it no longer returns is gone for the controller (its cgroup no
// longer exists), so a Runtime must leave one out only when the engine
// confirmed that; on doubt it returns an error.
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
	Interval       time.Duration // sampling interval, default 100 ms
	IRQRotate      time.Duration // default 10 s, the paper's period
	IRQRetry       time.Duration // skipped IRQs are tried again after this, default 6 × IRQRotate
	RPS            bool          // steer container veths' RPS to the shared pool
	DryRun         bool          // decide and log, write nothing
	CheckpointPath string        // where originals are kept
	NCPU           int           // CPUs on the machine, for mask widths
}

// Controller is the control loop. Build it with New.
type Controller struct {
	cfg     Config
	top     Topology
	rt      Runtime
	usage   UsageReader
	stall   StallReader // nil: no pressure
	cpus    CPUSetter
	demoter Demoter // nil: no demotion possible
	irq     IRQSetter
	listIRQ func() ([]IRQ, error)
	rps     RPSSetter
	veth    func(pid int) (string, error)
	clock   func() time.Time
	log     io.Writer
	events  func(Event)
	metrics *Metrics

	mu          sync.Mutex
	ckpt        *Checkpoint
	state       State
	last        map[string]cpuSample
	applied     map[string]string // container -> cpuset we wrote (and that must still be there)
	demoted     map[string]bool   // container -> we wrote the demoted class
	names       map[string]string
	vethOf      map[string]string // container -> host veth
	rpsApplied  map[string]string // dev -> mask we wrote
	irqApplied  map[int]int
	skipped     map[int]string
	skippedAt   time.Time
	irqStep     int
	lastRotate  time.Time
	lastPool    string
	lastRefusal string
	decision    Decision
	usageNow    map[string]float64
	stallNow    map[string]float64
	stepCPU     time.Duration
	// saturatedSince is, per container in a saturated streak or hot and
	// not yet acted on, when its streak began (for the reaction metric).
	saturatedSince map[string]time.Time
}

type cpuSample struct {
	cpu, stall time.Duration
	hasStall   bool
	at         time.Time
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

// WithDemoter lets the controller demote hot containers (policy shield, or
// Params.Demote). Without it a policy that demotes cannot start.
func WithDemoter(d Demoter) Option { return func(c *Controller) { c.demoter = d } }

// WithStall reads each container's CPU pressure (for the stall gate, the
// metrics and the status).
func WithStall(s StallReader) Option { return func(c *Controller) { c.stall = s } }

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
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.IRQRotate <= 0 {
		cfg.IRQRotate = 10 * time.Second
	}
	if cfg.IRQRetry <= 0 {
		cfg.IRQRetry = 6 * cfg.IRQRotate
	}
	if cfg.NCPU <= 0 {
		cfg.NCPU = len(top.CPUs)
	}
	c := &Controller{cfg: cfg, top: top, rt: rt, usage: usage, cpus: cpus, clock: time.Now,
		state: State{}, last: map[string]cpuSample{}, applied: map[string]string{}, demoted: map[string]bool{}, names: map[string]string{},
		vethOf: map[string]string{}, rpsApplied: map[string]string{}, irqApplied: map[int]int{}, skipped: map[int]string{}}
	for _, o := range opts {
		o(c)
	}
	if cfg.Params.Demotes() && c.demoter == nil {
		return nil, fmt.Errorf("policy %s demotes hot containers, but no demoter was given", cfg.Params.withDefaults().Policy)
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
		// The first change applied to a hot container ends its reaction.
		if since, ok := c.saturatedSince[e.Container]; ok && !e.DryRun && (e.Kind == "cpuset" || e.Kind == "demote") && c.state[e.Container].Hot {
			c.metrics.reaction.Observe(e.Time.Sub(since).Seconds())
			delete(c.saturatedSince, e.Container)
		}
	}
}

// trackSaturation notes when each container's saturated streak began
// (from: the start of its interval) and forgets streaks that broke off
// before the container turned hot, or that ended with it turning normal.
func (c *Controller) trackSaturation(prev, next State, from map[string]time.Time) {
	if c.saturatedSince == nil {
		c.saturatedSince = map[string]time.Time{}
	}
	for id, st := range next {
		p := prev[id]
		switch {
		case st.HotStreak > 0 && p.HotStreak == 0 && !p.Hot:
			if t, ok := from[id]; ok {
				c.saturatedSince[id] = t
			}
		case !st.Hot && st.HotStreak == 0:
			delete(c.saturatedSince, id)
		}
	}
	for id := range c.saturatedSince {
		if _, ok := next[id]; !ok {
			delete(c.saturatedSince, id)
		}
	}
}

func (c *Controller) saveCheckpoint() error {
	if c.cfg.DryRun || c.cfg.CheckpointPath == "" {
		return nil
	}
	return c.ckpt.Save(c.cfg.CheckpointPath)
}

// Step runs one iteration: sample, decide, apply what changed, and check
// that what was applied is still there.
func (c *Controller) Step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.clock()
	cpu0 := threadCPU()
	defer func() {
		used := max(threadCPU()-cpu0, 0) // 0 when a caller other than Run moved the goroutine between threads
		c.stepCPU += used
		if c.metrics != nil {
			c.metrics.loopSeconds.Observe(c.clock().Sub(start).Seconds())
			c.metrics.stepCPU.Add(used.Seconds())
		}
	}()
	ms, err := c.rt.Managed(ctx)
	if ms == nil && err != nil {
		return fmt.Errorf("list managed containers: %w", err) // forget nothing on doubt
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	live := map[string]bool{}
	var containers []Container
	usage, stall := map[string]float64{}, map[string]float64{}
	from := map[string]time.Time{} // start of the interval each usage covers
	for _, m := range ms {
		live[m.ID] = true
		c.names[m.ID] = m.Name
		containers = append(containers, Container{ID: m.ID, Name: m.Name, CPUs: m.CPUs})
		t, err := c.usage.CPUTime(ctx, m)
		if err != nil {
			continue // it may be stopping; a missing sample keeps its streaks
		}
		s := cpuSample{cpu: t, at: start}
		if c.stall != nil {
			if st, err := c.stall.Stall(ctx, m); err == nil {
				s.stall, s.hasStall = st, true
			}
		}
		if p, ok := c.last[m.ID]; ok && start.After(p.at) && t >= p.cpu {
			dt := start.Sub(p.at).Seconds()
			usage[m.ID] = (t - p.cpu).Seconds() / dt
			from[m.ID] = p.at
			if s.hasStall && p.hasStall && s.stall >= p.stall {
				stall[m.ID] = (s.stall - p.stall).Seconds() / dt
			}
		}
		c.last[m.ID] = s
	}
	c.usageNow, c.stallNow = usage, stall
	// Forget containers the runtime no longer returns: the engine says they
	// are not running, so their cgroups and what was written to them are gone.
	changed := false
	for _, id := range c.knownIDs() {
		if live[id] {
			continue
		}
		delete(c.last, id)
		delete(c.applied, id)
		delete(c.demoted, id)
		delete(c.names, id)
		delete(c.vethOf, id)
		if c.ckpt.ForgetContainer(id) {
			changed = true
		}
		if c.metrics != nil {
			c.metrics.forget(id)
		}
	}
	if changed {
		if err := c.saveCheckpoint(); err != nil {
			return err
		}
	}

	d := Decide(c.top, c.cfg.Params, c.state, containers, usage, stall)
	c.trackSaturation(c.state, d.State, from)
	c.state = d.State
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

	ids := make([]string, 0, len(d.Placements))
	for id := range d.Placements {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		pl := d.Placements[id]
		if err := c.applyCPUSet(ctx, start, pl); err != nil {
			if errors.Is(err, errStop) {
				return err
			}
			errs = append(errs, err)
		}
		if err := c.applyClass(ctx, start, pl); err != nil {
			if errors.Is(err, errStop) {
				return err
			}
			errs = append(errs, err)
		}
		if c.metrics != nil {
			c.metrics.placement(id, pl, usage[id], stall[id])
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

// errStop wraps a failure to checkpoint: nothing may be changed that could
// not be remembered first.
var errStop = errors.New("checkpoint not saved: changing nothing")

func (c *Controller) checkpointOrStop() error {
	if err := c.saveCheckpoint(); err != nil {
		return fmt.Errorf("%w: %w", errStop, err)
	}
	return nil
}

// knownIDs are the containers the controller holds anything for.
func (c *Controller) knownIDs() []string {
	set := map[string]bool{}
	for id := range c.last {
		set[id] = true
	}
	for id := range c.applied {
		set[id] = true
	}
	for id := range c.demoted {
		set[id] = true
	}
	for id := range c.ckpt.CPUSets {
		set[id] = true
	}
	for id := range c.ckpt.Classes {
		set[id] = true
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func canonCPUs(s string) string {
	set, err := cpuset.Parse(strings.TrimSpace(s))
	if err != nil {
		return strings.TrimSpace(s)
	}
	return set.String()
}

// applyCPUSet brings a container's cpuset to its placement. It re-reads
// what is there when it has written something: a value it did not write
// (Docker on restart or update, an operator) is the container's new
// original, checkpointed before the placement is applied again.
func (c *Controller) applyCPUSet(ctx context.Context, start time.Time, pl Placement) error {
	id := pl.ContainerID
	applied, known := c.applied[id]
	if pl.CPUs.IsEmpty() && !known {
		return nil // its own cpuset, never touched
	}
	cur, err := c.cpus.CPUs(ctx, id)
	if err != nil {
		if gone(err) {
			return nil
		}
		return fmt.Errorf("read cpuset of %s: %w", pl.Name, err)
	}
	cur = canonCPUs(cur)
	if known && cur != applied {
		c.emit(Event{Kind: "drift", Container: id, Name: pl.Name, Old: applied, New: cur,
			Reason: "cpuset changed by someone else (restart, docker update): taken as its original"})
		if !c.cfg.DryRun {
			c.ckpt.RebaseCPUSet(id, cur)
			if err := c.checkpointOrStop(); err != nil {
				return err
			}
		}
		delete(c.applied, id)
		known = false
	}
	var want string
	if pl.CPUs.IsEmpty() {
		if !known {
			return nil
		}
		want = c.ckpt.CPUSets[id] // back to its own
	} else {
		want = pl.CPUs.String()
	}
	if cur == want {
		if !pl.CPUs.IsEmpty() {
			c.applied[id] = want
		}
		return nil
	}
	if !c.cfg.DryRun {
		changed := !known && c.ckpt.RememberCPUSet(id, cur)
		if !pl.CPUs.IsEmpty() && c.ckpt.WriteCPUSet(id, cur, want) {
			changed = true
		}
		if changed {
			if err := c.checkpointOrStop(); err != nil {
				return err
			}
		}
	}
	set, err := cpuset.Parse(want)
	if err != nil || set.IsEmpty() {
		return fmt.Errorf("cpuset %q for %s: not applied (never an empty cpuset)", want, pl.Name)
	}
	if !c.cfg.DryRun {
		if err := c.cpus.SetCPUs(ctx, id, set); err != nil {
			if gone(err) {
				return nil // removed while we decided: churn, not a failure
			}
			c.emit(Event{Kind: "error", Container: id, Name: pl.Name, New: want, Reason: err.Error()})
			if c.metrics != nil {
				c.metrics.writeFailures.WithLabelValues("cpuset").Inc()
			}
			return err
		}
	}
	reason := pl.Reason
	if pl.CPUs.IsEmpty() {
		delete(c.applied, id)
		c.ckpt.ForgetCPUSet(id)
		if err := c.saveCheckpoint(); err != nil {
			return err
		}
		reason = "back to its own cpuset: " + reason
	} else {
		c.applied[id] = want
	}
	c.emit(Event{Kind: "cpuset", Container: id, Name: pl.Name, Old: cur, New: want, Reason: reason,
		ApplyMs: float64(c.clock().Sub(start).Microseconds()) / 1000})
	return nil
}

// applyClass demotes or restores a container's CPU class, with the same
// drift rule as applyCPUSet.
func (c *Controller) applyClass(ctx context.Context, start time.Time, pl Placement) error {
	id := pl.ContainerID
	known := c.demoted[id]
	if c.demoter == nil || (!pl.Demote && !known) {
		return nil
	}
	cur, err := c.demoter.Class(ctx, id)
	if err != nil {
		if gone(err) {
			return nil
		}
		return fmt.Errorf("read CPU class of %s: %w", pl.Name, err)
	}
	if known && !cur.IsDemoted() {
		c.emit(Event{Kind: "drift", Container: id, Name: pl.Name, Old: c.ckpt.Classes[id].Demoted().String(), New: cur.String(),
			Reason: "CPU class changed by someone else (restart, docker update): taken as its original"})
		if !c.cfg.DryRun {
			c.ckpt.RebaseClass(id, cur)
			if err := c.checkpointOrStop(); err != nil {
				return err
			}
		}
		delete(c.demoted, id)
		known = false
	}
	if pl.Demote {
		if cur.IsDemoted() {
			if known {
				return nil
			}
			if _, ours := c.ckpt.Classes[id]; !ours {
				return nil // demoted by its owner: not ours to change or restore
			}
		}
		want := cur.Demoted()
		if !c.cfg.DryRun {
			changed := c.ckpt.RememberClass(id, cur)
			want = c.ckpt.Classes[id].Demoted()
			if c.ckpt.WriteClass(id, cur, want) {
				changed = true
			}
			if changed {
				if err := c.checkpointOrStop(); err != nil {
					return err
				}
			}
			if err := c.demoter.SetClass(ctx, id, want); err != nil {
				if gone(err) {
					return nil
				}
				c.emit(Event{Kind: "error", Container: id, Name: pl.Name, New: want.String(), Reason: err.Error()})
				if c.metrics != nil {
					c.metrics.writeFailures.WithLabelValues("class").Inc()
				}
				return err
			}
		}
		c.demoted[id] = true
		c.emit(Event{Kind: "demote", Container: id, Name: pl.Name, Old: cur.String(), New: want.String(), Reason: pl.Reason,
			ApplyMs: float64(c.clock().Sub(start).Microseconds()) / 1000})
		return nil
	}
	orig, ok := c.ckpt.Classes[id]
	if !ok {
		delete(c.demoted, id)
		return nil
	}
	if !c.cfg.DryRun {
		if err := c.demoter.SetClass(ctx, id, orig); err != nil {
			if gone(err) {
				return nil
			}
			c.emit(Event{Kind: "error", Container: id, Name: pl.Name, New: orig.String(), Reason: err.Error()})
			return err
		}
		c.ckpt.ForgetClass(id)
		if err := c.saveCheckpoint(); err != nil {
			return err
		}
	}
	delete(c.demoted, id)
	c.emit(Event{Kind: "undemote", Container: id, Name: pl.Name, Old: cur.String(), New: orig.String(), Reason: pl.Reason,
		ApplyMs: float64(c.clock().Sub(start).Microseconds()) / 1000})
	return nil
}

// steerIRQs points the selected IRQs at the shared pool, one CPU each,
// rotating round-robin every IRQRotate (and at once when the pool changes).
// An IRQ's original, and each value written, is checkpointed before the
// write; the original is dropped again when the write fails (nothing
// changed), but kept when the write landed and only the effective affinity
// has not moved (yet): smp_affinity_list holds the controller's value.
// Refused IRQs are tried again after IRQRetry.
func (c *Controller) steerIRQs(now time.Time, pool cpuset.CPUSet) error {
	if len(c.skipped) > 0 && now.Sub(c.skippedAt) >= c.cfg.IRQRetry {
		c.skipped = map[int]string{}
	}
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
		cur, err := c.irq.Affinity(irq.Num)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c.cfg.DryRun {
			c.irqApplied[irq.Num] = cpu
			c.emit(Event{Kind: "irq", IRQ: irq.Num, Name: irq.Name, Old: cur.String(), New: strconv.Itoa(cpu), Reason: "rotate over the shared pool"})
			continue
		}
		fresh := c.ckpt.RememberIRQ(irq.Num, cur.String())
		if c.ckpt.WriteIRQ(irq.Num, cur.String(), strconv.Itoa(cpu)) || fresh {
			if err := c.checkpointOrStop(); err != nil {
				return err
			}
		}
		eff, err := c.irq.SetAffinity(irq.Num, cpuset.New(cpu))
		if err != nil {
			if errors.Is(err, ErrIRQNotMoved) || errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) {
				// Not moved: the write landed, the effective affinity lags;
				// the original must stay to be restored.
				if fresh && !errors.Is(err, ErrIRQNotMoved) { // the write failed: nothing to restore
					c.ckpt.ForgetIRQ(irq.Num)
					if err := c.checkpointOrStop(); err != nil {
						return err
					}
				}
				if len(c.skipped) == 0 {
					c.skippedAt = now
				}
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
		c.emit(Event{Kind: "irq", IRQ: irq.Num, Name: irq.Name, Old: cur.String(), New: eff.String(), Reason: "rotate over the shared pool"})
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
		if errors.Is(err, os.ErrNotExist) {
			delete(c.vethOf, m.ID) // gone with its container, or renamed on a restart: look again
			return nil
		}
		return err
	}
	for q, cur := range qs {
		if !c.cfg.DryRun {
			if fresh := c.ckpt.RememberRPS(dev, q, cur); c.ckpt.WriteRPS(dev, q, cur, mask) || fresh {
				if err := c.checkpointOrStop(); err != nil {
					return err
				}
			}
			if err := c.rps.SetMask(dev, q, mask); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					delete(c.vethOf, m.ID)
					return nil
				}
				if c.metrics != nil {
					c.metrics.writeFailures.WithLabelValues("rps").Inc()
				}
				return err
			}
		}
		c.emit(Event{Kind: "rps", Container: m.ID, Name: m.Name, Device: dev + "/" + q, Old: cur, New: mask, Reason: "packet steering to the shared pool"})
	}
	c.rpsApplied[dev] = mask
	return nil
}

// Run steps every interval until ctx is done, and steps at once when
// trigger fires (a container started or stopped). Step errors are logged,
// not fatal: one container or IRQ failing must not stop the others.
func (c *Controller) Run(ctx context.Context, trigger <-chan struct{}) error {
	// One OS thread for the loop, so that a step's CPU time can be read
	// from the thread's rusage.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
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

// Restore writes back every original value the checkpoint holds where the
// controller's value is still in place (RestoreCheckpoint), then removes
// the checkpoint. Containers that are gone are skipped.
func (c *Controller) Restore(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := RestoreCheckpoint(ctx, c.ckpt, Actuators{CPUs: c.cpus, Class: c.demoter, IRQ: c.irq, RPS: c.rps}, c.emit)
	if err == nil && c.cfg.CheckpointPath != "" && !c.cfg.DryRun {
		if rmErr := os.Remove(c.cfg.CheckpointPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return rmErr
		}
	}
	if err == nil {
		c.ckpt = NewCheckpoint(c.clock())
	}
	c.applied = map[string]string{}
	c.demoted = map[string]bool{}
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

// Status is what `ctrperf isolate status` shows.
type Status struct {
	Time       time.Time         `json:"time"`
	PID        int               `json:"pid"`
	Policy     Policy            `json:"policy"`
	DryRun     bool              `json:"dry_run"`
	SharedPool string            `json:"shared_pool"`
	PinRefused string            `json:"pin_refused,omitempty"`
	Containers []ContainerStatus `json:"containers"`
	IRQs       map[int]int       `json:"irqs,omitempty"`
	Skipped    map[int]string    `json:"irqs_skipped,omitempty"`
	RPS        map[string]string `json:"rps,omitempty"`
	// StepCPUSeconds is the CPU time the control steps used so far.
	StepCPUSeconds float64 `json:"step_cpu_s"`
}

// ContainerStatus is one row of the placement table.
type ContainerStatus struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	CPUs        string  `json:"cpus"` // "" = its own
	Pinned      bool    `json:"pinned"`
	Hot         bool    `json:"hot"`
	Demoted     bool    `json:"demoted"`
	Usage       float64 `json:"usage_cpus"`
	Entitlement float64 `json:"entitlement_cpus"`
	Stall       float64 `json:"stall"` // fraction of the last interval its tasks waited for a CPU
	Reason      string  `json:"reason"`
}

// Status returns the current placement table.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Time: c.clock(), PID: os.Getpid(), Policy: c.cfg.Params.withDefaults().Policy, DryRun: c.cfg.DryRun,
		SharedPool: c.decision.SharedPool.String(), PinRefused: c.decision.PinRefused,
		IRQs: map[int]int{}, Skipped: map[int]string{}, RPS: map[string]string{}, StepCPUSeconds: c.stepCPU.Seconds()}
	for id, pl := range c.decision.Placements {
		s.Containers = append(s.Containers, ContainerStatus{ID: id, Name: pl.Name, CPUs: pl.CPUs.String(), Pinned: pl.Pinned, Hot: pl.Hot,
			Demoted: c.demoted[id], Usage: c.usageNow[id], Entitlement: pl.Entitlement, Stall: c.stallNow[id], Reason: pl.Reason})
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
	cp := *c.ckpt
	cp.CPUSets = maps.Clone(c.ckpt.CPUSets)
	cp.Classes = maps.Clone(c.ckpt.Classes)
	cp.IRQs = maps.Clone(c.ckpt.IRQs)
	cp.RPS = maps.Clone(c.ckpt.RPS)
	cp.Written = Written{CPUSets: maps.Clone(c.ckpt.Written.CPUSets), Classes: maps.Clone(c.ckpt.Written.Classes),
		IRQs: maps.Clone(c.ckpt.Written.IRQs), RPS: maps.Clone(c.ckpt.Written.RPS)}
	return cp
}

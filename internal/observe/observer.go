// Package observe samples what the machine did during a run: per-device disk
// statistics computed as iostat -x does, per-CPU time as mpstat does,
// interrupts and softirqs per CPU, context switches, run queue and memory,
// per-container cgroup CPU / throttling / memory / block I/O, and the CPU of
// the processes that make up the container infrastructure (dockerd,
// containerd, shims, docker-proxy) and of the load generator.
//
// Every kernel file is read through injectable roots (proc, sys, cgroup) so
// that parsers are tested on fixture trees. A sampler that fails is recorded
// as unavailable with its reason; the others carry on. What is recorded is
// results.Series, the schema the reports read.
package observe

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// Container is a container whose cgroup the observer samples.
type Container struct {
	Name string `json:"name"`
	// CgroupPath is relative to each controller's root on cgroup v1 (e.g.
	// "/docker/<id>" with the cgroupfs driver) and to the unified root on
	// v2 (e.g. /system.slice/docker-<id>.scope), as engine.Container gives it.
	CgroupPath string `json:"cgroup_path"`
}

// Clock is time as the observer sees it. Tests pass a fake that ticks on
// demand so that the samples, and therefore the rates, are exact.
type Clock interface {
	Now() time.Time
	// NewTicker returns a channel that delivers ticks every d and a function
	// that stops it.
	NewTicker(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Option configures an Observer.
type Option func(*Observer)

// WithKernel sets where /proc, /sys and the cgroup hierarchy are read
// (default the real ones).
func WithKernel(fs kernel.FS) Option { return func(o *Observer) { o.kernel = fs } }

// WithInterval sets the sampling interval (default 1 s).
func WithInterval(d time.Duration) Option {
	return func(o *Observer) {
		if d > 0 {
			o.interval = d
		}
	}
}

// WithContainers sets the containers whose cgroups are sampled.
func WithContainers(cs []Container) Option {
	return func(o *Observer) { o.containers = append([]Container(nil), cs...) }
}

// WithContainersMayGo says that a container whose cgroup disappears after it
// has been read is gone rather than failing (live observation, where the list
// is refreshed only now and then). By default that is recorded as unavailable:
// in a benchmark run a container must not vanish.
func WithContainersMayGo(on bool) Option { return func(o *Observer) { o.containersMayGo = on } }

// WithProcessGroups replaces the default process groups (see
// DefaultProcessGroups) by these.
func WithProcessGroups(groups map[string]ProcessMatcher) Option {
	return func(o *Observer) { o.groups = groups }
}

// WithDevices restricts the disk sampler to these device names; named
// devices are shown even when they never did any I/O.
func WithDevices(names []string) Option {
	return func(o *Observer) { o.devices = append([]string(nil), names...) }
}

// WithPartitions makes the disk sampler include partitions (vda1, ...),
// which it leaves out by default because their I/O is already counted on the
// whole device.
func WithPartitions(on bool) Option { return func(o *Observer) { o.partitions = on } }

// WithClock replaces the wall clock (tests).
func WithClock(c Clock) Option { return func(o *Observer) { o.clock = c } }

// WithOnSample registers a function called with every sample as soon as it
// is taken, from the sampling goroutine (live output of `ctrperf observe`).
func WithOnSample(f func(results.Sample)) Option { return func(o *Observer) { o.onSample = f } }

// Observer runs the samplers every interval between Start and Stop and keeps
// every sample: summaries are computed later from the raw series.
type Observer struct {
	kernel          kernel.FS
	interval        time.Duration
	clock           Clock
	containers      []Container
	containersMayGo bool
	groups          map[string]ProcessMatcher
	devices         []string
	partitions      bool
	onSample        func(results.Sample)

	mu       sync.Mutex
	samplers []sampler
	cgroups  *containerSampler
	started  bool
	stopped  bool
	start    time.Time
	last     time.Time
	series   results.Series
	fails    map[string]*failure
	attempts int
	cancel   context.CancelFunc
	done     chan struct{}
}

// failure counts how often one sampler (or one item of it) failed.
type failure struct {
	count int
	last  error
}

// sampler is one kind of kernel statistics. sample reads the counters now
// and, when it holds a previous reading (dt > 0), writes the rates over dt
// seconds into s; failures of single items (one container) go to fail with
// a key of their own, a failure of the whole sampler is returned.
type sampler interface {
	name() string
	sample(dt float64, s *results.Sample, fail func(key string, err error)) error
}

// New returns an observer; nothing is read until Start.
func New(opts ...Option) *Observer {
	o := &Observer{
		kernel:   kernel.DefaultFS(),
		interval: time.Second,
		clock:    realClock{},
		groups:   DefaultProcessGroups(),
		fails:    map[string]*failure{},
	}
	for _, opt := range opts {
		opt(o)
	}
	o.series.IntervalS = o.interval.Seconds()
	return o
}

// Start takes the first reading of every sampler and samples every interval
// until Stop or until ctx ends. It fails only when called twice.
func (o *Observer) Start(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return errors.New("observer already started")
	}
	o.started = true
	o.cgroups = newContainerSampler(o.kernel, o.containers)
	o.cgroups.mayGo = o.containersMayGo
	o.samplers = []sampler{
		newCPUSampler(o.kernel.Proc()),
		newMemorySampler(o.kernel.Proc()),
		newDiskSampler(o.kernel, o.devices, o.partitions),
		newInterruptSampler(o.kernel.Proc()),
		newSoftirqSampler(o.kernel.Proc()),
		newNetSampler(o.kernel.Proc()),
		o.cgroups,
		newProcessSampler(o.kernel.Proc(), o.groups),
	}
	o.start = o.clock.Now()
	o.last = o.start
	o.runSamplers(0, &results.Sample{}) // the first reading only primes the counters
	ctx, o.cancel = context.WithCancel(ctx)
	o.done = make(chan struct{})
	ticks, stop := o.clock.NewTicker(o.interval)
	go func() {
		defer close(o.done)
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				o.mu.Lock()
				s, ok := o.tick()
				o.mu.Unlock()
				if ok && o.onSample != nil {
					o.onSample(s)
				}
			}
		}
	}()
	return nil
}

// SetContainers replaces the containers sampled from the next interval on
// (e.g. once a deployment has its container ids).
func (o *Observer) SetContainers(cs []Container) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.containers = append([]Container(nil), cs...)
	if o.cgroups != nil {
		o.cgroups.set(o.containers)
	}
}

// Stop ends sampling and returns the series. The interval in progress is
// kept as a last, shorter sample (rates are per second of the time that
// really passed) unless less than a tenth of an interval has passed, so
// that the tail of a run is not lost. Stop is safe without Start and more
// than once.
func (o *Observer) Stop() *results.Series {
	o.mu.Lock()
	if o.started && !o.stopped {
		o.stopped = true
		o.cancel()
		o.mu.Unlock()
		<-o.done
		o.mu.Lock()
		if o.clock.Now().Sub(o.last) >= o.interval/10 {
			if s, ok := o.tick(); ok && o.onSample != nil {
				o.mu.Unlock()
				o.onSample(s)
				o.mu.Lock()
			}
		}
	}
	defer o.mu.Unlock()
	out := o.series
	out.Samples = append([]results.Sample(nil), o.series.Samples...)
	out.Unavailable = o.unavailable()
	return &out
}

// tick takes one sample; the caller holds mu.
func (o *Observer) tick() (results.Sample, bool) {
	now := o.clock.Now()
	dt := now.Sub(o.last).Seconds()
	if dt <= 0 {
		return results.Sample{}, false
	}
	o.last = now
	s := results.Sample{T: now.Sub(o.start).Seconds()}
	o.attempts++
	o.runSamplers(dt, &s)
	o.series.Samples = append(o.series.Samples, s)
	return s, true
}

func (o *Observer) runSamplers(dt float64, s *results.Sample) {
	fail := func(key string, err error) {
		f := o.fails[key]
		if f == nil {
			f = &failure{}
			o.fails[key] = f
		}
		f.count++
		f.last = err
	}
	for _, sm := range o.samplers {
		if err := sm.sample(dt, s, fail); err != nil {
			fail(sm.name(), err)
		}
	}
}

// unavailable turns failure counts into reasons; the caller holds mu.
func (o *Observer) unavailable() map[string]string {
	if len(o.fails) == 0 {
		return nil
	}
	keys := make([]string, 0, len(o.fails))
	for k := range o.fails {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(keys))
	// The priming reading counts as an attempt too.
	attempts := o.attempts + 1
	for _, k := range keys {
		f := o.fails[k]
		if f.count >= attempts {
			out[k] = f.last.Error()
		} else {
			out[k] = fmt.Sprintf("failed in %d of %d readings, last: %v", f.count, attempts, f.last)
		}
	}
	return out
}

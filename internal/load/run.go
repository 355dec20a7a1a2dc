package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/results"
)

// Defaults of a Profile.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMaxInFlight = 4096
	// DefaultLateSlack is how far behind its intended time a session may
	// start before it counts as late: scheduler wake-up jitter is not a
	// generator shortfall, a missing VU is.
	DefaultLateSlack = 10 * time.Millisecond
)

// The bounds of an open-loop rate (sessions or operations per second),
// shared by `ctrperf load` and every workload's load.rate. Below MinRate a
// window sees no arrival after the first; above MaxRate one generator could
// never keep the schedule.
const (
	MinRate = 0.001
	MaxRate = 1e7
)

// CheckRate says what is wrong with an open-loop rate: NaN, infinite, or
// outside [MinRate, MaxRate]. Zero is no open loop and is the caller's to
// allow.
func CheckRate(rate float64) error {
	switch {
	case math.IsNaN(rate) || math.IsInf(rate, 0):
		return fmt.Errorf("rate %v: want a finite number of sessions per second", rate)
	case rate < MinRate || rate > MaxRate:
		return fmt.Errorf("rate %v: want between %g and %g per second", rate, MinRate, MaxRate)
	}
	return nil
}

// Profile says how much load to offer and for how long.
type Profile struct {
	// Rate > 0 selects open loop: sessions per second, started on schedule
	// whatever the responses do.
	Rate    float64
	Poisson bool   // exponential inter-arrival gaps instead of a fixed gap
	Seed    uint64 // for Poisson arrivals and the VUs' random choices
	// Concurrency > 0 (with Rate 0) selects closed loop: that many VUs back to back.
	Concurrency int
	Warmup      time.Duration // driven, not recorded
	// Ramp, open loop only, is how long the rate takes to rise linearly
	// from 0 to Rate at the start of the warm-up, so that a cold server is
	// not met by the full rate at once; at most Warmup, so the measured
	// window always runs at Rate.
	Ramp     time.Duration
	Duration time.Duration // the measured window
	// Ops, closed loop only: stop after this many measured sessions
	// (memslap --execute-number) instead of after Duration.
	Ops int64
	// Timeout per request (default 60 s).
	Timeout time.Duration
	// MaxInFlight bounds concurrent sessions (and so connections and
	// goroutines) in open loop (default 4096). Sessions that find every VU
	// busy wait for one, count as Late, and their latency still counts from
	// their intended start.
	MaxInFlight int
	LateSlack   time.Duration
	// CPUSet pins the generator ("1", "0-1"); see PinCPUs for the scope.
	CPUSet string
	// Started is called when the measured window starts.
	Started func()
	// Live, if set, counts sessions and requests as they complete (warm-up
	// included) for a progress display.
	Live *Live
}

// Live counts a run while it runs. Run only adds to it; read it with
// Snapshot from any goroutine.
type Live struct {
	sessions, requests, errors atomic.Int64
	measuring                  atomic.Bool
}

// LiveSnapshot is what a Live has counted so far.
type LiveSnapshot struct {
	Sessions, Requests, Errors int64
	// Measuring is true once the measured window has begun (false during
	// the warm-up).
	Measuring bool
}

// Snapshot reads the counts.
func (l *Live) Snapshot() LiveSnapshot {
	return LiveSnapshot{Sessions: l.sessions.Load(), Requests: l.requests.Load(), Errors: l.errors.Load(), Measuring: l.measuring.Load()}
}

// observe counts one request; nil-safe.
func (l *Live) observe(kind string) {
	if l == nil || kind == kindCanceled {
		return
	}
	l.requests.Add(1)
	if kind != "" {
		l.errors.Add(1)
	}
}

// liveOnly is the recorder of the warm-up: it keeps nothing but the live count.
type liveOnly struct{ live *Live }

func (w liveOnly) Observe(_ string, _ time.Duration, _ int64, kind string) { w.live.observe(kind) }

func (p Profile) withDefaults() Profile {
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.MaxInFlight == 0 {
		p.MaxInFlight = DefaultMaxInFlight
	}
	if p.LateSlack == 0 {
		p.LateSlack = DefaultLateSlack
	}
	return p
}

// Validate checks the profile for contradictions before anything runs.
func (p Profile) Validate() error {
	if p.Rate != 0 {
		if err := CheckRate(p.Rate); err != nil {
			return err
		}
	}
	switch {
	case p.Rate > 0 && p.Concurrency > 0:
		return fmt.Errorf("give either a rate (open loop, %v/s) or a concurrency (closed loop, %d), not both", p.Rate, p.Concurrency)
	case p.Rate == 0 && p.Concurrency <= 0:
		return errors.New("give a rate (open loop) or a concurrency > 0 (closed loop)")
	case p.Ops < 0:
		return fmt.Errorf("ops %d is negative", p.Ops)
	case p.Ops > 0 && p.Rate > 0:
		return errors.New("an operation count applies to closed loop only; open loop runs for a duration")
	case p.Ops == 0 && p.Duration <= 0:
		return fmt.Errorf("duration %v must be positive (or give an operation count in closed loop)", p.Duration)
	case p.Warmup < 0:
		return fmt.Errorf("warm-up %v is negative", p.Warmup)
	case p.Ramp < 0:
		return fmt.Errorf("ramp %v is negative", p.Ramp)
	case p.Ramp > 0 && p.Rate == 0:
		return errors.New("a ramp raises an open loop's rate; a closed loop has none (give a rate, or no ramp)")
	case p.Ramp > p.Warmup:
		return fmt.Errorf("ramp %v is longer than the warm-up %v: the measured window would start below the rate", p.Ramp, p.Warmup)
	case p.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", p.Timeout)
	case p.MaxInFlight < 0:
		return fmt.Errorf("max in-flight %d is negative", p.MaxInFlight)
	}
	return nil
}

// Session is one session handed to a VU.
type Session struct {
	ID      int64
	Due     time.Time     // intended start of the first request
	Timeout time.Duration // per request
}

// VU is a virtual user: one connection, one session at a time.
type VU interface {
	// Run runs one session, observing every request into rec, and reports
	// whether all of its requests succeeded. Failures are data (error
	// kinds), never a reason to stop the run.
	Run(ctx context.Context, s Session, rec Recorder) bool
	Close() error
}

// Driver speaks one protocol: it names the operation labels and makes VUs.
type Driver interface {
	Labels() []string
	NewVU(id int) (VU, error)
}

// extraMetrics is implemented by drivers that count things of their own
// (memcached get hits and misses) during the measured window.
type extraMetrics interface {
	Metrics() map[string]float64
}

// Run drives d with profile p and returns the measured window. On
// cancellation it returns what was measured so far together with the error.
func Run(ctx context.Context, d Driver, p Profile) (*results.Measurement, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	labels := d.Labels()
	if len(labels) == 0 {
		return nil, errors.New("driver has no operation labels")
	}
	var notes []string
	if p.CPUSet != "" {
		restore, err := PinCPUs(DefaultTaskDir, p.CPUSet)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := restore(); err != nil {
				notes = append(notes, "restoring the generator's CPU affinity: "+err.Error())
			}
		}()
	}
	r := newRunner(d, p, labels)
	var err error
	switch ld, ok := d.(loopDriver); {
	case p.Rate > 0:
		err = r.open(ctx)
	case ok && ld.loopable():
		err = r.loops(ctx, ld)
	default:
		err = r.closed(ctx)
	}
	m, mErr := r.measurement()
	if mErr != nil {
		return nil, mErr
	}
	m.Notes = append(m.Notes, notes...)
	if err != nil {
		return m, err
	}
	return m, nil
}

type runner struct {
	d      Driver
	p      Profile
	rec    *recorder
	labels []string

	mStart, mEnd, lastDone time.Time
	cpu0, cpu1             time.Duration
	started, late          int64
	notStarted             int64
	sessOK, sessFail       atomic.Int64
	startOnce              sync.Once

	// lateness (open loop) holds, for every measured session, how long
	// after its intended start its goroutine began to run it: the
	// generator's own delay (schedule loop, wait for a VU, Go scheduler),
	// which the session's latency includes.
	lateMu   sync.Mutex
	lateness *hdrhistogram.Histogram
}

// observeLateness records one measured session's dispatch delay.
func (r *runner) observeLateness(d time.Duration) {
	r.lateMu.Lock()
	_ = r.lateness.RecordValue(results.HistValue(d)) // clamped to the range: cannot fail
	r.lateMu.Unlock()
}

func newRunner(d Driver, p Profile, labels []string) *runner {
	rec := newRecorder(labels)
	rec.live = p.Live
	return &runner{d: d, p: p, rec: rec, labels: labels, lateness: results.NewHistogram()}
}

// beginWindow marks the start of the measured window.
func (r *runner) beginWindow() {
	r.startOnce.Do(func() {
		r.cpu0 = processCPU()
		if r.p.Live != nil {
			r.p.Live.measuring.Store(true)
		}
		if r.p.Started != nil {
			r.p.Started()
		}
	})
}

func (r *runner) session(ctx context.Context, vu VU, s Session, measured bool) {
	if r.p.Live != nil {
		defer r.p.Live.sessions.Add(1)
	}
	if !measured {
		vu.Run(ctx, s, liveOnly{r.p.Live})
		return
	}
	if vu.Run(ctx, s, r.rec) {
		r.sessOK.Add(1)
	} else {
		r.sessFail.Add(1)
	}
}

// open runs the open-loop schedule.
func (r *runner) open(ctx context.Context) error {
	p := r.p
	pool := newPool(r.d, p.MaxInFlight)
	defer pool.closeAll()
	sessCtx, cancelSessions := context.WithCancel(ctx)
	defer cancelSessions()

	// A short lead so that the first arrival is not already late.
	t0 := time.Now().Add(2 * time.Millisecond)
	r.mStart = t0.Add(p.Warmup)
	r.mEnd = r.mStart.Add(p.Duration)
	r.rec.start = r.mStart
	var startTimer *time.Timer
	if p.Warmup > 0 {
		startTimer = time.AfterFunc(time.Until(r.mStart), r.beginWindow)
		defer startTimer.Stop()
	} else {
		r.beginWindow()
	}

	sched := newArrivals(p.Rate, p.Poisson, p.Seed)
	sched.ramp = p.Ramp.Seconds()
	var wg sync.WaitGroup
	var runErr error
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var id int64
loop:
	for {
		// Every pass looks at ctx: a schedule that is behind never waits,
		// and must still stop on Ctrl-C.
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		due := t0.Add(sched.next())
		if !due.Before(r.mEnd) {
			break
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				runErr = ctx.Err()
				break loop
			case <-timer.C:
			}
		}
		measured := !due.Before(r.mStart)
		vu, waited, err := pool.get(ctx, r.mEnd)
		if err != nil {
			if errors.Is(err, errWindowOver) {
				// Everything still due in the window could not start.
				n := int64(0)
				if measured {
					n = 1
				}
				for i := 0; ; i++ {
					if i%4096 == 0 && ctx.Err() != nil {
						runErr = ctx.Err()
						break
					}
					d := t0.Add(sched.next())
					if !d.Before(r.mEnd) {
						break
					}
					if !d.Before(r.mStart) {
						n++
					}
				}
				r.notStarted = n
				break
			}
			runErr = err
			break
		}
		if measured {
			r.beginWindow() // in case the timer has not fired yet
			r.started++
			if waited || time.Since(due) > p.LateSlack {
				r.late++
			}
		}
		id++
		s := Session{ID: id, Due: due, Timeout: p.Timeout}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if measured {
				r.observeLateness(time.Since(s.Due))
			}
			r.session(sessCtx, vu, s, measured)
			pool.put(vu)
		}()
	}
	r.cpu1 = processCPU()
	r.rec.addNotStarted(r.labels[0], r.notStarted)
	r.late += r.notStarted

	// Drain: sessions of the window may finish after it, but not forever.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	drain := time.NewTimer(p.Timeout + time.Second)
	defer drain.Stop()
	select {
	case <-done:
	case <-drain.C:
		cancelSessions()
		<-done
	case <-ctx.Done():
		cancelSessions()
		<-done
		runErr = ctx.Err()
	}
	r.lastDone = time.Now()
	return runErr
}

// closedLoop is the bookkeeping that a closed loop's VUs share, whether
// each VU is a goroutine (closed) or a connection of an event loop (loops).
type closedLoop struct {
	r       *runner
	claimed atomic.Int64
	// last is when the last measured session ended, as nanoseconds after
	// the window's start plus one (0: none yet): a difference of two
	// readings of the monotonic clock, never a wall time (UnixNano), so
	// that a step of the system clock during the window changes no figure.
	last atomic.Int64
	id   atomic.Int64
}

func (r *runner) startClosed() *closedLoop {
	t0 := time.Now()
	r.mStart = t0.Add(r.p.Warmup)
	r.mEnd = r.mStart.Add(r.p.Duration)
	r.rec.start = r.mStart
	if r.p.Warmup == 0 {
		r.beginWindow()
	}
	return &closedLoop{r: r}
}

// next decides about the session a VU would start at now: run it unmeasured
// (warm-up), run it measured, or stop (the window is over, or every
// operation of an op count is claimed).
func (c *closedLoop) next(now time.Time) (s Session, measured, stop bool) {
	s = Session{ID: c.id.Add(1), Due: now, Timeout: c.r.p.Timeout}
	measured, stop = c.decide(now)
	return s, measured, stop
}

// decide is next without a session ID (the event loops need none, and
// skip the shared counter).
func (c *closedLoop) decide(now time.Time) (measured, stop bool) {
	r := c.r
	if now.Before(r.mStart) {
		return false, false
	}
	r.beginWindow()
	if r.p.Ops > 0 {
		if c.claimed.Add(1) > r.p.Ops {
			return false, true
		}
	} else if !now.Before(r.mEnd) {
		return false, true
	}
	return true, false
}

// done notes the end of a measured session.
func (c *closedLoop) done(end time.Time) {
	t := int64(end.Sub(c.r.mStart)) + 1
	for {
		old := c.last.Load()
		if t <= old || c.last.CompareAndSwap(old, t) {
			return
		}
	}
}

// finish closes the measured window after the VUs have stopped.
func (c *closedLoop) finish() {
	r := c.r
	r.cpu1 = processCPU()
	last := c.last.Load()
	if last <= 0 {
		r.lastDone = time.Now()
		return
	}
	r.lastDone = r.mStart.Add(time.Duration(last - 1))
}

// closed runs Concurrency VUs back to back, one goroutine each.
func (r *runner) closed(ctx context.Context) error {
	p := r.p
	c := r.startClosed()
	var wg sync.WaitGroup
	errs := make(chan error, p.Concurrency)
	for w := 0; w < p.Concurrency; w++ {
		vu, err := r.d.NewVU(w)
		if err != nil {
			errs <- fmt.Errorf("virtual user %d: %w", w, err)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer vu.Close()
			for ctx.Err() == nil {
				s, measured, stop := c.next(time.Now())
				if stop {
					return
				}
				r.session(ctx, vu, s, measured)
				if measured {
					c.done(time.Now())
				}
			}
		}()
	}
	wg.Wait()
	c.finish()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

func (r *runner) measurement() (*results.Measurement, error) {
	p := r.p
	r.beginWindow() // a sync point with the warm-up timer; a no-op when the window began
	ops, okTotal, total, err := r.rec.operations()
	if err != nil {
		return nil, err
	}
	elapsed := r.lastDone.Sub(r.mStart).Seconds()
	if elapsed < 0 {
		elapsed = 0
	}
	// Open loop: rates per second of the scheduled window, so that a run
	// that fell behind shows it. Closed loop: per second of the time it
	// actually took (memslap's elapsed time).
	window := p.Duration.Seconds()
	if p.Rate == 0 {
		window = elapsed
	}
	m := &results.Measurement{
		DurationS:  window,
		Operations: ops,
		Metrics:    map[string]float64{results.MetricElapsed: elapsed},
		Load: &results.LoadStats{
			Mode:       "closed",
			CPUSeconds: (r.cpu1 - r.cpu0).Seconds(),
			CPUSet:     p.CPUSet,
		},
	}
	sessions := r.sessOK.Load() + r.sessFail.Load()
	if window > 0 {
		m.Metrics[results.MetricThroughput] = float64(okTotal) / window
		m.Metrics["requests_per_s"] = float64(total) / window
		m.Metrics["sessions_per_s"] = float64(sessions) / window
	}
	m.Metrics["sessions_failed"] = float64(r.sessFail.Load())
	if p.Rate > 0 {
		m.Load.Mode = "open"
		m.Load.TargetRate = p.Rate
		m.Load.AchievedRate = float64(r.started) / window
		m.Load.Late = r.late
		m.Load.Concurrency = p.MaxInFlight
		r.lateMu.Lock()
		if r.lateness.TotalCount() > 0 {
			m.Load.LatenessP50Ms = float64(r.lateness.ValueAtQuantile(50)) / 1000
			m.Load.LatenessP99Ms = float64(r.lateness.ValueAtQuantile(99)) / 1000
			m.Load.LatenessMaxMs = float64(r.lateness.Max()) / 1000
		}
		r.lateMu.Unlock()
		if r.notStarted > 0 {
			m.Notes = append(m.Notes, fmt.Sprintf("%d sessions due in the window never started: the generator reached its in-flight bound (%d); achieved %.1f/s of the %.1f/s asked",
				r.notStarted, p.MaxInFlight, m.Load.AchievedRate, p.Rate))
		}
		if r.started > 0 && float64(r.late-r.notStarted) > 0.01*float64(r.started) {
			m.Notes = append(m.Notes, fmt.Sprintf("%d of %d sessions started late (more than %v behind schedule); their latency counts from the intended start",
				r.late-r.notStarted, r.started, p.LateSlack))
		}
	} else {
		m.Load.Concurrency = p.Concurrency
	}
	if n := r.rec.canceled.Load(); n > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%d requests were still in flight when the run ended and were cancelled (not recorded)", n))
	}
	if n := r.rec.unknown.Load(); n > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%d observations had an unknown label (driver bug)", n))
	}
	m.PerSecond = r.rec.perSecond(window)
	if x, ok := r.d.(extraMetrics); ok {
		for k, v := range x.Metrics() {
			m.Metrics[k] = v
		}
	}
	return m, nil
}

var errWindowOver = errors.New("measured window over")

// pool hands out VUs, creating them lazily up to max so that a dead server
// cannot make the generator spawn unbounded goroutines and connections.
type pool struct {
	d       Driver
	max     int
	free    chan VU
	mu      sync.Mutex
	created int
	all     []VU
}

func newPool(d Driver, max int) *pool {
	return &pool{d: d, max: max, free: make(chan VU, max)}
}

// get returns a free VU and whether it had to wait for one. It gives up
// with errWindowOver when deadline passes.
func (p *pool) get(ctx context.Context, deadline time.Time) (VU, bool, error) {
	select {
	case v := <-p.free:
		return v, false, nil
	default:
	}
	p.mu.Lock()
	if p.created < p.max {
		id := p.created
		p.created++
		p.mu.Unlock()
		v, err := p.d.NewVU(id)
		if err != nil {
			return nil, false, fmt.Errorf("virtual user %d: %w", id, err)
		}
		p.mu.Lock()
		p.all = append(p.all, v)
		p.mu.Unlock()
		return v, false, nil
	}
	p.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case v := <-p.free:
		return v, true, nil
	case <-t.C:
		return nil, true, errWindowOver
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

func (p *pool) put(v VU) { p.free <- v }

func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.all {
		_ = v.Close()
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// A remote driver: the workload's own driver run by generators elsewhere,
// each a `ctrperf agent` session (an SSH load host's, or a generator pod's
// in a cluster), against the target's endpoints, which are then what a
// client there dials. One generator (a load host) drives the plan's load
// as it is and its measurement is the run's. N generators (a site's
// generator pods) each offer a share of the load (workload.Splitter), so
// that together they offer what one would; they start behind a barrier:
// each drive is sent with the same instant of this machine's clock, moved
// to the generator's by its clock offset, at which the agent starts the
// driver; the windows then begin together, give or take each generator's
// connection set-up (the site records the starts and their skew). Their
// measurements merge into one (results.MergeSideBySide): histograms added,
// counts and rates summed, never an average of percentiles.

// generator is one agent session that drives the workload.
type generator struct {
	k      int    // 1-based
	name   string // for errors: "client pod 2 (pod p on node n)", "load host lab-load"
	client *remote.Client
	offset time.Duration // the generator's clock minus this machine's
	// close ends what the site opened for it (nil: the session is the
	// site's, shared by the runs).
	close func(ctx context.Context)
}

// generators are a site's generators for one drive.
type generators interface {
	// start opens len(gens) generators at once, filling gens as each
	// comes up; on error, what it filled is closed by stop.
	start(ctx context.Context, gens []*generator) error
	// stop ends what start opened, detached from the run's context.
	stop(ctx context.Context, gens []*generator)
	// describe adds to the merged measurement where the generators ran,
	// how the load was split (split) and when each window began (starts,
	// on this machine's clock; at, the barrier).
	describe(ctx context.Context, env workload.Env, m *results.Measurement, gens []*generator, fan *fanOutFacts)
}

// fanOutFacts are what a drive learnt of its generators, for describe.
type fanOutFacts struct {
	split  string
	starts []time.Time
	at     time.Time
}

// fanOut drives the workload from n generators.
type fanOut struct {
	workload.Workload
	cfg   *plan.Configuration
	runID string
	n     int
	gens  generators
	// merge merges the generators' measurements (side by side over one
	// window); nil: one generator, whose measurement is the run's, with
	// the plan's load as it is.
	merge func([]*results.Measurement) (*results.Measurement, error)
	// lead is how long before the barrier the drives are sent (0: from
	// the generators' round trips, see barrierLead).
	lead time.Duration
}

// Drive starts the generators, drives them together and merges what they
// measured. Every generator started is stopped before it returns.
func (d *fanOut) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	n := d.n
	knobs := make([]workload.Knobs, n)
	facts := &fanOutFacts{starts: make([]time.Time, n)}
	for i := range knobs {
		knobs[i] = workload.KnobsOf(d.cfg)
	}
	if d.merge != nil {
		shares, split, err := splitLoad(d.cfg, n)
		if err != nil {
			return nil, err
		}
		for i := range knobs {
			knobs[i].Load = shares[i]
		}
		facts.split = split
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	gens := make([]*generator, n)
	defer d.gens.stop(ctx, gens)
	if err := d.gens.start(ctx, gens); err != nil {
		return nil, err
	}

	if d.merge != nil {
		lead := d.lead
		if lead == 0 {
			lead = barrierLead(gens)
		}
		facts.at = time.Now().Add(lead)
	}
	var (
		mu      sync.Mutex
		waiting = n
		wg      sync.WaitGroup
	)
	ms := make([]*results.Measurement, n)
	errs := make([]error, n)
	for i, g := range gens {
		params := agent.DriveParams{RunID: d.runID, Workload: d.Name(), Knobs: knobs[i], Resources: d.cfg.Resources,
			Window: env.Window, Target: agent.WireTarget(env.Target), LoadCPUSet: env.LoadCPUSet}
		progress := env.Progress
		if d.merge != nil {
			// The generators' own CPUs: a load_cpuset of this machine's
			// does not apply to them.
			params.LoadCPUSet = ""
			params.StartAtUnixNano = facts.at.Add(g.offset).UnixNano()
			progress = func(msg string) {
				if env.Progress != nil {
					env.Progress(fmt.Sprintf("%s: %s", g.name, msg))
				}
			}
		}
		started := func(unixNano int64) {
			mu.Lock()
			defer mu.Unlock()
			facts.starts[i] = time.Unix(0, unixNano).Add(-g.offset)
			waiting--
			if waiting == 0 && env.Started != nil {
				env.Started() // every generator's window has begun
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := g.client.Drive(ctx, params, started, progress)
			ms[i] = m
			if err != nil {
				if n > 1 {
					err = fmt.Errorf("%s of %d: %w", g.name, n, err)
				}
				errs[i] = err
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	// The first failure is the cause; the others were most likely
	// cancelled by it.
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := ms[0]
	if d.merge != nil {
		var err error
		if m, err = d.merge(ms); err != nil {
			return nil, err
		}
	}
	d.gens.describe(ctx, env, m, gens, facts)
	return m, nil
}

// splitLoad is the load knobs of each of n generators (workload.Splitter).
func splitLoad(cfg *plan.Configuration, n int) ([]map[string]any, string, error) {
	s, ok := cfg.Decoded.Load.(workload.Splitter)
	if !ok {
		return nil, "", &workload.SplitError{Reason: fmt.Sprintf("the load of workload %T does not split over several generators", cfg.Decoded.Load)}
	}
	return s.Split(cfg.Load, n)
}

// closerFunc is an AgentConn's Close as the io.Closer a remote.Client
// closes after its shutdown.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// barrierLead is how far ahead of now the barrier is set: time for the
// drive requests to reach every generator (each a round trip or less),
// with a floor for the agents' scheduling.
func barrierLead(gens []*generator) time.Duration {
	var rtt time.Duration
	for _, g := range gens {
		rtt = max(rtt, time.Duration(g.client.Clock.RTTMs*float64(time.Millisecond)))
	}
	return min(max(500*time.Millisecond, 10*rtt), 10*time.Second)
}

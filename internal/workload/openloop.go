package workload

import (
	"time"

	"ctrperf/internal/load"
	"ctrperf/internal/plan"
)

// OpenLoop is what every load driven by ctrperf's own generator shares:
// the open-loop rate and its arrivals, the seed, the per-request timeout,
// the bound on sessions in flight and the capacity search. WebLoad,
// AppLoad and KVLoad embed it, so a knob of the open loop is written once
// here: a field, a line in (*knobs).openLoop and, when the generator
// takes it, a line in profile. noisy keeps loads of its own (a quiet and
// a hot rate per tenant, always Poisson) and reads only the rate and
// seed readers.
type OpenLoop struct {
	// Rate is sessions (or operations) per second; 0 is the workload's
	// closed loop.
	Rate    float64
	Poisson bool // exponential gaps instead of fixed ones
	Seed    uint64
	// Timeout is per request; it also bounds the generator's drain after
	// a window.
	Timeout     time.Duration
	MaxInFlight int // sessions in flight at most
	// Search, when set, finds the highest rate that meets an SLO instead
	// of measuring one rate (load.search; see capacity.go).
	Search *Search
}

// openLoop reads the open-loop knobs into l, whose values are the
// workload's defaults. How they combine with the workload's closed loop
// (concurrency, ops, mode) is the workload's to check.
func (k *knobs) openLoop(l *OpenLoop) {
	k.rate("rate", &l.Rate)
	k.bool("poisson", &l.Poisson)
	k.duration("timeout", &l.Timeout, time.Millisecond, time.Hour)
	whole(k, "max_inflight", &l.MaxInFlight, 1, 1000000)
	k.seed("seed", &l.Seed)
	k.search("search", &l.Search)
}

// CapacitySearch implements plan.Searching for every load that embeds
// OpenLoop: a step may run its window plus the generator's drain (the
// request timeout and a second).
func (l OpenLoop) CapacitySearch() (plan.SearchSpec, bool) {
	if l.Search == nil {
		return plan.SearchSpec{}, false
	}
	return l.Search.Spec(l.Timeout + time.Second), true
}

// profile is the generator's profile for one of env's windows at the
// open-loop knobs; started is called when the measured window starts. A
// closed loop sets Rate to 0 and its Concurrency (and Ops) on the result.
func (l OpenLoop) profile(env Env, started func()) load.Profile {
	return load.Profile{Rate: l.Rate, Poisson: l.Poisson, Seed: l.Seed, Timeout: l.Timeout, MaxInFlight: l.MaxInFlight,
		Warmup: env.Window.Warmup, Duration: env.Window.Duration, CPUSet: env.LoadCPUSet, Started: started}
}

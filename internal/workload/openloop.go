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
// here: a field, a line in (*knobs).openLoop, a line in profile when
// the generator takes it and, when it means nothing in a closed loop, a
// line in checkLoop. noisy keeps loads of its own (a quiet and
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
	// Ramp is the share of each warm-up (0 to 1) over which the rate rises
	// linearly from 0 to Rate, so that a cold server is not met by the
	// full rate at once; the measured window always runs at Rate.
	Ramp float64
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
	k.float("ramp", &l.Ramp, 0, 1)
	k.search("search", &l.Search)
}

// checkLoop checks the open-loop knobs against the loop the workload
// decided on: Rate 0 without a search is its closed loop, which has no
// arrivals to ramp.
func (l OpenLoop) checkLoop() error {
	if l.Ramp > 0 && l.Rate == 0 && l.Search == nil {
		return knobError("load.ramp", "load.ramp = %g raises an open loop's rate during the warm-up, and this load is a closed loop (concurrency): set load.rate, or leave ramp out", l.Ramp)
	}
	return nil
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
		Ramp:   time.Duration(l.Ramp * float64(env.Window.Warmup)),
		Warmup: env.Window.Warmup, Duration: env.Window.Duration, CPUSet: env.LoadCPUSet, Started: started}
}

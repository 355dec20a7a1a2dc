package load

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivals yields the intended start offsets of sessions from the start of
// the schedule: i/rate for a fixed rate, or a Poisson process (exponential
// gaps with mean 1/rate) from a seeded generator, so that two runs with the
// same seed offer exactly the same load.
type arrivals struct {
	rate    float64
	rng     *rand.Rand // nil for a fixed rate
	n       int64
	elapsed float64 // seconds, Poisson only
	// ramp is how many seconds the rate takes to rise linearly from 0 to
	// rate at the start of the schedule (Profile.Ramp); 0: none.
	ramp float64
}

func newArrivals(rate float64, poisson bool, seed uint64) *arrivals {
	a := &arrivals{rate: rate}
	if poisson {
		a.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
	return a
}

// never is the offset of an arrival too far away to represent (a rate so
// low that its gap overflows a time.Duration): past the end of any window.
const never = time.Duration(math.MaxInt64)

// next returns the offset of the next arrival, at most never.
func (a *arrivals) next() time.Duration {
	var s float64
	if a.rng == nil {
		// Multiply rather than accumulate so that rounding never drifts.
		s = float64(a.n) / a.rate
	} else {
		if a.n > 0 {
			a.elapsed += a.rng.ExpFloat64() / a.rate
		}
		s = a.elapsed
	}
	s = ramped(s, a.ramp)
	a.n++
	ns := s * float64(time.Second)
	if !(ns < float64(never)) { // NaN included
		return never
	}
	return time.Duration(ns)
}

// ramped moves an offset s of the schedule at a constant rate to the
// schedule whose rate rises linearly from 0 over the first ramp seconds:
// the same arrivals in the same order, the expected count by t being
// rate·t²/(2·ramp) during the ramp and half a ramp's worth fewer after it,
// so every arrival after the ramp keeps the constant rate, ramp/2 later.
func ramped(s, ramp float64) float64 {
	switch {
	case ramp <= 0:
		return s
	case s <= ramp/2:
		return math.Sqrt(2 * ramp * s)
	}
	return s + ramp/2
}

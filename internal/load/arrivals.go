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
	a.n++
	ns := s * float64(time.Second)
	if !(ns < float64(never)) { // NaN included
		return never
	}
	return time.Duration(ns)
}

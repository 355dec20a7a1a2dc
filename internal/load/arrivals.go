package load

import (
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

// next returns the offset of the next arrival.
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
	return time.Duration(s * float64(time.Second))
}

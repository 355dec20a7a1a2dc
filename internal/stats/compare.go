package stats

import (
	"math"
	"strings"

	"ctrperf/internal/results"
)

// Verdicts. A difference is only called when the whole interval of the ratio
// lies on one side of 1.0.
const (
	NoDifference     = "no measurable difference"
	UndefinedFewRuns = "undefined: fewer than 2 repetitions"
	UndefinedZero    = "undefined: reference is 0"
	BothZero         = "both zero"
)

// Sense says which direction of a metric is better and how to say so.
type Sense struct {
	// HigherIsBetter is meaningful only when !Neutral.
	HigherIsBetter bool
	Neutral        bool   // no better or worse, only higher or lower
	Better, Worse  string // verdict words for a better / worse value
}

// SenseOf classifies a metric by its name: rates are better high, latencies,
// durations and error rates are better low. Unknown metrics are neutral:
// the verdict then says only "higher" or "lower".
func SenseOf(metric string) Sense {
	switch {
	case metric == results.MetricErrorRate || metric == "errors":
		return Sense{Better: "fewer errors", Worse: "more errors"}
	case strings.HasSuffix(metric, "_failed") || strings.HasSuffix(metric, "_errors"):
		return Sense{Better: "fewer failures", Worse: "more failures"}
	case strings.HasSuffix(metric, "_per_s") || strings.HasSuffix(metric, "_s_rate") ||
		metric == "iops" || strings.HasPrefix(metric, "bw") || strings.HasSuffix(metric, "_iops") ||
		strings.HasSuffix(metric, "_bw_kb_s"):
		return Sense{HigherIsBetter: true, Better: "faster", Worse: "slower"}
	case strings.HasSuffix(metric, "_ms") || strings.HasSuffix(metric, "_us") ||
		metric == results.MetricElapsed || strings.HasSuffix(metric, "_latency_s"):
		return Sense{Better: "faster", Worse: "slower"}
	}
	return Sense{Neutral: true, Better: "higher", Worse: "lower"}
}

// SenseFor is the sense of a metric whose direction a workload declared
// (results.MetricInfo.Better: "higher" or "lower"); without a declaration
// it is SenseOf the name. A declaration the name agrees with keeps the
// name's words ("faster"); one the name cannot tell says "better"/"worse".
func SenseFor(metric, better string) Sense {
	byName := SenseOf(metric)
	var higher bool
	switch better {
	case results.BetterHigher:
		higher = true
	case results.BetterLower:
	default:
		return byName
	}
	if !byName.Neutral && byName.HigherIsBetter == higher {
		return byName
	}
	return Sense{HigherIsBetter: higher, Better: "better", Worse: "worse"}
}

// Comparison is the ratio of a metric to a reference (the baseline, or the
// first result set) with its interval and verdict. Ratio and the interval are
// nil when undefined; Verdict always says why.
type Comparison struct {
	Ratio   *float64 `json:"ratio"`
	CILow   *float64 `json:"ci_low"`
	CIHigh  *float64 `json:"ci_high"`
	Verdict string   `json:"verdict"`
}

// Significant reports whether the verdict is a real difference (better or
// worse), not "no measurable difference" or undefined.
func (c Comparison) Significant() bool {
	return c.CILow != nil && c.Verdict != NoDifference
}

// RatioCI compares two sets of repetitions by the ratio of their medians,
// resampling each set independently.
func (o Options) RatioCI(metric, keyNum string, num []float64, keyDen string, den []float64) Comparison {
	return CompareReplicates(Ratio{Sense: SenseOf(metric), Level: o.level(),
		Num: Side{Point: Median(num), Replicates: o.MedianReplicates(keyNum, num), N: len(num)},
		Den: Side{Point: Median(den), Replicates: o.MedianReplicates(keyDen, den), N: len(den)}})
}

// Side is one side of a Ratio: a point estimate, its bootstrap replicates
// and the repetitions behind it (an interval needs at least two on each
// side).
type Side struct {
	Point      float64
	Replicates []float64
	N          int
}

// SideOf is the side of an Estimate (its median and repetitions) with the
// estimate's bootstrap replicates.
func SideOf(e Estimate, replicates []float64) Side {
	return Side{Point: e.Median, Replicates: replicates, N: e.N}
}

// Ratio is the comparison Num/Den of a metric of sense Sense (SenseOf its
// name, SenseFor a declared one) at the confidence Level.
type Ratio struct {
	Num, Den Side
	Sense    Sense
	Level    float64
}

// CompareReplicates builds the ratio r.Num/r.Den from the point estimates
// and their bootstrap replicates (drawn independently for the two sides,
// paired by position only because both are independent draws).
func CompareReplicates(r Ratio) Comparison {
	num, den := r.Num.Point, r.Den.Point
	numReps, denReps := r.Num.Replicates, r.Den.Replicates
	nNum, nDen := r.Num.N, r.Den.N
	var c Comparison
	switch {
	case nNum == 0 || nDen == 0:
		c.Verdict = UndefinedFewRuns
		return c
	case den == 0 && num == 0:
		c.Verdict = BothZero
		one := 1.0
		c.Ratio = &one
		return c
	case den == 0:
		c.Verdict = UndefinedZero
		return c
	}
	point := num / den
	c.Ratio = &point
	if nNum < 2 || nDen < 2 {
		c.Verdict = UndefinedFewRuns
		return c
	}
	n := min(len(numReps), len(denReps))
	ratios := make([]float64, n)
	for i := 0; i < n; i++ {
		ratios[i] = numReps[i] / denReps[i] // 0/0 is NaN and x/0 is Inf: dropped below
		if numReps[i] == 0 && denReps[i] == 0 {
			ratios[i] = 1
		}
	}
	lo, hi, ok := percentileInterval(ratios, r.Level)
	if !ok {
		c.Verdict = UndefinedZero
		return c
	}
	c.CILow, c.CIHigh = &lo, &hi
	c.Verdict = VerdictSense(r.Sense, lo, hi)
	return c
}

// Verdict words the interval [lo, hi] of a ratio for metric: an interval that
// contains 1.0 is never a win or a loss.
func Verdict(metric string, lo, hi float64) string { return VerdictSense(SenseOf(metric), lo, hi) }

// VerdictSense is Verdict for a metric of a known sense.
func VerdictSense(s Sense, lo, hi float64) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return UndefinedZero
	}
	if lo <= 1 && hi >= 1 {
		return NoDifference
	}
	higher := lo > 1
	switch {
	case s.Neutral && higher:
		return s.Better // "higher"
	case s.Neutral:
		return s.Worse // "lower"
	case higher == s.HigherIsBetter:
		return s.Better
	default:
		return s.Worse
	}
}

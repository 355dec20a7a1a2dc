package stats

import (
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Pooled holds the latency histograms of several runs with one geometry,
// compacted to the buckets that any run used. Its statistics are those of the
// histogram merged over the runs, optionally weighted by how often a bootstrap
// resample drew each run, so that percentiles are always read from a merged
// distribution and never averaged.
type Pooled struct {
	merged *hdrhistogram.Histogram
	high   []float64 // highest equivalent value of each used bucket, ascending
	mid    []float64 // median equivalent value, for means
	low    []float64 // lowest equivalent value, for minima
	counts [][]int64 // per run, per used bucket
}

// NewPooled merges the runs' histograms. All must share one geometry (as
// results.NewHistogram makes them); a different one is an error, because
// bucket boundaries would not line up.
func NewPooled(hs []*hdrhistogram.Histogram) (*Pooled, error) {
	if len(hs) == 0 {
		return nil, fmt.Errorf("pool histograms: none given")
	}
	first := hs[0].Export()
	merged := hdrhistogram.Import(first)
	for i, h := range hs[1:] {
		s := h.Export()
		if s.LowestTrackableValue != first.LowestTrackableValue || s.HighestTrackableValue != first.HighestTrackableValue ||
			s.SignificantFigures != first.SignificantFigures {
			return nil, fmt.Errorf("pool histograms: run %d has geometry %d..%d/%d, run 0 has %d..%d/%d",
				i+1, s.LowestTrackableValue, s.HighestTrackableValue, s.SignificantFigures,
				first.LowestTrackableValue, first.HighestTrackableValue, first.SignificantFigures)
		}
		if dropped := merged.Merge(h); dropped > 0 {
			return nil, fmt.Errorf("pool histograms: run %d: %d values out of range", i+1, dropped)
		}
	}
	p := &Pooled{merged: merged}
	// Distribution walks the buckets in the order of the flat counts array,
	// so bar i is counts index i.
	var used []int
	for i, b := range merged.Distribution() {
		if b.Count == 0 {
			continue
		}
		used = append(used, i)
		p.high = append(p.high, float64(b.To))
		p.low = append(p.low, float64(b.From))
		// as HdrHistogram's medianEquivalentValue, so Mean matches its own
		p.mid = append(p.mid, float64(b.From+(b.To-b.From+1)>>1))
	}
	for _, h := range hs {
		c := h.Export().Counts
		row := make([]int64, len(used))
		for j, idx := range used {
			if idx < len(c) {
				row[j] = c[idx]
			}
		}
		p.counts = append(p.counts, row)
	}
	return p, nil
}

// Merged is the histogram of all runs together.
func (p *Pooled) Merged() *hdrhistogram.Histogram { return p.merged }

// Runs is the number of runs pooled.
func (p *Pooled) Runs() int { return len(p.counts) }

// LatencyStat names a figure of a pooled latency distribution.
type LatencyStat struct {
	Name     string
	Quantile float64 // in (0,1] for a percentile; 0 for the others
	Kind     string  // "quantile", "mean", "min", "max"
}

// StandardLatency are the figures every report shows, in milliseconds.
var StandardLatency = []LatencyStat{
	{Name: "mean_ms", Kind: "mean"},
	{Name: "p50_ms", Kind: "quantile", Quantile: 0.50},
	{Name: "p90_ms", Kind: "quantile", Quantile: 0.90},
	{Name: "p99_ms", Kind: "quantile", Quantile: 0.99},
	{Name: "p999_ms", Kind: "quantile", Quantile: 0.999},
	{Name: "min_ms", Kind: "min"},
	{Name: "max_ms", Kind: "max"},
}

// Stats evaluates figs on the pooled histogram with run weights w (nil means
// every run once) and writes them to out in the histogram's unit (µs for
// results' histograms). Quantiles use HdrHistogram's rule (the highest value
// equivalent to the rank-th smallest sample), so with nil weights they equal
// Merged().ValueAtQuantile.
func (p *Pooled) Stats(figs []LatencyStat, w []int, out []float64) {
	pooled := make([]int64, len(p.high))
	var total int64
	for r, row := range p.counts {
		m := int64(1)
		if w != nil {
			m = int64(w[r])
		}
		if m == 0 {
			continue
		}
		for j, c := range row {
			pooled[j] += m * c
			total += m * c
		}
	}
	for i, f := range figs {
		out[i] = math.NaN()
		if total == 0 {
			continue
		}
		switch f.Kind {
		case "mean":
			var s float64
			for j, c := range pooled {
				s += float64(c) * p.mid[j]
			}
			out[i] = s / float64(total)
		case "min":
			for j, c := range pooled {
				if c > 0 {
					out[i] = p.low[j]
					break
				}
			}
		case "max":
			for j := len(pooled) - 1; j >= 0; j-- {
				if pooled[j] > 0 {
					out[i] = p.high[j]
					break
				}
			}
		case "quantile":
			rank := hdrRank(f.Quantile*100, total)
			var cum int64
			for j, c := range pooled {
				cum += c
				if cum >= rank {
					out[i] = p.high[j]
					break
				}
			}
		}
	}
}

// hdrRank is HdrHistogram's rank of a percentile among total samples.
func hdrRank(percentile float64, total int64) int64 {
	r := (percentile/100)*float64(total) + 0.5
	if !(r >= 1) {
		return 1
	}
	if r >= float64(total) {
		return total
	}
	return int64(r)
}

// LatencyEstimates returns every figure of figs as an Estimate: the point is
// the merged histogram's value, the interval comes from resampling whole
// runs and re-merging. scale converts the histogram unit (1e-3 turns µs into
// ms). The replicates are returned too, for ratios against another Pooled.
func (o Options) LatencyEstimates(key string, p *Pooled, figs []LatencyStat, scale float64) ([]Estimate, [][]float64) {
	point := make([]float64, len(figs))
	p.Stats(figs, nil, point)
	reps := o.Replicates(key, p.Runs(), len(figs), func(w []int, out []float64) {
		p.Stats(figs, w, out)
	})
	est := make([]Estimate, len(figs))
	for i := range figs {
		for b := range reps[i] {
			reps[i][b] *= scale
		}
		est[i] = Summarize(point[i]*scale, reps[i], p.Runs(), o.level())
	}
	return est, reps
}

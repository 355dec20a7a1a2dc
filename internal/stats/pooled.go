package stats

import (
	"fmt"
	"math"
	"sort"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/results"
)

// Pooled holds the latency histograms of several runs with one geometry,
// compacted to the buckets that any run used. Its statistics are those of the
// histogram merged over the runs, optionally weighted by how often a bootstrap
// resample drew each run, so that percentiles are always read from a merged
// distribution and never averaged.
type Pooled struct {
	merged   *hdrhistogram.Histogram
	high     []float64 // highest equivalent value of each used bucket, ascending
	mid      []float64 // median equivalent value, for means
	low      []float64 // lowest equivalent value, for minima
	counts   [][]int64 // per run, per used bucket
	runTotal []int64   // samples per run
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
		p.runTotal = append(p.runTotal, h.TotalCount())
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
	{Name: results.MetricMeanMs, Kind: "mean"},
	{Name: results.MetricP50Ms, Kind: "quantile", Quantile: 0.50},
	{Name: results.MetricP90Ms, Kind: "quantile", Quantile: 0.90},
	{Name: results.MetricP99Ms, Kind: "quantile", Quantile: 0.99},
	{Name: results.MetricP999Ms, Kind: "quantile", Quantile: 0.999},
	{Name: results.MetricMinMs, Kind: "min"},
	{Name: results.MetricMaxMs, Kind: "max"},
}

// Stats evaluates figs on the pooled histogram with run weights w (nil means
// every run once) and writes them to out in the histogram's unit (µs for
// results' histograms). Quantiles use HdrHistogram's rule (the highest value
// equivalent to the rank-th smallest sample), so with nil weights they equal
// Merged().ValueAtQuantile.
func (p *Pooled) Stats(figs []LatencyStat, w []int, out []float64) {
	weight := func(r int) int64 {
		if w == nil {
			return 1
		}
		return int64(w[r])
	}
	var total int64
	for r, t := range p.runTotal {
		total += weight(r) * t
	}
	for i := range out[:len(figs)] {
		out[i] = math.NaN()
	}
	if total == 0 {
		return
	}
	// Quantiles in rank order, so one pass over the buckets serves them all.
	type target struct {
		rank int64
		out  int
	}
	var targets []target
	for i, f := range figs {
		if f.Kind == "quantile" {
			targets = append(targets, target{hdrRank(f.Quantile*100, total), i})
		}
	}
	sort.Slice(targets, func(a, b int) bool { return targets[a].rank < targets[b].rank })
	// Only the runs drawn at least once matter.
	var rows [][]int64
	var mult []int64
	for r, row := range p.counts {
		if m := weight(r); m > 0 {
			rows = append(rows, row)
			mult = append(mult, m)
		}
	}
	var cum int64
	var sum float64
	first, last := -1, -1
	next := 0
	for j := range p.high {
		var c int64
		for k, row := range rows {
			c += mult[k] * row[j]
		}
		if c == 0 {
			continue
		}
		if first < 0 {
			first = j
		}
		last = j
		cum += c
		sum += float64(c) * p.mid[j]
		for next < len(targets) && targets[next].rank <= cum {
			out[targets[next].out] = p.high[j]
			next++
		}
	}
	for i, f := range figs {
		switch f.Kind {
		case "mean":
			out[i] = sum / float64(total)
		case "min":
			out[i] = p.low[first]
		case "max":
			out[i] = p.high[last]
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

package results

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// OperationMerger merges the operations of measurements taken side by side
// over one window by several generators (a run's instances, noisy's
// tenants) into one operation per label:
//   - counts, bytes and errors summed;
//   - HdrHistograms merged, so quantiles are those of every request of
//     every generator;
//   - where a tool gave only percentiles, each is the worst generator's, and
//     the mean is weighted by count.
//
// The zero value is ready to use.
type OperationMerger struct {
	ops   map[string]*Operation
	hists map[string]*hdrhistogram.Histogram
	means map[string]float64 // label → sum of count × mean
}

// Add merges one generator's operations.
func (m *OperationMerger) Add(ops map[string]*Operation) error {
	if m.ops == nil {
		m.ops, m.hists, m.means = map[string]*Operation{}, map[string]*hdrhistogram.Histogram{}, map[string]float64{}
	}
	for label, op := range ops {
		dst := m.ops[label]
		if dst == nil {
			dst = &Operation{}
			m.ops[label] = dst
		}
		dst.AddCounts(op)
		for q, v := range op.PercentilesMs {
			if dst.PercentilesMs == nil {
				dst.PercentilesMs = map[string]float64{}
			}
			dst.PercentilesMs[q] = max(dst.PercentilesMs[q], v)
		}
		m.means[label] += op.MeanMs * float64(op.Count)
		if op.Histogram == "" {
			continue
		}
		h, err := DecodeHistogram(op.Histogram)
		if err != nil {
			return fmt.Errorf("operation %s: %w", label, err)
		}
		if m.hists[label] == nil {
			m.hists[label] = NewHistogram()
		}
		m.hists[label].Merge(h)
	}
	return nil
}

// Operations returns the merged operations (an empty map when nothing was
// added).
func (m *OperationMerger) Operations() (map[string]*Operation, error) {
	out := map[string]*Operation{}
	for label, op := range m.ops {
		if op.Count > 0 && m.means[label] > 0 {
			op.MeanMs = m.means[label] / float64(op.Count)
		}
		if h := m.hists[label]; h != nil {
			s, err := EncodeHistogram(h)
			if err != nil {
				return nil, fmt.Errorf("operation %s: %w", label, err)
			}
			op.Histogram = s
		}
		out[label] = op
	}
	return out, nil
}

// AddRates adds another generator's asked-for and achieved rates and its
// late starts: generators driven side by side over one window.
func (l *LoadStats) AddRates(o *LoadStats) {
	l.TargetRate += o.TargetRate
	l.AchievedRate += o.AchievedRate
	l.Late += o.Late
}

// KeepWorstLateness keeps the worse of l's and o's generator lateness (p99
// and max): a delay of the generator is the worst any run saw, not an
// average.
func (l *LoadStats) KeepWorstLateness(o *LoadStats) {
	l.LatenessP99Ms = max(l.LatenessP99Ms, o.LatenessP99Ms)
	l.LatenessMaxMs = max(l.LatenessMaxMs, o.LatenessMaxMs)
}

// SideBySide says how MergeSideBySide names and treats the parts it merges.
type SideBySide struct {
	// Part names a part in notes and errors: "instance", "client pod".
	Part string
	// PartMetric names part k's (1-based) copy of a metric in the merged
	// measurement (instance_2_throughput_per_s).
	PartMetric func(k int, metric string) string
	// SharedTarget says the parts drove one deployment (generator pods),
	// not one each (instances): MergeTarget takes the largest reading.
	SharedTarget bool
	// KeepPlacement keeps the first generator's CPU set and protection in
	// the merged load: every part's generator ran on this machine.
	KeepPlacement bool
}

// MergeSideBySide merges measurements taken side by side over one window
// (a run's instances, one deployment's generator pods) into one:
//   - the longest duration; operations of the same label merged
//     (OperationMerger);
//   - each metric by its declared Merge (MergeOf): summed, mean weighted
//     by operation count, largest, smallest, computed again from the
//     merged histograms, or a target's counter. A metric that declares no
//     merge is left out of the merged figures, with a note, and kept as
//     each part's (PartMetric): a guess could be off by a factor of the
//     parts (a sum taken for a mean), and failing a run that measured
//     well for a missing declaration would throw its figures away;
//   - each part's throughput and p99 (from its own histograms, else its
//     metric) under PartMetric;
//   - the load: rates, concurrency, late starts and generator CPU summed,
//     lateness the worst;
//   - per second: counts and errors summed, the max the worst, percentiles
//     left out (a second's percentiles do not merge without its histogram);
//   - tools and declarations the union; notes prefixed with their part.
func MergeSideBySide(ms []*Measurement, o SideBySide) (*Measurement, error) {
	out := &Measurement{Metrics: map[string]float64{}}
	var ops OperationMerger
	weights := make([]float64, len(ms))
	for i, m := range ms {
		if m == nil {
			return nil, fmt.Errorf("%s %d of %d returned no measurement", o.Part, i+1, len(ms))
		}
		out.DurationS = max(out.DurationS, m.DurationS)
		if err := ops.Add(m.Operations); err != nil {
			return nil, fmt.Errorf("%s %d: %w", o.Part, i+1, err)
		}
		for _, op := range m.Operations {
			weights[i] += float64(op.Count)
		}
		mergeLoad(out, m.Load, o.KeepPlacement)
		for j, s := range m.PerSecond {
			if j >= len(out.PerSecond) {
				out.PerSecond = append(out.PerSecond, Second{T: s.T})
			}
			sec := &out.PerSecond[j]
			sec.Count += s.Count
			sec.Errors += s.Errors
			sec.MaxMs = max(sec.MaxMs, s.MaxMs)
		}
		if len(m.Tools) > 0 && out.Tools == nil {
			out.Tools = map[string]string{}
		}
		maps.Copy(out.Tools, m.Tools)
		for k, info := range m.Declared {
			if out.Declared == nil {
				out.Declared = map[string]MetricInfo{}
			}
			if _, seen := out.Declared[k]; !seen {
				out.Declared[k] = info
			}
		}
		for _, note := range m.Notes {
			out.Notes = append(out.Notes, fmt.Sprintf("%s %d: %s", o.Part, i+1, note))
		}
	}
	var err error
	if out.Operations, err = ops.Operations(); err != nil {
		return nil, err
	}
	all, err := MergedHistogram(out.Operations)
	if err != nil {
		return nil, err
	}
	if err := mergeMetrics(out, ms, weights, all, o); err != nil {
		return nil, err
	}
	for i, m := range ms {
		if v, ok := m.Metrics[MetricThroughput]; ok {
			out.Metrics[o.PartMetric(i+1, MetricThroughput)] = v
		}
		h, err := MergedHistogram(m.Operations)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", o.Part, i+1, err)
		}
		if h != nil && h.TotalCount() > 0 {
			out.Metrics[o.PartMetric(i+1, MetricP99Ms)], _ = HistogramFigure(h, MetricP99Ms)
		} else if v, ok := m.Metrics[MetricP99Ms]; ok {
			out.Metrics[o.PartMetric(i+1, MetricP99Ms)] = v
		}
	}
	slices.Sort(out.Notes)
	return out, nil
}

// mergeMetrics sets out's metrics from the parts' by their merges.
func mergeMetrics(out *Measurement, ms []*Measurement, weights []float64, all *hdrhistogram.Histogram, o SideBySide) error {
	names := map[string]bool{}
	for _, m := range ms {
		for name := range m.Metrics {
			names[name] = true
		}
	}
	var noHist []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var vs, ws []float64
		for i, m := range ms {
			if v, ok := m.Metrics[name]; ok {
				vs, ws = append(vs, v), append(ws, weights[i])
			}
		}
		if len(vs) != len(ms) {
			out.Notes = append(out.Notes, fmt.Sprintf("metric %s was reported by %d of %d %ss only", name, len(vs), len(ms), o.Part))
		}
		kind, ok := MergeOf(name, out.Declared)
		if kind == MergeTarget && o.SharedTarget {
			kind = MergeMax
		}
		switch kind {
		case MergeSum, MergeTarget:
			out.Metrics[name] = sum(vs)
		case MergeMean:
			out.Metrics[name] = weightedMean(vs, ws)
		case MergeMax:
			out.Metrics[name] = slices.Max(vs)
		case MergeMin:
			out.Metrics[name] = slices.Min(vs)
		case MergeLatency:
			if all != nil && all.TotalCount() > 0 {
				out.Metrics[name], _ = HistogramFigure(all, name)
				break
			}
			noHist = append(noHist, name)
			if name == MetricMinMs {
				out.Metrics[name] = slices.Min(vs)
			} else {
				out.Metrics[name] = slices.Max(vs)
			}
		default:
			if ok {
				return fmt.Errorf("metric %s: unknown merge %q", name, kind)
			}
			for i, m := range ms {
				if v, has := m.Metrics[name]; has {
					out.Metrics[o.PartMetric(i+1, name)] = v
				}
			}
			out.Notes = append(out.Notes, fmt.Sprintf("metric %s declares no merge (sum, mean, max, …): left out of the merged figures; each %s's is kept (%s … %s)", name, o.Part, o.PartMetric(1, name), o.PartMetric(len(ms), name)))
		}
	}
	if len(noHist) > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("the %ss reported %s without histograms: each is the worst %s's", o.Part, strings.Join(noHist, ", "), o.Part))
	}
	return nil
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

// weightedMean is vs weighted by ws; alike where the weights add to 0.
func weightedMean(vs, ws []float64) float64 {
	var s, w float64
	for i, v := range vs {
		s, w = s+v*ws[i], w+ws[i]
	}
	if w == 0 {
		return sum(vs) / float64(len(vs))
	}
	return s / w
}

// mergeLoad folds one part's generator into out's load: rates,
// concurrency, late starts and CPU summed (one generator each), lateness
// the worst.
func mergeLoad(out *Measurement, ld *LoadStats, keepPlacement bool) {
	if ld == nil {
		return
	}
	if out.Load == nil {
		out.Load = &LoadStats{Mode: ld.Mode}
		if keepPlacement {
			out.Load.CPUSet, out.Load.Protected = ld.CPUSet, ld.Protected
		}
	}
	out.Load.AddRates(ld)
	out.Load.Concurrency += ld.Concurrency
	out.Load.CPUSeconds += ld.CPUSeconds
	out.Load.LatenessP50Ms = max(out.Load.LatenessP50Ms, ld.LatenessP50Ms)
	out.Load.KeepWorstLateness(ld)
}

// MergedHistogram is every operation's histogram added (nil: none has one).
func MergedHistogram(ops map[string]*Operation) (*hdrhistogram.Histogram, error) {
	var all *hdrhistogram.Histogram
	for _, label := range slices.Sorted(maps.Keys(ops)) {
		op := ops[label]
		if op == nil || op.Histogram == "" {
			continue
		}
		h, err := DecodeHistogram(op.Histogram)
		if err != nil {
			return nil, fmt.Errorf("operation %s: %w", label, err)
		}
		if all == nil {
			all = NewHistogram()
		}
		all.Merge(h)
	}
	return all, nil
}

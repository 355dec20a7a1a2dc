package results

import (
	"fmt"

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

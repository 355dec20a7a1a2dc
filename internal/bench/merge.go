package bench

import (
	"fmt"
	"maps"

	"ctrperf/internal/results"
)

// sideBySide folds what every merge of measurements taken side by side over
// one window shares, whatever its rule for metrics: the longest duration,
// the operations of the same label merged (results.OperationMerger), the
// generators' load (rates, concurrency and CPU summed, lateness the worst),
// the tools' union, and each part's notes prefixed with its name. Its
// users: mergeInstances (N deployments, one generator each) and
// mergeClientPods (one deployment, N generator pods).
type sideBySide struct {
	out  *results.Measurement
	ops  results.OperationMerger
	part string // "instance", "client pod": how notes and errors name a part
	// loadInit is the merged load made from the first part's that has one.
	loadInit func(*results.LoadStats) *results.LoadStats
}

func newSideBySide(part string, loadInit func(*results.LoadStats) *results.LoadStats) *sideBySide {
	return &sideBySide{out: &results.Measurement{Metrics: map[string]float64{}}, part: part, loadInit: loadInit}
}

// add folds part i (0-based) of n; the caller merges its metrics.
func (s *sideBySide) add(i, n int, m *results.Measurement) error {
	if m == nil {
		return fmt.Errorf("%s %d of %d returned no measurement", s.part, i+1, n)
	}
	out := s.out
	out.DurationS = max(out.DurationS, m.DurationS)
	if err := s.ops.Add(m.Operations); err != nil {
		return fmt.Errorf("%s %d: %w", s.part, i+1, err)
	}
	if ld := m.Load; ld != nil {
		if out.Load == nil {
			out.Load = s.loadInit(ld)
		}
		out.Load.AddRates(ld)
		out.Load.Concurrency += ld.Concurrency
		out.Load.CPUSeconds += ld.CPUSeconds // one generator each
		out.Load.LatenessP50Ms = max(out.Load.LatenessP50Ms, ld.LatenessP50Ms)
		out.Load.KeepWorstLateness(ld)
	}
	if len(m.Tools) > 0 && out.Tools == nil {
		out.Tools = map[string]string{}
	}
	maps.Copy(out.Tools, m.Tools)
	for _, note := range m.Notes {
		out.Notes = append(out.Notes, fmt.Sprintf("%s %d: %s", s.part, i+1, note))
	}
	return nil
}

// operations ends the merge of the operations.
func (s *sideBySide) operations() error {
	var err error
	s.out.Operations, err = s.ops.Operations()
	return err
}

package workload

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"ctrperf/internal/load"
	"ctrperf/internal/plan"
)

// A Splitter is a load that n generators side by side (generator pods, or
// drivers on several hosts) can offer in shares, each running the
// workload's own driver with its share's knobs, so that together they
// offer what one generator would: a closed loop's connections (and
// operations) divided, an open loop's rate and in-flight bound divided,
// each generator with its own seed (the same seed would give each the
// same arrivals and keys). A load that is not a Splitter is driven by one
// generator.
type Splitter interface {
	// Split returns the knobs of each of n generators, from the
	// configuration's load knobs, and says how the load was split, for
	// the record. A load that cannot be split so is a *SplitError.
	Split(knobs map[string]any, n int) (shares []map[string]any, how string, err error)
}

// SplitError is a load that cannot be split over that many generators:
// every repetition would fail alike (not_run).
type SplitError struct{ Reason string }

func (e *SplitError) Error() string     { return e.Reason }
func (e *SplitError) NotRunnable() bool { return true }

var (
	_ Splitter = KVLoad{}
	_ Splitter = WebLoad{}
	// What the plan asks of a decoded load for kubernetes.client: pod.
	_ plan.SplitLoad = KVLoad{}
	_ plan.SplitLoad = WebLoad{}
)

// Split implements Splitter: kv's generator (ctrperf on the generator's
// machine) splits; its client container and a capacity search do not.
func (l KVLoad) Split(knobs map[string]any, n int) ([]map[string]any, string, error) {
	if l.Search != nil || l.Client != kvClientHost {
		return nil, "", &SplitError{"kv over several generators takes neither load.search nor load.client: container"}
	}
	return splitShares(knobs, n, shareOf{open: l.Mode == "open", rate: l.Rate, conns: l.Concurrency, ops: l.Ops,
		maxInFlight: l.MaxInFlight, seed: l.Seed, opsKey: "ops"})
}

// Split implements Splitter: web's sessions split; a capacity search does
// not.
func (l WebLoad) Split(knobs map[string]any, n int) ([]map[string]any, string, error) {
	if l.Search != nil {
		return nil, "", &SplitError{"web over several generators takes no load.search"}
	}
	return splitShares(knobs, n, shareOf{open: l.Rate > 0, rate: l.Rate, conns: int64(l.Concurrency), maxInFlight: l.MaxInFlight, seed: l.Seed})
}

// shareOf is what a load says of itself for splitShares.
type shareOf struct {
	open        bool
	rate        float64
	conns, ops  int64
	maxInFlight int
	seed        uint64
	// opsKey is the knob of a closed loop's operation count ("": none).
	opsKey string
}

// splitShares divides a load over n generators (see Splitter).
func splitShares(knobs map[string]any, n int, s shareOf) ([]map[string]any, string, error) {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = maps.Clone(knobs)
		if out[i] == nil {
			out[i] = map[string]any{}
		}
	}
	var desc []string
	if s.open {
		each := s.rate / float64(n)
		if each < load.MinRate {
			return nil, "", &SplitError{fmt.Sprintf("load.rate %g over %d generators is %g per generator, below the generator's least rate %g", s.rate, n, each, load.MinRate)}
		}
		inflight := (s.maxInFlight + n - 1) / n
		for i := range out {
			out[i]["rate"] = each
			out[i]["max_inflight"] = int64(inflight)
		}
		desc = append(desc, fmt.Sprintf("open loop: rate %g/s as %d × %g/s, max_inflight %d as %d × %d", s.rate, n, each, s.maxInFlight, n, inflight))
	} else {
		if s.conns < int64(n) {
			return nil, "", &SplitError{fmt.Sprintf("load.concurrency %d over %d generators: each generator drives at least one connection", s.conns, n)}
		}
		cs := splitWhole(s.conns, n)
		for i := range out {
			out[i]["concurrency"] = cs[i]
		}
		desc = append(desc, fmt.Sprintf("closed loop: concurrency %d as %s", s.conns, joinInts(cs)))
		if s.opsKey != "" && s.ops > 0 {
			per := splitWhole(s.ops, n)
			for i := range out {
				out[i][s.opsKey] = per[i]
			}
			desc = append(desc, fmt.Sprintf("ops %d as %s", s.ops, joinInts(per)))
		}
	}
	for i := range out {
		out[i]["seed"] = int64(s.seed) + int64(i)
	}
	desc = append(desc, fmt.Sprintf("seeds %d to %d", s.seed, s.seed+uint64(n)-1))
	return out, fmt.Sprintf("the load split over them (%s)", strings.Join(desc, "; ")), nil
}

// splitWhole divides v into n whole shares that differ by one at most,
// the larger first.
func splitWhole(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v / int64(n)
		if int64(i) < v%int64(n) {
			out[i]++
		}
	}
	return out
}

func joinInts(vs []int64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, "+")
}

package bench

import (
	"math"
	"testing"

	"ctrperf/internal/results"
)

// Instances and client pods merge by one rule: over the same histograms
// and counts, both give the p99 of every request together and the failed
// share of every request, not the worst part's p99 nor the parts' mean
// error rate.
func TestInstancesAndClientPodsMergeAlike(t *testing.T) {
	hist := func(us int64, n int64) string {
		h := results.NewHistogram()
		_ = h.RecordValues(us, n)
		s, err := results.EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	parts := func() []*results.Measurement {
		return []*results.Measurement{
			{DurationS: 10, Operations: map[string]*results.Operation{"get": {Count: 990, Errors: map[string]int64{"timeout": 99}, Histogram: hist(1000, 990)}},
				Metrics: map[string]float64{results.MetricThroughput: 89.1, results.MetricP99Ms: 1, results.MetricErrorRate: 0.1}},
			{DurationS: 10, Operations: map[string]*results.Operation{"get": {Count: 10, Histogram: hist(50000, 10)}},
				Metrics: map[string]float64{results.MetricThroughput: 1, results.MetricP99Ms: 50, results.MetricErrorRate: 0}},
		}
	}
	inst, err := mergeInstances(parts())
	if err != nil {
		t.Fatal(err)
	}
	pods, err := mergeClientPods(parts())
	if err != nil {
		t.Fatal(err)
	}
	union := results.NewHistogram()
	_ = union.RecordValues(1000, 990)
	_ = union.RecordValues(50000, 10)
	wantP99 := float64(union.ValueAtQuantile(99)) / 1000 // about 1 ms: 99% of requests took 1 ms
	wantErr := 99.0 / 1000
	for _, c := range []struct {
		name string
		m    *results.Measurement
	}{{"instances", inst}, {"client pods", pods}} {
		if got := c.m.Metrics[results.MetricP99Ms]; got != wantP99 {
			t.Errorf("%s: merged p99 %v ms, want %v (the union's; not the worst part's 50)", c.name, got, wantP99)
		}
		if got := c.m.Metrics[results.MetricErrorRate]; math.Abs(got-wantErr) > 1e-12 {
			t.Errorf("%s: merged error rate %v, want %v (failed of all requests; not the parts' mean 0.05)", c.name, got, wantErr)
		}
		if got := c.m.Metrics[results.MetricThroughput]; math.Abs(got-90.1) > 1e-9 {
			t.Errorf("%s: throughput %v, want the sum 90.1", c.name, got)
		}
	}
}

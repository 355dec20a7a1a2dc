package results

import (
	"math"
	"strings"
	"testing"
	"time"
)

func encodedHist(t *testing.T, us ...int64) string {
	t.Helper()
	h := NewHistogram()
	for _, v := range us {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOperationMerger(t *testing.T) {
	tests := []struct {
		desc  string
		gens  []map[string]*Operation
		check func(t *testing.T, ops map[string]*Operation)
	}{
		{
			desc: "nothing added is no operation",
			check: func(t *testing.T, ops map[string]*Operation) {
				if len(ops) != 0 {
					t.Errorf("operations %v", ops)
				}
			},
		},
		{
			desc: "histograms of one label merge: quantiles of every request of every generator",
			gens: []map[string]*Operation{
				{"get": {Count: 2, Bytes: 10, Errors: map[string]int64{"timeout": 1}, Histogram: encodedHist(t, 1000, 2000)}},
				{"get": {Count: 1, Bytes: 5, Histogram: encodedHist(t, 9000)}},
			},
			check: func(t *testing.T, ops map[string]*Operation) {
				get := ops["get"]
				h, err := DecodeHistogram(get.Histogram)
				if err != nil {
					t.Fatal(err)
				}
				if get.Count != 3 || get.Bytes != 15 || get.Errors["timeout"] != 1 || h.TotalCount() != 3 || h.Max() < 8900 || get.MeanMs != 0 {
					t.Errorf("get %+v, histogram of %d, max %d", get, h.TotalCount(), h.Max())
				}
			},
		},
		{
			desc: "a tool's percentiles: the worst generator's, the mean weighted by count",
			gens: []map[string]*Operation{
				{"write": {Count: 10, PercentilesMs: map[string]float64{"99": 4, "50": 1}, MeanMs: 1}},
				{"write": {Count: 30, PercentilesMs: map[string]float64{"99": 3, "50": 2}, MeanMs: 2}},
			},
			check: func(t *testing.T, ops map[string]*Operation) {
				w := ops["write"]
				if w.Count != 40 || w.PercentilesMs["99"] != 4 || w.PercentilesMs["50"] != 2 || math.Abs(w.MeanMs-70.0/40) > 1e-9 || w.Histogram != "" {
					t.Errorf("write %+v", w)
				}
			},
		},
		{
			desc: "labels of different generators stay apart (noisy's tenants)",
			gens: []map[string]*Operation{
				{"tenant-1": {Count: 4, Histogram: encodedHist(t, int64(time.Millisecond/time.Microsecond))}},
				{"tenant-2": {Count: 6}},
			},
			check: func(t *testing.T, ops map[string]*Operation) {
				if len(ops) != 2 || ops["tenant-1"].Count != 4 || ops["tenant-1"].Histogram == "" || ops["tenant-2"].Count != 6 || ops["tenant-2"].Histogram != "" {
					t.Errorf("operations %+v", ops)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var m OperationMerger
			for _, g := range tc.gens {
				if err := m.Add(g); err != nil {
					t.Fatal(err)
				}
			}
			ops, err := m.Operations()
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, ops)
		})
	}
}

func TestOperationMergerRefusesABrokenHistogram(t *testing.T) {
	var m OperationMerger
	err := m.Add(map[string]*Operation{"get": {Count: 1, Histogram: "not base64!"}})
	if err == nil {
		t.Fatal("a broken histogram merged")
	}
	if want := "operation get: decode histogram"; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %q does not name the operation", err)
	}
}

func TestLoadStatsMerge(t *testing.T) {
	a := &LoadStats{TargetRate: 10, AchievedRate: 9, Late: 1, LatenessP99Ms: 2, LatenessMaxMs: 7, LatenessP50Ms: 1}
	b := &LoadStats{TargetRate: 20, AchievedRate: 19, Late: 3, LatenessP99Ms: 5, LatenessMaxMs: 6, LatenessP50Ms: 4}
	tests := []struct {
		desc  string
		merge func(l *LoadStats)
		want  LoadStats
	}{
		{"rates and late starts add up", func(l *LoadStats) { l.AddRates(a); l.AddRates(b) },
			LoadStats{TargetRate: 30, AchievedRate: 28, Late: 4}},
		{"the worst p99 and max lateness, p50 left to the caller", func(l *LoadStats) { l.KeepWorstLateness(a); l.KeepWorstLateness(b) },
			LoadStats{LatenessP99Ms: 5, LatenessMaxMs: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var l LoadStats
			tc.merge(&l)
			if l != tc.want {
				t.Errorf("merged %+v, want %+v", l, tc.want)
			}
		})
	}
}

// TestMergeSideBySide: each metric merges by its declared kind, never by
// its name; a metric that declares none is left out of the merged figures
// with a note and kept as each part's.
func TestMergeSideBySide(t *testing.T) {
	part := func(k int, m string) string { return "part_" + string(rune('0'+k)) + "_" + m }
	a := &Measurement{DurationS: 10, Operations: map[string]*Operation{"get": {Count: 30}},
		Metrics: map[string]float64{MetricThroughput: 3, MetricErrorRate: 0.3, MetricElapsed: 10, MetricP99Ms: 7,
			"server_queue_full": 5, "made_up_per_s": 1, "wall_min_s": 2},
		Declared: map[string]MetricInfo{"server_queue_full": {Merge: MergeTarget}}}
	b := &Measurement{DurationS: 12, Operations: map[string]*Operation{"get": {Count: 10}},
		Metrics: map[string]float64{MetricThroughput: 1, MetricErrorRate: 0.1, MetricElapsed: 12, MetricP99Ms: 9,
			"server_queue_full": 6, "made_up_per_s": 2, "wall_min_s": 1},
		Declared: map[string]MetricInfo{"server_queue_full": {Merge: MergeTarget}}}
	tests := []struct {
		desc   string
		shared bool
		want   map[string]float64
	}{
		{"one target each", false, map[string]float64{MetricThroughput: 4, MetricErrorRate: (0.3*30 + 0.1*10) / 40, MetricElapsed: 12,
			MetricP99Ms: 9, "server_queue_full": 11, "wall_min_s": 1, part(1, "made_up_per_s"): 1, part(2, "made_up_per_s"): 2}},
		{"one shared target", true, map[string]float64{MetricThroughput: 4, MetricErrorRate: (0.3*30 + 0.1*10) / 40, MetricElapsed: 12,
			MetricP99Ms: 9, "server_queue_full": 6, "wall_min_s": 1, part(1, "made_up_per_s"): 1, part(2, "made_up_per_s"): 2}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := MergeSideBySide([]*Measurement{a, b}, SideBySide{Part: "part", PartMetric: part, SharedTarget: tc.shared})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got, ok := m.Metrics[name]; !ok || math.Abs(got-want) > 1e-12 {
					t.Errorf("%s = %v (%v), want %v", name, got, ok, want)
				}
			}
			if _, ok := m.Metrics["made_up_per_s"]; ok {
				t.Error("a metric of no declared merge was merged (by its name?)")
			}
			var noted, noHist bool
			for _, n := range m.Notes {
				noted = noted || strings.Contains(n, "made_up_per_s declares no merge")
				noHist = noHist || strings.Contains(n, "p99_ms without histograms")
			}
			if !noted || !noHist {
				t.Errorf("notes %q: want the undeclared metric and the latency without histograms named", m.Notes)
			}
		})
	}
	if _, err := MergeSideBySide([]*Measurement{a, nil}, SideBySide{Part: "part", PartMetric: part}); err == nil || !strings.Contains(err.Error(), "part 2 of 2") {
		t.Errorf("a missing measurement: %v", err)
	}
}

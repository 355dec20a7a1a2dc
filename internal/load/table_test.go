package load

import (
	"bytes"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

func histOf(t *testing.T, us ...int64) string {
	t.Helper()
	h := results.NewHistogram()
	for _, v := range us {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := results.EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAggregateRows(t *testing.T) {
	m := &results.Measurement{
		DurationS: 10,
		Operations: map[string]*results.Operation{
			"login page": {Count: 4, Bytes: 4096, Histogram: histOf(t, 1000, 2000, 3000, 10000)},
			"login":      {Count: 2, Errors: map[string]int64{KindHTTP5xx: 1}, Bytes: 1024, Histogram: histOf(t, 5000, 5000)},
			"fio/read":   {Count: 100, PercentilesMs: map[string]float64{"50": 0.2, "90": 0.4, "95": 0.9, "99": 1.5, "min": 0.1, "max": 3}, MeanMs: 0.25},
		},
	}
	rows, err := AggregateRows(m, []string{"login page", "login"})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range rows {
		labels = append(labels, r.Label)
	}
	if got := strings.Join(labels, "|"); got != "login page|login|fio/read|TOTAL" {
		t.Fatalf("row order %s: asked order first, the rest sorted, TOTAL last", got)
	}
	tests := []struct {
		desc string
		got  float64
		want float64
	}{
		{"mean of the login page", rows[0].MeanMs, 4},
		{"median of the login page (hdr picks the upper sample)", rows[0].MedianMs, 2},
		{"max of the login page", rows[0].MaxMs, 10},
		{"error % of login", rows[1].ErrorPct, 50},
		{"throughput of the login page per second of the window", rows[0].ThroughputPerS, 0.4},
		{"KB/s of the login page", rows[0].KBPerS, 0.4},
		{"percentiles taken from a wrapped tool", rows[2].P99Ms, 1.5},
		{"p95 taken from a wrapped tool", rows[2].P95Ms, 0.9},
		{"total samples", float64(rows[3].Samples), 106},
		{"total error %", rows[3].ErrorPct, 100.0 / 106},
		{"total max over the merged histograms", rows[3].MaxMs, 10},
		{"p95 of the login page", rows[0].P95Ms, 10},
		{"p99.9 of login", rows[1].P999Ms, 5},
		{"p99.9 from a wrapped tool that did not report it", rows[2].P999Ms, 0},
		{"errors of login", float64(rows[1].Errors), 1},
		{"total errors", float64(rows[3].Errors), 1},
	}
	for _, tc := range tests {
		if !nearPct(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.desc, tc.got, tc.want)
		}
	}
}

// nearPct allows the HdrHistogram's 3-significant-digit rounding.
func nearPct(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 0.002*b+1e-9
}

func TestWriteAggregateTable(t *testing.T) {
	m := &results.Measurement{
		DurationS:  60,
		Operations: map[string]*results.Operation{"GET /": {Count: 120, Errors: map[string]int64{KindTimeout: 3}, Histogram: histOf(t, 1500, 2500)}},
		Metrics:    map[string]float64{"throughput_per_s": 1.95},
		Load:       &results.LoadStats{Mode: "open", TargetRate: 2, AchievedRate: 1.9, Late: 6, CPUSeconds: 0.6, CPUSet: "1", LatenessP50Ms: 0.05, LatenessP99Ms: 1.25, LatenessMaxMs: 7.5},
		Notes:      []string{"something to know"},
	}
	var b bytes.Buffer
	if err := WriteAggregateTable(&b, m, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"label", "samples", "median", "90%", "99%", "error %", "throughput/s", "KB/s",
		"GET /", "120", "2.50", "target 2.0 sessions/s, achieved 1.9/s", "late 6", "1.0% of one core", "CPUs 1", "p99 1.25, max 7.50 ms", "note: something to know"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, TotalLabel) {
		t.Errorf("a single operation needs no TOTAL row:\n%s", out)
	}
}

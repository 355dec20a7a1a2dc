package bench

import (
	"math"
	"testing"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

func TestSummaryRows(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	ok := func(cfg string, tput float64) results.RunRecord {
		return results.RunRecord{Plan: "unit", Config: cfg, Status: results.StatusOK,
			Result: &results.Measurement{Metrics: map[string]float64{"throughput_per_s": tput}}}
	}
	recs := []results.RunRecord{
		ok("bare", 100), ok("bare", 120), ok("bare", 110),
		ok("published", 50), ok("published", 60),
		{Plan: "unit", Config: "published", Status: results.StatusFailed},
		{Plan: "unit", Config: "btrfs", Status: results.StatusNotRun},
		ok("bare", 1e9), // another plan's record must not count
	}
	recs[len(recs)-1].Plan = "other"
	rows := SummaryRows(p, recs)
	if len(rows) != 4 || rows[0].Config != "bare" || !rows[0].Baseline {
		t.Fatalf("rows %+v", rows)
	}
	if rows[0].OK != 3 || rows[0].MedianThroughput != 110 || rows[0].Ratio != 1 {
		t.Errorf("bare row %+v", rows[0])
	}
	if rows[1].OK != 2 || rows[1].Failed != 1 || rows[1].MedianThroughput != 55 || math.Abs(rows[1].Ratio-0.5) > 1e-12 {
		t.Errorf("published row %+v", rows[1])
	}
	if rows[2].NotRun != 1 || !math.IsNaN(rows[2].MedianThroughput) || !math.IsNaN(rows[2].Ratio) {
		t.Errorf("btrfs row %+v", rows[2])
	}
}

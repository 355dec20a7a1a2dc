package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
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

func TestPlanWarnings(t *testing.T) {
	full := parsePlan(t, planYAML, plan.Options{})
	one := parsePlan(t, strings.Replace(planYAML, "repetitions: 2", "repetitions: 1", 1), plan.Options{})
	three := parsePlan(t, strings.Replace(planYAML, "repetitions: 2", "repetitions: 3", 1), plan.Options{})
	tests := []struct {
		desc  string
		p     *plan.Plan
		load1 float64
		want  []string
	}{
		{"quiet machine, enough repetitions", three, 0.2, nil},
		{"too few repetitions", one, 0.2, []string{"1 repetition(s) per configuration"}},
		{"two repetitions are still too few", full, 0, []string{"2 repetition(s)"}},
		{"busy machine", three, 1.5, []string{"the machine is busy before the plan starts (1-minute load 1.50 on 2 CPUs)"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := planWarnings(tt.p, tt.load1, 2)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
			}
		})
	}
}

func TestLoadavg(t *testing.T) {
	l, err := Loadavg(filepath.Join("testdata", "proc"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join("testdata", "proc", "loadavg"))
	if want := strings.Fields(string(b))[0]; fmt.Sprintf("%.2f", l) != want {
		t.Errorf("load %v, want %s", l, want)
	}
	if _, err := parseLoadavg(strings.NewReader("")); err == nil {
		t.Error("empty loadavg parsed")
	}
}

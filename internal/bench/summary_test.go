package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

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

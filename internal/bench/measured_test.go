package bench

import (
	"errors"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

// TestCheckMeasured: a plan that finished without a comparison (every run
// failed, or the baseline never succeeded) is an error, so that `bench
// run` exits 1 and a CI job fails.
func TestCheckMeasured(t *testing.T) {
	rec := func(config string, st results.Status) results.RunRecord {
		return results.RunRecord{Config: config, Status: st}
	}
	tests := []struct {
		desc string
		recs []results.RunRecord
		want string // "" for a plan with something to compare
	}{
		{"every run ok", []results.RunRecord{rec("bare", results.StatusOK), rec("ctr", results.StatusOK)}, ""},
		{"one ok run of each is enough", []results.RunRecord{rec("bare", results.StatusOK), rec("bare", results.StatusFailed), rec("ctr", results.StatusFailed), rec("ctr", results.StatusOK)}, ""},
		{"a configuration that cannot run here is data, not a failure", []results.RunRecord{rec("bare", results.StatusOK), rec("vm", results.StatusNotRun)}, ""},
		{"every run failed (an image not built yet)", []results.RunRecord{rec("bare", results.StatusFailed), rec("ctr", results.StatusFailed)},
			"none of the 2 runs succeeded (2 failed, 0 not run)"},
		{"nothing could run", []results.RunRecord{rec("bare", results.StatusNotRun)}, "none of the 1 runs succeeded (0 failed, 1 not run)"},
		{"no records at all", nil, "none of the 0 runs succeeded"},
		{"the baseline never succeeded", []results.RunRecord{rec("bare", results.StatusFailed), rec("ctr", results.StatusOK), rec("bare", results.StatusFailed)},
			"none of its 2 runs (bare) succeeded"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := CheckMeasured(tc.recs, "bare")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !errors.Is(err, ErrNothingMeasured) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrNothingMeasured saying %q", err, tc.want)
			}
		})
	}
}

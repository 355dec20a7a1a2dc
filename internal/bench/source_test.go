package bench

import (
	"os"
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

func TestOpenPlan(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	mine := "name: mine\nworkload: web\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\nquick:\n  repetitions: 1\n"
	if err := os.WriteFile("smoke.yaml", []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg         string
		wantName    string // plan name, "" for an error
		wantBuiltin string
		wantShadows bool
		wantErr     string
	}{
		{"smoke", "smoke", "smoke", false, ""},
		{"smoke.yaml", "mine", "", true, ""}, // the file wins
		{"./smoke.yaml", "mine", "", true, ""},
		{"plans/smoke.yaml", "smoke", "smoke", false, ""}, // the repository's path, from anywhere
		{"noisy-neighbour-2hot", "noisy-neighbour-2hot", "noisy-neighbour-2hot", false, ""},
		{"sub/smoke.yaml", "", "", false, "nor is it a built-in plan"},
		{"nope", "", "", false, "ctrperf plans list"},
		{"sub", "", "", false, "read plan"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			p, src, err := OpenPlan(tc.arg, plan.Options{Quick: true})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.wantName || src.Builtin != tc.wantBuiltin || src.Shadows != tc.wantShadows {
				t.Errorf("plan %q from %+v, want plan %q, builtin %q, shadows %v", p.Name, src, tc.wantName, tc.wantBuiltin, tc.wantShadows)
			}
			if tc.wantBuiltin == "" && src.Path != tc.arg {
				t.Errorf("source path %q, want %q", src.Path, tc.arg)
			}
			if s := src.String(); !strings.Contains(s, tc.arg) && !strings.Contains(s, tc.wantBuiltin) {
				t.Errorf("source %q names neither the argument nor the plan", s)
			}
		})
	}
}

// TestOpenPlanErrorsNameTheBuiltin: a problem in a built-in plan (here an
// unknown configuration for --only) is reported against its name.
func TestOpenPlanErrorsNameTheBuiltin(t *testing.T) {
	t.Chdir(t.TempDir())
	_, _, err := OpenPlan("smoke", plan.Options{Only: []string{"no-such-config"}})
	if err == nil || !strings.Contains(err.Error(), "built-in:smoke.yaml") {
		t.Fatalf("err = %v, want one naming built-in:smoke.yaml", err)
	}
}

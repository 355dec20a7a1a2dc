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
	// Files named like built-in plans, without a suffix: whoever can
	// write the working directory must not choose what `bench run smoke`
	// runs.
	shadow := strings.Replace(mine, "name: mine", "name: shadow", 1)
	for _, f := range []string{"smoke", "mine", "sub/smoke.yml"} {
		if err := os.MkdirAll("sub", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(shadow), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		desc        string
		arg         string
		wantName    string // plan name, "" for an error
		wantBuiltin string
		wantShadows bool
		wantErr     string
	}{
		{"a bare name is the built-in plan, never the file of that name here", "smoke", "smoke", "smoke", false, ""},
		{"a path names the file", "./smoke", "shadow", "", true, ""},
		{"a .yaml name is a file when it exists", "smoke.yaml", "mine", "", true, ""},
		{"a path with a .yaml suffix", "./smoke.yaml", "mine", "", true, ""},
		{"a .yml suffix is a file too", "sub/smoke.yml", "shadow", "", false, ""},
		{"the repository's path of a built-in plan, from anywhere", "plans/smoke.yaml", "smoke", "smoke", false, ""},
		{"another built-in plan by name", "noisy-neighbour-2hot", "noisy-neighbour-2hot", "noisy-neighbour-2hot", false, ""},
		{"a missing path that names no built-in plan", "sub/smoke.yaml", "", "", false, "nor is it a built-in plan"},
		{"an unknown bare name", "nope", "", "", false, "ctrperf plans list"},
		{"a bare name that is only a file here says how to name it", "mine", "", "", false, "name it as a path: ./mine"},
		{"a directory given as a path", "sub/", "", "", false, "read plan"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
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

// TestOpenPlanSmokeRepositoryFile: plans/smoke.yaml is the file when the
// working directory is the source tree (an edited copy is run), the
// built-in plan elsewhere.
func TestOpenPlanSmokeRepositoryFile(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("plans", 0o755); err != nil {
		t.Fatal(err)
	}
	edited := "name: edited\nworkload: web\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n"
	if err := os.WriteFile("plans/smoke.yaml", []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	p, src, err := OpenPlan("plans/smoke.yaml", plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "edited" || src.Path != "plans/smoke.yaml" || !src.Shadows {
		t.Errorf("plan %q from %+v, want the file plans/smoke.yaml", p.Name, src)
	}
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/exitcode"
)

// TestBenchValidateRefusesHostilePlans: the plans of issue 24's table
// that `bench validate` accepted (a NaN or vanishing rate) or died on (out
// of memory) are refused with the line that asks for them, exit status 1,
// within a second.
func TestBenchValidateRefusesHostilePlans(t *testing.T) {
	head := "name: h\nworkload: web\nbaseline: bare\n"
	configs := "configurations:\n  - name: bare\n    runtime: host\n"
	var axes strings.Builder
	for i := range 40 {
		fmt.Fprintf(&axes, "  app.k%d: [1, 2]\n", i)
	}
	tests := []struct {
		desc string
		yaml string
		want string // in stderr, after the file name
	}{
		{"a NaN rate", head + "load: {rate: .nan}\n" + configs, ":4: configurations[0] (bare): configuration \"bare\": workload web: load.rate = NaN: want a finite number"},
		{"an infinite rate", head + "load: {rate: .inf}\n" + configs, ":4: configurations[0] (bare): configuration \"bare\": workload web: load.rate = +Inf: want a finite number"},
		{"a rate below the floor", head + "load: {rate: 1e-11}\n" + configs, ":4: configurations[0] (bare): configuration \"bare\": workload web: load.rate = 1e-11: want between 0.001 and 1e+07"},
		{"a hundred million repetitions", head + "repetitions: 100000000\n" + configs, ":4: repetitions: 100000000: expected at most 100000"},
		{"40 two-valued axes", head + "matrix:\n  base: {runtime: host}\n" + axes.String(), ":5: matrix: 2 × 2 × 2"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "plan.yaml")
			if err := os.WriteFile(file, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			root := newRootCmd()
			root.SetArgs([]string{"bench", "validate", file})
			root.SetOut(&out)
			root.SetErr(&errb)
			start := time.Now()
			err := root.Execute()
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %s, want the refusal within a second", d)
			}
			if code := exitcode.Of(err); code != exitcode.Failure {
				t.Fatalf("exit %d (%v), want 1\nstdout: %s\nstderr: %s", code, err, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), file+tt.want) {
				t.Errorf("stderr lacks %q:\n%s", file+tt.want, errb.String())
			}
		})
	}
}

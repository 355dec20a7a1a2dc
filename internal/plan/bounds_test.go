package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestParseBoundsPlanSize: a plan whose runs or matrix would not fit in
// memory is refused at the line that asks for it, quickly, before the
// matrix is multiplied out or the run order built (both used to die with
// "fatal error: out of memory").
func TestParseBoundsPlanSize(t *testing.T) {
	head := "name: big\nworkload: testweb\nbaseline: a\n"
	explicit := "configurations:\n  - name: a\n    runtime: host\n  - name: b\n    runtime: host\n"
	var axes strings.Builder
	for i := range 40 {
		fmt.Fprintf(&axes, "  app.k%d: [0, 1]\n", i)
	}
	tests := []struct {
		desc  string
		src   string
		quick bool
		want  string // "" for a valid plan
	}{
		{"a hundred million repetitions", head + "repetitions: 100000000\n" + explicit,
			false, "big.yaml:4: repetitions: 100000000: expected at most 100000"},
		{"repetitions that fit alone but not times the configurations", head + "repetitions: 60000\n" + explicit,
			false, "big.yaml:4: repetitions: 2 configurations × 60000 repetitions = 120000 runs; expected at most 100000"},
		{"the quick variant's repetitions", head + explicit + "quick:\n  repetitions: 90000\n",
			true, "big.yaml:10: repetitions: 2 configurations × 90000 repetitions = 180000 runs"},
		{"quick repetitions beyond the bound, even without --quick", head + explicit + "quick:\n  repetitions: 1000000000\n",
			false, "big.yaml:10: quick.repetitions: 1000000000: expected at most 100000"},
		{"the bound itself", head + "repetitions: 50000\n" + explicit, false, ""},
		{"40 two-valued axes (1 KB of YAML)", head + "matrix:\n  base: {runtime: host}\n" + axes.String(),
			false, "big.yaml:5: matrix: 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 × 2 = 1099511627776 combinations; expected at most 10000"},
		{"a matrix within the entry bound, too many runs", strings.Replace(head, "baseline: a", "baseline: host-k0=0-k1=0-k2=0-k3=0-k4=0-k5=0-k6=0-k7=0-k8=0-k9=0", 1) +
			"repetitions: 100\nmatrix:\n  base: {runtime: host}\n" + strings.Join(strings.SplitAfter(axes.String(), "\n")[:10], ""),
			false, "big.yaml:4: repetitions: 1024 configurations × 100 repetitions = 102400 runs"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			start := time.Now()
			p, err := Parse("big.yaml", []byte(tt.src), Options{Schema: testSchema{}, Quick: tt.quick})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n := len(p.Runs()); n != len(p.Configurations)*p.Repetitions {
					t.Errorf("%d runs", n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%v\nwant one containing\n%s", err, tt.want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %s; a refusal must be quick", d)
			}
		})
	}
}

package bench

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files of shipped plans")

// Every plan shipped in plans/ validates with the real workloads, in full
// and quick form, and `ctrperf bench validate` prints exactly what its
// golden file holds: a change to the plan schema or to a workload's knobs
// that changes what a shipped plan means shows up here.
func TestShippedPlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "plans", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no plans found in plans/")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			p, err := LoadPlan(f, plan.Options{})
			if err != nil {
				t.Fatalf("full plan:\n%v", err)
			}
			var out bytes.Buffer
			if err := p.Describe(&out); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "validate", name+".txt")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestShippedPlans -update to create it)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("bench validate %s differs from %s:\n got:\n%s\nwant:\n%s", f, golden, out.String(), want)
			}
			if p.Quick != nil {
				if _, err := LoadPlan(f, plan.Options{Quick: true}); err != nil {
					t.Errorf("quick variant:\n%v", err)
				}
			}
		})
	}
}

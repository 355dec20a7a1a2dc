package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

// isolateEveryKey is a plan that sets every isolate key a plan could set
// before the isolate parameters had one struct (issue 25), to values that
// are not the defaults: its canonical form must not change either.
const isolateEveryKey = `name: iso-keys
workload: noisy
baseline: "off"
configurations:
  - name: "off"
    runtime: docker
    network: container-ip
    isolate: {policy: "off"}
  - name: all
    runtime: docker
    network: container-ip
    isolate:
      rps: true
      irq: true
      stall_threshold: 0.05
      stall_gate: true
      demote: true
      min_shared: 1
      cpus_per_container: 2
      cool_threshold: 0.25
      hot_threshold: 0.75
      cool_after: 7
      hot_after: 3
      interval: 0.5s
      policy: strict
matrix:
  base: {runtime: docker, network: container-ip, isolate: {interval: 2s, hot_threshold: 0.6}}
  isolate.policy: [paper, shield]
  isolate.demote: [true, false]
  name: "m-{isolate.policy}-{isolate.demote}"
`

// The hash of a plan (what --resume compares with OUT/plan.yaml) stays
// the same for every shipped plan, in full and quick form, and for a plan
// that sets every isolate key: a refactor of how knobs are decoded must
// not make existing result directories unresumable. The golden file was
// written by the code before the isolate parameters became one struct.
func TestPlanHashesStable(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "plans", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plans found in plans/ (%v)", err)
	}
	type source struct{ name, file string }
	var sources []source
	for _, f := range files {
		sources = append(sources, source{strings.TrimSuffix(filepath.Base(f), ".yaml"), f})
	}
	dir := t.TempDir()
	synthetic := filepath.Join(dir, "iso-keys.yaml")
	if err := os.WriteFile(synthetic, []byte(isolateEveryKey), 0o644); err != nil {
		t.Fatal(err)
	}
	sources = append(sources, source{"isolate-every-key", synthetic})
	var got strings.Builder
	for _, s := range sources {
		for _, quick := range []bool{false, true} {
			p, err := LoadPlan(s.file, plan.Options{Quick: quick})
			if err != nil {
				if quick {
					continue // no quick: section
				}
				t.Fatalf("%s: %v", s.name, err)
			}
			p.Dir = "/plans" // base_dir is absolute: keep the golden file independent of the checkout
			h, err := p.Hash()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&got, "%s quick=%v %s\n", s.name, quick, h)
		}
	}
	golden := filepath.Join("testdata", "plan-hashes.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestPlanHashesStable -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("plan hashes changed (a result directory of these plans could not be resumed):\n got:\n%s\nwant:\n%s", got.String(), want)
	}
}

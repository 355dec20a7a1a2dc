package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// FuzzParsePlan feeds arbitrary bytes to the plan decoder with the real
// workload schema (every registered workload decodes its own knobs), then
// does what bench run does with an accepted plan before any engine is
// touched: expand the run order, take each configuration's knobs and encode
// a record of it. None of it may panic, run out of memory or produce a
// record that does not decode again. Seed corpus: the shipped plans (added
// here) and testdata/fuzz/FuzzParsePlan.
func FuzzParsePlan(f *testing.F) {
	shipped, _ := filepath.Glob("../../plans/*.yaml")
	examples, _ := filepath.Glob("../../examples/*/plan.yaml")
	for _, p := range append(shipped, examples...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	// The hostile plans of issue 24: each crashed or hung a root run.
	f.Add([]byte("name: x\nworkload: web\nrepetitions: 100000000\nconfigurations:\n  - {name: a, runtime: host}\n"))
	f.Add([]byte("name: x\nworkload: kv\nload: {rate: .nan}\nconfigurations:\n  - {name: a, runtime: host}\n"))
	axes := "name: x\nworkload: web\nmatrix:\n"
	for i := range 40 {
		axes += fmt.Sprintf("  app.k%d: [1, 2]\n", i)
	}
	f.Add([]byte(axes))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opt := range []plan.Options{{}, {Quick: true}} {
			p, err := ParsePlan("fuzz.yaml", data, opt)
			if err != nil {
				continue
			}
			runs := p.Runs()
			if want := len(p.Configurations) * p.Repetitions; len(runs) != want {
				t.Fatalf("%d runs for %d configurations × %d repetitions", len(runs), len(p.Configurations), p.Repetitions)
			}
			for i := range p.Configurations {
				c := &p.Configurations[i]
				rec := results.RunRecord{Plan: p.Name, RunID: "fuzz", Config: c.Name, Knobs: c.KnobMap(),
					Workload: p.Workload, Status: results.StatusNotRun}
				b, err := json.Marshal(rec)
				if err != nil {
					t.Fatalf("record of configuration %q does not encode: %v", c.Name, err)
				}
				back, err := results.Read(bytes.NewReader(append(b, '\n')))
				if err != nil || len(back) != 1 || back[0].Config != c.Name {
					t.Fatalf("record of configuration %q does not read back (%v): %s", c.Name, err, b)
				}
			}
		}
	})
}

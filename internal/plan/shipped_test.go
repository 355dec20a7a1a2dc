package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"ctrperf/internal/workload"
)

// Every plan shipped in plans/ must validate, in full and quick form, as
// soon as its workload is registered in this build.
func TestShippedPlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "plans", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no plans found in plans/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				Workload string `yaml:"workload"`
				Quick    any    `yaml:"quick"`
			}
			if err := yaml.Unmarshal(b, &head); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if _, err := workload.Get(head.Workload); err != nil {
				// Check everything but the workload's own knobs against the
				// test workload until the real one registers.
				t.Logf("workload %q is not registered in this build yet; checking the plan's schema with testweb", head.Workload)
				b = bytes.Replace(b, []byte("workload: "+head.Workload), []byte("workload: testweb"), 1)
			}
			if _, err := Parse(f, b, Options{}); err != nil {
				t.Errorf("full plan:\n%v", err)
			}
			if head.Quick != nil {
				if _, err := Parse(f, b, Options{Quick: true}); err != nil {
					t.Errorf("quick variant:\n%v", err)
				}
			}
		})
	}
}

package workload

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkloadLinksNoController: a workload sets isolate's opt-in label
// (labels.Isolate) without linking the controller and its Prometheus
// client.
func TestWorkloadLinksNoController(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the package's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, tc := range []struct {
		desc, prefix string
	}{
		{"the isolate controller", "ctrperf/internal/isolate"},
		{"the Prometheus client the controller exports metrics with", "github.com/prometheus/client_golang"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, d := range deps {
				if d == tc.prefix || strings.HasPrefix(d, tc.prefix+"/") {
					t.Errorf("workload links %s (%s)", d, tc.desc)
				}
			}
		})
	}
}

package bench

import (
	"strings"
	"testing"

	"ctrperf/internal/plan"
)

// kubernetes.client: pod is taken by a workload whose decoded load splits
// over generators (plan.SplitLoad: kv's and web's), refused for any other
// at its line: the plan asks the load, not the workload's name.
func TestClientPodsAskTheLoad(t *testing.T) {
	const head = "workload: %s\nbaseline: base\nconfigurations:\n  - {name: base, runtime: host}\n  - name: k\n    runtime: kubernetes\n    kubernetes: {client: pod}\n"
	for _, tc := range []struct {
		workload string
		ok       bool
	}{{"kv", true}, {"web", true}, {"cpu", false}, {"fileio", false}} {
		src := "name: p\n" + strings.Replace(head, "%s", tc.workload, 1)
		_, err := ParsePlan("p.yaml", []byte(src), plan.Options{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.workload, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "p.yaml:8") || !strings.Contains(err.Error(), "cannot run in a generator pod")):
			t.Errorf("%s: err = %v, want a refusal at line 8", tc.workload, err)
		}
	}
}

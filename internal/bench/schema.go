package bench

import (
	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
	"ctrperf/internal/workload"
)

// Schema is the plan.Schema of a run: the registered workloads decode their
// own knobs, and the isolate controller checks its parameters. Every plan
// that is run or validated is read with it.
type Schema struct{}

var _ plan.Schema = Schema{}

// Workloads implements plan.Schema.
func (Schema) Workloads() []string { return workload.Names() }

// DecodeKnobs implements plan.Schema.
func (Schema) DecodeKnobs(name string, c *plan.Configuration) (plan.WorkloadKnobs, error) {
	w, err := workload.Get(name)
	if err != nil {
		return plan.WorkloadKnobs{}, err
	}
	app, ld, err := w.Decode(workload.KnobsOf(c))
	return plan.WorkloadKnobs{App: app, Load: ld, UsesDir: workload.UsesDir(app) || workload.UsesDir(ld)}, err
}

// CheckIsolate implements plan.Schema.
func (Schema) CheckIsolate(s plan.IsolateSpec) error { return isolateParams(s).Validate() }

// isolateParams are the controller's policy parameters for a plan's spec.
func isolateParams(s plan.IsolateSpec) isolate.Params {
	return isolate.Params{Policy: isolate.Policy(s.Policy), CPUsPerContainer: s.CPUsPerContainer, MinShared: s.MinShared,
		HotThreshold: s.HotThreshold, CoolThreshold: s.CoolThreshold, HotAfter: s.HotAfter, CoolAfter: s.CoolAfter,
		Demote: s.Demote, StallGate: s.StallGate, StallThreshold: s.StallThreshold}
}

// LoadPlan reads and validates a plan file with the run's Schema.
func LoadPlan(path string, opt plan.Options) (*plan.Plan, error) {
	opt.Schema = Schema{}
	return plan.Load(path, opt)
}

// ParsePlan validates a plan with the run's Schema; file names it in errors.
func ParsePlan(file string, data []byte, opt plan.Options) (*plan.Plan, error) {
	opt.Schema = Schema{}
	return plan.Parse(file, data, opt)
}

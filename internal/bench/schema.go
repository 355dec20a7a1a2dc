package bench

import (
	"errors"

	"go.yaml.in/yaml/v3"

	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
	"ctrperf/internal/workload"
)

// Schema is the plan.Schema of a run: the registered workloads decode their
// own knobs, and the isolate controller's parameters decode its knob. Every plan
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

// IsolateKeys implements plan.Schema: the keys of isolate.Params.
func (Schema) IsolateKeys() (keys, policies []string) {
	for _, p := range isolate.Policies {
		policies = append(policies, string(p))
	}
	return isolate.ParamKeys(), policies
}

// DecodeIsolate implements plan.Schema: the knob decoded onto
// isolate.DefaultParams, except that IRQs and RPS are steered only when
// the plan asks (steering is machine-wide, beyond the run's containers),
// each problem as a plan.KnobError at its key.
func (Schema) DecodeIsolate(raw map[string]any) (any, *yaml.Node, error) {
	base := isolate.DefaultParams()
	base.IRQ, base.RPS = false, false
	p, err := isolate.DecodeParams(raw, base)
	if err != nil {
		var errs []error
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() { // DecodeParams joins *ParamErrors
			if pe := (*isolate.ParamError)(nil); errors.As(e, &pe) {
				e = &plan.KnobError{Knob: "isolate." + pe.Key, Err: pe.Err}
			}
			errs = append(errs, e)
		}
		return nil, nil, errors.Join(errs...)
	}
	canon, err := p.Node(func(key string) bool { _, set := raw[key]; return set })
	return p, canon, err
}

// isolateParams are the controller's parameters of a configuration whose
// controller is on (decoded when the plan was read).
func isolateParams(s plan.IsolateSpec) isolate.Params {
	p, _ := s.Params.(isolate.Params)
	return p
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

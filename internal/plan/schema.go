package plan

import (
	"errors"
	"strings"

	"gopkg.in/yaml.v3"
)

// Schema is what the plan's own schema leaves to the packages that run it:
// which workloads exist and what their app and load knobs mean, and which
// isolate parameters the controller accepts. The plan stays a leaf (it
// imports no workload, engine or controller); the runner injects a Schema
// (bench.Schema) so that a plan is decoded once, into typed values, when it
// is read.
//
// Parse with a nil Schema checks the plan's own schema only: enough to
// list, hash or report a plan, not to run it (Configuration.Decoded stays
// empty).
type Schema interface {
	// Workloads lists the registered workload names.
	Workloads() []string
	// DecodeKnobs decodes and checks one configuration's app and load knobs
	// (plan-level ones and the quick variant's already merged in) for the
	// named workload, with the configuration's other knobs at hand for
	// combined rules (e.g. a topology that needs a database). The error
	// lists every problem; a *KnobError among them names its knob so that
	// the plan can point at the line that set it.
	DecodeKnobs(workload string, c *Configuration) (WorkloadKnobs, error)
	// CheckIsolate checks the parameters of an isolate spec that is on.
	CheckIsolate(IsolateSpec) error
}

// WorkloadKnobs are a configuration's app and load knobs as its workload's
// typed values (e.g. workload.WebApp and workload.WebLoad), decoded once
// when the plan is read.
type WorkloadKnobs struct {
	App, Load any
	// UsesDir says the knobs name files relative to the plan's Dir (a
	// scenario, a Dockerfile context): the canonical plan then records
	// the directory as base_dir.
	UsesDir bool
}

// KnobError is a problem with one workload knob. Knob is its path in the
// configuration ("app.max_clients", "load.rate").
type KnobError struct {
	Knob string
	Err  error
}

func (e *KnobError) Error() string { return e.Err.Error() }
func (e *KnobError) Unwrap() error { return e.Err }

// leafErrors flattens errors.Join trees into their leaves, in order.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// knobNode finds the node that set the knob an error is about: the
// configuration's own, else the plan-level app:/load: or quick: one.
func knobNode(err error, c *Configuration, planNodes map[string]*yaml.Node) (*yaml.Node, bool) {
	var ke *KnobError
	if !errors.As(err, &ke) {
		return nil, false
	}
	// A nested knob ("app.sidecars[1].image") that no node was recorded
	// for (a default, a key that is missing) is shown at its parent's line.
	for knob := ke.Knob; knob != ""; knob = parentKnob(knob) {
		if n, found := c.nodes[knob]; found {
			return n, true
		}
		if n, found := planNodes[knob]; found {
			return n, true
		}
	}
	return nil, false
}

// parentKnob is the knob that contains a nested one: "app.ready" for
// "app.ready.path", "app.sidecars" for "app.sidecars[0]"; "" at the top.
func parentKnob(knob string) string {
	i := strings.LastIndexAny(knob, ".[")
	if i <= 0 {
		return ""
	}
	return knob[:i]
}

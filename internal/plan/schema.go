package plan

import (
	"errors"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Schema is what the plan's own schema leaves to the packages that run it:
// which workloads exist and what their app and load knobs mean, and what
// the isolate controller's parameters are. The plan stays a leaf (it
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
	// IsolateKeys lists the keys of an isolate: knob and the policies its
	// policy key names (besides the plan's own "off").
	IsolateKeys() (keys, policies []string)
	// DecodeIsolate decodes the isolate: knob of a configuration whose
	// controller is on (keys as written, values as YAML decoded them) into
	// the controller's parameters, and renders it as the canonical plan
	// spells it (a mapping). The error lists every problem; a *KnobError
	// among them names its knob ("isolate.hot_after") so that the plan can
	// point at the line that set it.
	DecodeIsolate(raw map[string]any) (params any, canonical *yaml.Node, err error)
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
	// The configuration's own node first, then the plan's; a path walked
	// to its end before one that stopped at a key not written there.
	for _, full := range []bool{true, false} {
		for _, nodes := range []map[string]*yaml.Node{c.nodes, planNodes} {
			if n, complete, found := nestedNode(nodes, ke.Knob); found && (complete || !full) {
				return n, true
			}
		}
	}
	// A nested knob ("app.sidecars[1].image") that no node was recorded
	// for (a default, a key that is missing) is shown at its parent's line.
	for knob := parentKnob(ke.Knob); knob != ""; knob = parentKnob(knob) {
		for _, nodes := range []map[string]*yaml.Node{c.nodes, planNodes} {
			if n, found := nodes[knob]; found {
				return n, true
			}
		}
	}
	return nil, false
}

// nestedNode finds the node of a knob path; for a path into a nested
// mapping ("load.search.slo.p99_ms") it walks down from the longest prefix
// that was set ("load.search") as far as the keys exist, so an error inside
// a nested knob points at its own line. complete says the walk reached the
// whole path.
func nestedNode(nodes map[string]*yaml.Node, knob string) (n *yaml.Node, complete, found bool) {
	if n, found := nodes[knob]; found {
		if k := nodes[knob+keySuffix]; k != nil && isBlock(n) {
			return k, true, true
		}
		return n, true, true
	}
	parts := strings.Split(knob, ".")
	for i := len(parts) - 1; i >= 1; i-- {
		n, found := nodes[strings.Join(parts[:i], ".")]
		if !found {
			continue
		}
		complete = true
		line := n
		if k := nodes[strings.Join(parts[:i], ".")+keySuffix]; k != nil && isBlock(n) {
			line = k
		}
		for _, key := range parts[i:] {
			keyN, child := mappingValue(deref(n), key)
			if child == nil {
				complete = false
				break
			}
			n, line = child, child
			if isBlock(child) {
				line = keyN
			}
		}
		return line, complete, true
	}
	return nil, false, false
}

// mappingValue is the key and value nodes of key in a mapping node, or nil.
func mappingValue(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// isBlock says a node is a block-style mapping or list, whose own line is
// that of its first entry.
func isBlock(n *yaml.Node) bool {
	n = deref(n)
	return n != nil && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle == 0
}

// SearchSpec is what the plan and the runner need to know of a capacity
// search (workload.Search, a workload's load.search): a run of such a
// configuration measures up to MaxSteps windows (warm-up + duration each)
// instead of one.
type SearchSpec struct {
	// Description is the search as bench validate shows it.
	Description string
	// MaxSteps bounds the windows measured; MaxTime the search's time (0:
	// MaxSteps only). A step is started only if it is expected to end
	// within MaxTime, so a search overruns MaxTime by at most one step.
	MaxSteps int
	MaxTime  time.Duration
	// StepSlack is how long one step may take beyond its window (the load
	// generator's drain of sessions still in flight).
	StepSlack time.Duration
}

// MaxDrive is the longest a run of the search may drive, for a plan's
// window (warm-up + duration).
func (s SearchSpec) MaxDrive(window time.Duration) time.Duration {
	step := window + s.StepSlack
	d := time.Duration(max(s.MaxSteps, 1)) * step
	if s.MaxTime > 0 {
		d = min(d, s.MaxTime+step)
	}
	return d
}

// Searching is implemented by a workload's decoded load
// (WorkloadKnobs.Load) that may ask for a capacity search.
type Searching interface {
	// CapacitySearch returns the search; ok is false when the load
	// measures one window at a fixed rate or concurrency.
	CapacitySearch() (s SearchSpec, ok bool)
}

// Search is the configuration's capacity search, when its decoded load
// asks for one.
func (c *Configuration) Search() (SearchSpec, bool) {
	if s, ok := c.Decoded.Load.(Searching); ok {
		return s.CapacitySearch()
	}
	return SearchSpec{}, false
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

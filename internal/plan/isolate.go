package plan

import (
	"fmt"
	"slices"
	"sort"

	"go.yaml.in/yaml/v3"
)

// IsolateSpec is a configuration's `isolate:` knob: whether the isolate
// controller (`ctrperf isolate`) runs during each run of the configuration,
// with which policy, and its optional tuning. The plan keeps the knob as
// written; the Schema decodes it into the controller's parameters
// (isolate.Params, where every key, default and range lives), as it does
// the app: and load: knobs. Keys left out take the controller's defaults.
//
//	isolate: {policy: strict, interval: 500ms, hot_after: 2, hot_threshold: 0.6}
type IsolateSpec struct {
	// Raw is the knob as written (a matrix's base and axes merged in).
	Raw map[string]any
	// Params are the controller's parameters (isolate.Params) decoded from
	// Raw; nil when the controller is off or the plan was read without a
	// Schema.
	Params any
	// canon is the knob as the canonical plan spells it (the Schema's);
	// nil: Raw as written.
	canon *yaml.Node
}

// IsolateOff is the policy that runs no controller, the plan's own; the
// other policies are the controller's (Schema.IsolateKeys).
const IsolateOff = "off"

// Policy is the policy the knob names ("" when it names none).
func (s IsolateSpec) Policy() string {
	p, _ := s.Raw["policy"].(string)
	return p
}

// On says whether the controller runs.
func (s IsolateSpec) On() bool { return s.Policy() != "" && s.Policy() != IsolateOff }

// isZero says nothing was set.
func (s IsolateSpec) isZero() bool { return len(s.Raw) == 0 }

// isolateKeys are the keys and policies the Schema knows (nil without a
// Schema: any key, any policy).
func (d *decoder) isolateKeys() (keys, policies []string) {
	if d.schema == nil {
		return nil, nil
	}
	keys, policies = d.schema.IsolateKeys()
	return keys, append([]string{IsolateOff}, policies...)
}

// setIsolate keeps one key of the isolate knob as written; the Schema
// decodes the whole knob once the configuration is complete
// (checkIsolate). An unknown key or policy is reported here, at its line,
// with a suggestion.
func (d *decoder) setIsolate(k *Knobs, key string, n *yaml.Node, field string) {
	keys, policies := d.isolateKeys()
	if keys != nil && !slices.Contains(keys, key) {
		d.unknownSub(n, field, key, keys)
		return
	}
	var v any
	switch {
	case key == "policy" && policies != nil:
		s, ok := d.enum(n, field, policies)
		if !ok {
			return
		}
		v = s
	case key == "policy":
		s, ok := d.str(n, field)
		if !ok {
			return
		}
		v = s
	default:
		if err := n.Decode(&v); err != nil {
			d.errorf(n, field, "cannot decode: %v", err)
			return
		}
	}
	if k.Isolate.Raw == nil {
		k.Isolate.Raw = map[string]any{}
	}
	k.Isolate.Raw[key] = v
	k.nodes["isolate."+key] = n
}

// checkIsolate catches an isolate knob that cannot work: the controller
// manages Docker containers (the host runtime has none), tuning without a
// policy would silently do nothing; then the Schema decodes it, each
// problem reported at the line of its key.
func (d *decoder) checkIsolate(c *Configuration) {
	s := c.Isolate
	if s.isZero() {
		return
	}
	field := func(k string) string { return join(c.Origin, k) }
	if !s.On() {
		var tuning []string
		for k := range s.Raw {
			if k != "policy" {
				tuning = append(tuning, k)
			}
		}
		sort.Strings(tuning)
		for _, k := range tuning {
			d.errorf(c.node("isolate."+k), field("isolate."+k), "has no effect without a controller; set isolate.policy to shield, paper or strict, or remove it")
		}
		return
	}
	if c.Runtime.Known() && !c.Runtime.Traits().Isolate {
		d.errorf(c.isolateNode("policy"), field("isolate.policy"), "%q needs runtime docker or kubernetes: the isolate controller manages containers or pods, and runtime %s has none (use isolate.policy off, or remove it)", s.Policy(), c.Runtime)
		return
	}
	if c.Runtime == RuntimeKubernetes && s.Raw["demote_class"] == "weight" {
		d.errorf(c.isolateNode("demote_class"), field("isolate.demote_class"), "weight is not for runtime kubernetes: kubelet sets the pods' and containers' weights from their requests, and the controller would fight it (use idle, the default)")
	}
	if d.schema == nil {
		return
	}
	params, canon, err := d.schema.DecodeIsolate(s.Raw)
	c.Isolate.Params, c.Isolate.canon = params, canon
	for _, e := range leafErrors(err) {
		n, ok := knobNode(e, c, nil)
		if !ok {
			n = c.isolateNode("policy")
		}
		knob := "isolate"
		if ke, isKnob := e.(*KnobError); isKnob {
			knob = ke.Knob
		}
		d.errorf(n, field(knob), "%v", e)
	}
}

// isolateNode is where isolate.key was set, else the isolate knob itself.
func (c *Configuration) isolateNode(key string) *yaml.Node {
	if n, ok := c.nodes["isolate."+key]; ok {
		return n
	}
	return c.node("isolate")
}

// canonicalIsolate is the isolate knob in the canonical plan: the
// Schema's rendering (keys in the parameters' order, values normalised,
// as the plan always spelled them), else the keys as written.
func canonicalIsolate(s IsolateSpec) *yaml.Node {
	if s.isZero() {
		return nil
	}
	if s.canon != nil {
		return s.canon
	}
	var n yaml.Node
	if err := n.Encode(s.Raw); err != nil {
		return nil // values decoded from YAML always encode
	}
	return &n
}

// describe is the spec for listings: "isolate=strict" or "isolate=off".
func (s IsolateSpec) describe() string {
	if s.Policy() == "" {
		return ""
	}
	return fmt.Sprintf("isolate=%s", s.Policy())
}

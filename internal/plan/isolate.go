package plan

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// IsolateSpec is a configuration's `isolate:` knob: whether the isolate
// controller (`ctrperf isolate`) runs during each run of the configuration,
// with which policy, and its optional tuning. Zero values take the
// controller's defaults.
//
//	isolate: {policy: strict, interval: 500ms, hot_after: 2, hot_threshold: 0.6}
type IsolateSpec struct {
	Policy           string // "" or "off": no controller; "shield", "paper" or "strict"
	Interval         time.Duration
	HotAfter         int
	CoolAfter        int
	HotThreshold     float64
	CoolThreshold    float64
	CPUsPerContainer int
	MinShared        int
	Demote           bool    // paper and strict also demote hot containers
	StallGate        bool    // demote only while another container stalls
	StallThreshold   float64 // with StallGate: the stall that counts
	IRQ              bool    // steer the network devices' IRQs onto the shared pool (the paper's §4.4)
	RPS              bool    // steer the managed containers' veth RPS onto the shared pool
}

// Isolate policies a plan may name (the controller's, internal/isolate);
// "off" runs no controller.
const (
	IsolateOff    = "off"
	IsolateShield = "shield"
	IsolatePaper  = "paper"
	IsolateStrict = "strict"
)

var (
	isolatePolicies = []string{IsolateOff, IsolateShield, IsolatePaper, IsolateStrict}
	isolateKeys     = []string{"policy", "interval", "hot_after", "cool_after", "hot_threshold", "cool_threshold", "cpus_per_container", "min_shared",
		"demote", "stall_gate", "stall_threshold", "irq", "rps"}
)

// On says whether the controller runs.
func (s IsolateSpec) On() bool { return s.Policy != "" && s.Policy != IsolateOff }

// isZero says nothing was set.
func (s IsolateSpec) isZero() bool { return s == IsolateSpec{} }

func (d *decoder) setIsolate(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["isolate."+key] = n
	s := &k.Isolate
	count := func(dst *int, lo, hi int64, what string) {
		if v, ok := d.integer(n, field); ok {
			if v < lo || v > hi {
				d.errorf(n, field, "%d: expected %s between %d and %d", v, what, lo, hi)
				return
			}
			*dst = int(v)
		}
	}
	flag := func(dst *bool) {
		if v, ok := d.boolean(n, field); ok {
			*dst = v
		}
	}
	fraction := func(dst *float64) {
		if v, ok := d.float(n, field); ok {
			if v <= 0 || v > 1.5 {
				d.errorf(n, field, "%g: expected a fraction of a container's CPUs in (0, 1.5], like 0.9", v)
				return
			}
			*dst = v
		}
	}
	switch key {
	case "policy":
		if v, ok := d.enum(n, field, isolatePolicies); ok {
			s.Policy = v
		}
	case "interval":
		if v, ok := d.duration(n, field); ok {
			if v < 10*time.Millisecond || v > time.Minute {
				d.errorf(n, field, "%s: expected a sampling interval between 10ms and 1m, like 1s", v)
				return
			}
			s.Interval = v
		}
	case "hot_after":
		count(&s.HotAfter, 1, 1000, "a number of saturated samples")
	case "cool_after":
		count(&s.CoolAfter, 1, 1000, "a number of calm samples")
	case "hot_threshold":
		fraction(&s.HotThreshold)
	case "cool_threshold":
		fraction(&s.CoolThreshold)
	case "cpus_per_container":
		count(&s.CPUsPerContainer, 1, 4096, "a number of CPUs")
	case "min_shared":
		count(&s.MinShared, 1, 4096, "a number of CPUs")
	case "demote":
		flag(&s.Demote)
	case "stall_gate":
		flag(&s.StallGate)
	case "stall_threshold":
		if v, ok := d.float(n, field); ok {
			if v <= 0 || v > 1 {
				d.errorf(n, field, "%g: expected a fraction of the interval in (0, 1], like 0.02", v)
				return
			}
			s.StallThreshold = v
		}
	case "irq":
		flag(&s.IRQ)
	case "rps":
		flag(&s.RPS)
	default:
		d.unknownSub(n, field, key, isolateKeys)
	}
}

// checkIsolate catches an isolate knob that cannot work: the controller
// manages Docker containers (the host runtime has none), tuning without a
// policy would silently do nothing, and parameters the policy refuses.
func (d *decoder) checkIsolate(c *Configuration) {
	s := c.Isolate
	if s.isZero() {
		return
	}
	field := func(k string) string { return join(c.Origin, k) }
	where := func(k string) *yaml.Node {
		if n, ok := c.nodes[k]; ok {
			return n
		}
		return c.node("isolate")
	}
	if !s.On() {
		for _, k := range isolateKeys[1:] {
			if n, ok := c.nodes["isolate."+k]; ok {
				d.errorf(n, field("isolate."+k), "has no effect without a controller; set isolate.policy to shield, paper or strict, or remove it")
			}
		}
		return
	}
	if c.Runtime.Known() && !c.Runtime.Traits().Isolate {
		d.errorf(where("isolate.policy"), field("isolate.policy"), "%q needs runtime docker: the isolate controller manages containers, and runtime %s has none (use isolate.policy off, or remove it)", s.Policy, c.Runtime)
		return
	}
	if d.schema == nil {
		return
	}
	if err := d.schema.CheckIsolate(s); err != nil {
		d.errorf(where("isolate.cool_threshold"), field("isolate"), "%v", err)
	}
}

// canonIsolate is the isolate knob in the canonical plan.
type canonIsolate struct {
	Policy           string  `yaml:"policy,omitempty"`
	Interval         string  `yaml:"interval,omitempty"`
	HotAfter         int     `yaml:"hot_after,omitempty"`
	CoolAfter        int     `yaml:"cool_after,omitempty"`
	HotThreshold     float64 `yaml:"hot_threshold,omitempty"`
	CoolThreshold    float64 `yaml:"cool_threshold,omitempty"`
	CPUsPerContainer int     `yaml:"cpus_per_container,omitempty"`
	MinShared        int     `yaml:"min_shared,omitempty"`
	Demote           bool    `yaml:"demote,omitempty"`
	StallGate        bool    `yaml:"stall_gate,omitempty"`
	StallThreshold   float64 `yaml:"stall_threshold,omitempty"`
	IRQ              bool    `yaml:"irq,omitempty"`
	RPS              bool    `yaml:"rps,omitempty"`
}

func canonicalIsolate(s IsolateSpec) *canonIsolate {
	if s.isZero() {
		return nil
	}
	c := &canonIsolate{Policy: s.Policy, HotAfter: s.HotAfter, CoolAfter: s.CoolAfter, HotThreshold: s.HotThreshold,
		CoolThreshold: s.CoolThreshold, CPUsPerContainer: s.CPUsPerContainer, MinShared: s.MinShared,
		Demote: s.Demote, StallGate: s.StallGate, StallThreshold: s.StallThreshold, IRQ: s.IRQ, RPS: s.RPS}
	if s.Interval != 0 {
		c.Interval = s.Interval.String()
	}
	return c
}

// describe is the spec for listings: "isolate=strict" or "isolate=off".
func (s IsolateSpec) describe() string {
	if s.Policy == "" {
		return ""
	}
	return fmt.Sprintf("isolate=%s", s.Policy)
}

package isolate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Params are every tunable of the controller, in one place: the YAML key
// (a plan's isolate: map and the `isolate run --config` file), the flag of
// `isolate run` (the key with dashes) and its help, the default
// (DefaultParams) and the range (Validate). A plan, the flags and the
// config file all decode onto this struct; adding a parameter is adding a
// field here (docs/ARCHITECTURE.md, "Add an isolate parameter").
//
// The field order is the order of the keys in the canonical plan: append
// new fields anywhere, but never reorder the old ones (it would change the
// hash of every plan that sets two of them).
type Params struct {
	Policy Policy `yaml:"policy" help:"what happens to a hot container: shield (demoted, keeps all CPUs), paper (normal ones pinned, hot released to all CPUs) or strict (hot confined to the shared pool)"`
	// Interval is how often usage is sampled and placements decided.
	Interval  time.Duration `yaml:"interval" help:"sampling interval"`
	HotAfter  int           `yaml:"hot_after" help:"consecutive saturated samples before a container turns hot"`
	CoolAfter int           `yaml:"cool_after" help:"consecutive calm samples before it turns normal again"`
	// HotThreshold: a container is saturated when it uses >= this fraction
	// of its entitlement (its CPU label, else online CPUs / managed
	// containers, at most the CPUs it is pinned to).
	HotThreshold     float64 `yaml:"hot_threshold" help:"fraction of its entitlement a container must use to count as saturated"`
	CoolThreshold    float64 `yaml:"cool_threshold" help:"fraction of its entitlement below which a hot container counts as calm"`
	CPUsPerContainer int     `yaml:"cpus_per_container" help:"dedicated CPUs per normal container (label ctrperf.isolate.cpus overrides)"`
	MinShared        int     `yaml:"min_shared" help:"CPUs always kept in the shared pool (rounded up to whole cores)"`
	// Demote makes paper and strict demote hot containers too (shield
	// always does).
	Demote bool `yaml:"demote" help:"paper and strict also demote hot containers (shield always does)"`
	// StallGate demotes a hot container only while another managed
	// container stalls for CPU: its cgroup's cpu.pressure "some" grew by
	// at least StallThreshold of the interval, in StallAfter consecutive
	// samples. Once demoted it stays so until CoolAfter samples pass
	// without such a stall.
	StallGate      bool    `yaml:"stall_gate" help:"demote a hot container only while another managed container stalls for CPU (cgroup cpu.pressure)"`
	StallThreshold float64 `yaml:"stall_threshold" help:"with --stall-gate: the fraction of an interval another container must stall"`
	StallAfter     int     `yaml:"stall_after" help:"with --stall-gate: consecutive samples with such a stall before a hot container is demoted (1: at once)"`
	// IRQ steers the interrupts of the machine's network devices (chosen
	// by driver; IRQPattern, a regexp on /proc/interrupts names, overrides
	// the choice) onto the shared pool, rotated every IRQRotate.
	IRQ        bool          `yaml:"irq" help:"steer network IRQs onto the shared pool"`
	IRQPattern string        `yaml:"irq_pattern" help:"regexp on /proc/interrupts names selecting the IRQs to steer (default: the network devices' IRQs, by driver)"`
	IRQRotate  time.Duration `yaml:"irq_rotate" help:"rotate the IRQs round-robin over the pool this often"`
	// RPS sets the RPS mask of managed containers' host veths to the pool.
	RPS bool `yaml:"rps" help:"set the RPS mask of managed containers' host veths to the shared pool"`
	// DemoteOnly writes no cpuset: hot containers are only demoted. On a
	// Kubernetes node whose kubelet runs the static CPU manager the
	// cpusets are kubelet's (isolate run --cri-socket turns it on there).
	DemoteOnly bool `yaml:"demote_only" help:"write no cpusets, only demote hot containers (on by itself on a node whose kubelet's static CPU manager owns the cpusets)"`
	// DemoteCgroup, on Kubernetes, is the cgroup whose CPU class a
	// demotion sets: the hot container's pod (the default) or the
	// container's own. A container's cpu.idle ranks it only against its
	// pod's other containers; among the node's pods its pod still competes
	// with its request's weight, so only the pod's protects the other pods
	// (plans/README.md, kube-cpu.yaml). On Docker there is no pod: the
	// container's own.
	DemoteCgroup DemoteCgroup `yaml:"demote_cgroup" help:"on Kubernetes (--cri-socket): demote the hot container's pod cgroup (pod) or its own (container); among pods a pod keeps its request's weight whatever its containers' class"`
	// DemoteClass is what a demotion writes: idle (cpu.idle=1), weight
	// (the lowest cpu.shares or cpu.weight, the group staying in the
	// normal class), or auto (the default: weight on Docker, idle on
	// Kubernetes, where the weights are kubelet's). An idle group is
	// preempted at once by any normal task, but the kernel also counts a
	// CPU that runs only idle tasks as idle when it places a waking task,
	// the idle group's own included: the hot container's threads then
	// queue behind each other while the other CPU idles (measured: 18 %
	// of a core idle under idle against 8 % under weight and uncontrolled,
	// plans/README.md, noisy-neighbour.yaml). A low weight loses every
	// contest as well, without that.
	DemoteClass DemoteClass `yaml:"demote_class" help:"what a demotion writes: weight (the lowest cpu.shares/cpu.weight), idle (cpu.idle=1) or auto (weight on Docker, idle on Kubernetes, where the weights are kubelet's)"`
}

// DemoteClass is what a demotion writes.
type DemoteClass string

const (
	DemoteAuto   DemoteClass = "auto"   // weight on Docker, idle on Kubernetes
	DemoteIdle   DemoteClass = "idle"   // cpu.idle=1 (the lowest weight where the kernel has no cpu.idle)
	DemoteWeight DemoteClass = "weight" // the lowest cpu.shares or cpu.weight
)

// resolve is the class auto stands for on Docker (kube false) or on a
// Kubernetes node.
func (c DemoteClass) resolve(kube bool) DemoteClass {
	switch {
	case c != DemoteAuto:
		return c
	case kube:
		return DemoteIdle
	default:
		return DemoteWeight
	}
}

// DemoteCgroup is which cgroup a demotion on Kubernetes sets.
type DemoteCgroup string

const (
	DemotePod       DemoteCgroup = "pod"       // the hot container's pod cgroup
	DemoteContainer DemoteCgroup = "container" // the container's own cgroup
)

// DefaultParams are the defaults: policy shield, sampled every 100 ms, one
// dedicated CPU per normal container where there are enough, one shared
// CPU, hot after 2 samples at >= 90 % of the entitlement, normal again
// after 10 samples under 50 %, a stall gate (when asked for) at 2 % of the
// interval in one sample, IRQs and RPS steered, IRQs rotated every 10 s
// (the paper's period), and on Kubernetes the hot container's pod
// demoted.
//
// A zero field of Params takes its default here (withDefaults), except the
// booleans: a zero Params, like a plan's isolate: map, steers IRQs and RPS
// only when asked; the flags and the config file of `isolate run` start
// from DefaultParams and steer unless told not to.
func DefaultParams() Params {
	return Params{Policy: PolicyShield, Interval: 100 * time.Millisecond, HotAfter: 2, CoolAfter: 10, HotThreshold: 0.9, CoolThreshold: 0.5,
		CPUsPerContainer: 1, MinShared: 1, StallThreshold: 0.02, StallAfter: 1, IRQ: true, IRQRotate: 10 * time.Second, RPS: true,
		DemoteCgroup: DemotePod, DemoteClass: DemoteAuto}
}

// withDefaults is p with every zero field (but the booleans and
// IRQPattern, whose zero is a choice) set to its default.
func (p Params) withDefaults() Params {
	d := reflect.ValueOf(DefaultParams())
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() != reflect.Bool && f.IsZero() && v.Type().Field(i).Name != "IRQPattern" {
			f.Set(d.Field(i))
		}
	}
	return p
}

// Demotes says whether hot containers are demoted under these parameters.
func (p Params) Demotes() bool {
	p = p.withDefaults()
	return p.Policy == PolicyShield || p.Demote
}

// ParamError is a parameter that cannot work; Key is its YAML key.
type ParamError struct {
	Key string
	Err error
}

func (e *ParamError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// Validate reports parameters that cannot work, every one as a
// *ParamError (joined). A zero field stands for its default, as everywhere
// in this package; parameters decoded onto DefaultParams (a plan, the
// flags, a config file) are checked with ValidateDecoded, which refuses an
// explicit zero.
func (p Params) Validate() error { return p.withDefaults().ValidateDecoded() }

// ValidateDecoded is Validate for parameters decoded onto DefaultParams:
// every field is checked as it is, so hot_after: 0 is refused rather than
// taken for the default.
func (p Params) ValidateDecoded() error { return errors.Join(p.problems()...) }

// problems are the *ParamErrors of ValidateDecoded.
func (p Params) problems() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ParamError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	count := func(key string, v, lo, hi int, what string) {
		if v < lo || v > hi {
			bad(key, "%d: expected %s between %d and %d", v, what, lo, hi)
		}
	}
	fraction := func(key string, v, hi float64, what string) bool {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			// NaN compares false with every bound and would pass them all.
			bad(key, "%v is not a number; expected %s", v, what)
			return false
		}
		if v <= 0 || v > hi {
			bad(key, "%g: expected %s", v, what)
			return false
		}
		return true
	}
	switch p.Policy {
	case PolicyShield, PolicyPaper, PolicyStrict:
	default:
		bad("policy", "unknown policy %q: want %q, %q or %q", p.Policy, PolicyShield, PolicyPaper, PolicyStrict)
	}
	if p.Interval < 10*time.Millisecond || p.Interval > time.Minute {
		bad("interval", "%s: expected a sampling interval between 10ms and 1m, like 1s", p.Interval)
	}
	count("hot_after", p.HotAfter, 1, 1000, "a number of saturated samples")
	count("cool_after", p.CoolAfter, 1, 1000, "a number of calm samples")
	hot := fraction("hot_threshold", p.HotThreshold, 1.5, "a fraction of a container's CPUs in (0, 1.5], like 0.9")
	cool := fraction("cool_threshold", p.CoolThreshold, 1.5, "a fraction of a container's CPUs in (0, 1.5], like 0.5")
	if hot && cool && p.CoolThreshold >= p.HotThreshold {
		bad("cool_threshold", "cool threshold %.2f must be below hot threshold %.2f, or containers would flap", p.CoolThreshold, p.HotThreshold)
	}
	switch p.DemoteCgroup {
	case DemotePod, DemoteContainer:
	default:
		bad("demote_cgroup", "unknown cgroup %q: want %q or %q", p.DemoteCgroup, DemotePod, DemoteContainer)
	}
	switch p.DemoteClass {
	case DemoteAuto, DemoteIdle, DemoteWeight:
	default:
		bad("demote_class", "unknown class %q: want %q, %q or %q", p.DemoteClass, DemoteWeight, DemoteIdle, DemoteAuto)
	}
	if p.DemoteOnly && p.Policy != PolicyShield && !p.Demote {
		bad("demote_only", "policy %s writes only cpusets unless it demotes too: use policy shield, or demote: true", p.Policy)
	}
	count("cpus_per_container", p.CPUsPerContainer, 1, 4096, "a number of CPUs")
	count("min_shared", p.MinShared, 1, 4096, "a number of CPUs")
	fraction("stall_threshold", p.StallThreshold, 1, "a fraction of the interval in (0, 1], like 0.02")
	count("stall_after", p.StallAfter, 1, 1000, "a number of stalled samples")
	if p.IRQPattern != "" {
		if _, err := regexp.Compile(p.IRQPattern); err != nil {
			bad("irq_pattern", "%q: %v", p.IRQPattern, err)
		}
	}
	if p.IRQRotate < 100*time.Millisecond || p.IRQRotate > 24*time.Hour {
		bad("irq_rotate", "%s: expected a rotation period between 100ms and 24h, like 10s", p.IRQRotate)
	}
	return errs
}

// ParamKeys are the YAML keys of Params, in field order.
func ParamKeys() []string {
	t := reflect.TypeFor[Params]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = paramKey(t.Field(i))
	}
	return keys
}

func paramKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return k
}

// DecodeParams decodes a plan's isolate: map (keys as ParamKeys, values
// as YAML decoded them) onto base (DefaultParams) and validates the result
// with ValidateDecoded. The error joins every problem, each a *ParamError
// naming its key.
func DecodeParams(raw map[string]any, base Params) (Params, error) {
	p := base
	v := reflect.ValueOf(&p).Elem()
	var errs []error
	for i, key := range ParamKeys() {
		val, ok := raw[key]
		if !ok {
			continue
		}
		var n yaml.Node
		if err := n.Encode(val); err != nil {
			errs = append(errs, &ParamError{Key: key, Err: err})
			continue
		}
		if err := n.Decode(v.Field(i).Addr().Interface()); err != nil {
			errs = append(errs, &ParamError{Key: key, Err: fmt.Errorf("%v: expected %s", val, kindOf(v.Field(i)))})
		}
	}
	known := ParamKeys()
	for key := range raw {
		if !slices.Contains(known, key) {
			errs = append(errs, &ParamError{Key: key, Err: fmt.Errorf("unknown key; expected one of %s", strings.Join(known, ", "))})
		}
	}
	return p, errors.Join(append(errs, p.problems()...)...)
}

// kindOf names what a field takes, for an error.
func kindOf(v reflect.Value) string {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		return "a duration like 500ms"
	case v.Kind() == reflect.Bool:
		return "true or false"
	case v.Kind() == reflect.Int:
		return "an integer"
	case v.Kind() == reflect.Float64:
		return "a number"
	default:
		return "a string"
	}
}

// Node renders the fields whose keys set names and whose values are not
// zero, in field order, as a YAML mapping: a plan's isolate: knob as the
// canonical plan spells it (durations as 500ms, a false flag left out),
// whatever the plan wrote.
func (p Params) Node(set func(key string) bool) (*yaml.Node, error) {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	v := reflect.ValueOf(p)
	for i, key := range ParamKeys() {
		if !set(key) || v.Field(i).IsZero() {
			continue
		}
		var n yaml.Node
		if err := n.Encode(v.Field(i).Interface()); err != nil {
			return nil, fmt.Errorf("render isolate.%s: %w", key, err)
		}
		out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &n)
	}
	return out, nil
}

// Flags are p as `isolate run` flags (--key-with-dashes=value, every
// field: the flags start from DefaultParams, so a zero must be said), for
// a controller started elsewhere (the DaemonSet of a Kubernetes run).
func (p Params) Flags() []string {
	p = p.withDefaults()
	v := reflect.ValueOf(p)
	var out []string
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		var val string
		switch f := v.Field(i).Interface().(type) {
		case time.Duration:
			val = f.String()
		case float64:
			val = strconv.FormatFloat(f, 'g', -1, 64)
		default:
			val = fmt.Sprint(f)
		}
		out = append(out, "--"+strings.ReplaceAll(key, "_", "-")+"="+val)
	}
	return out
}

package plan

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/utils/cpuset"
)

// checkKnobs catches impossible combinations once a configuration's knobs
// are complete (after matrix expansion and defaults).
//
// The host runtime runs processes directly on the machine, so:
//
//   - its only network mode is host: published ports, the external namespace
//     and container IPs are Docker's;
//
//   - engine knobs (storage driver, data root, userland proxy) select a
//     Docker engine and mean nothing there;
//
//   - data is a directory on the host's filesystem (bind, the default) or a
//     tmpfs mounted on it; layer and volume do not exist without Docker.
//
//   - privileged is a container's option (docker run --privileged); a
//     process on the host is as privileged as ctrperf already is.
//
// Resources (cpuset, shares, quota, memory) apply to both runtimes: the host
// engine puts its processes in cgroups of their own. Instances apply to both
// runtimes too, but not with the isolate controller, which watches the
// containers of one deployment.
func (d *decoder) checkKnobs(c *Configuration) {
	d.checkIsolate(c)
	d.checkFilesystem(c)
	field := func(k string) string { return join(c.Origin, k) }
	if c.Instances > 1 && c.Isolate.On() {
		d.errorf(c.node("instances"), field("instances"), "%d instances with isolate.policy %q: the isolate controller watches one deployment per run; use instances: 1 or isolate.policy off", c.Instances, c.Isolate.Policy())
	}
	judged := d.checkKube(c) // kubernetes' vocabulary, and kubernetes' knobs elsewhere
	d.checkVM(c)             // the vm block, and what a guest does not take
	if c.Runtime == "" {
		d.errorf(c.node("name"), field("runtime"), "missing; expected %s", oneOf(runtimes))
		return
	}
	tr := c.Runtime.Traits()
	switch {
	case !c.Runtime.Known(): // refused by name when read
	case tr.Guest: // checkVM judged it
	case tr.Processes:
		if c.Network != NetworkHost && !judged {
			d.errorf(c.node("network"), field("network"), "%q needs runtime docker; with runtime host the only network is \"host\"", c.Network)
		}
		if !c.Engine.IsDefault() {
			for _, k := range engineKeys {
				if n, ok := c.nodes["engine."+k]; ok {
					d.errorf(n, field("engine."+k), "engine knobs select a Docker engine; runtime host has none (remove it or use runtime docker)")
				}
			}
		}
		if c.Privileged {
			d.errorf(c.node("privileged"), field("privileged"), "needs runtime docker: --privileged is a container option, and a process of runtime host already runs with ctrperf's own privileges (remove it or use runtime docker)")
		}
		if c.Data != DataBind && c.Data != DataTmpfs && !judged {
			d.errorf(c.node("data"), field("data"), "%q needs runtime docker; the host runtime writes to a directory of the host (\"bind\", the default) or a tmpfs (\"tmpfs\")", c.Data)
		}
	case tr.EngineKnobs:
		if c.Engine.Nested {
			e := func(k, why string) {
				if n, ok := c.nodes[k]; ok {
					d.errorf(n, field(k), "%s", why)
				} else {
					d.errorf(c.node("engine.nested"), field(k), "%s", why)
				}
			}
			if c.Network != NetworkHost {
				e("network", fmt.Sprintf("%q with engine.nested: the nested engine has no bridge and publishes no ports (no iptables in its image); use network: host", c.Network))
			}
			if c.Data == DataBind {
				e("data", "\"bind\" with engine.nested: a host directory is not what the inner engine sees; use layer, volume or tmpfs")
			}
			if c.Engine.DataRoot != "" && c.Engine.DataRoot != "native" {
				e("engine.data_root", "with engine.nested: the nested engine's data root is a volume of the default engine")
			}
			if c.Engine.UserlandProxy != nil {
				e("engine.userland_proxy", "with engine.nested: the nested engine publishes no ports")
			}
			if c.Filesystem.On() {
				e("filesystem", "with engine.nested: the data filesystem is mounted on the host, which the inner engine does not see")
			}
			if c.Isolate.On() {
				e("isolate", "with engine.nested: the isolate controller watches the default engine's containers")
			}
			if c.Privileged {
				e("privileged", "true with engine.nested: an inner container with --privileged would get every capability of the outer one, the host's cgroups read-write and no seccomp or AppArmor, which is root on the host; remove it or use the default engine")
			}
		}
	case tr.Program != "":
		// Its engine is the service of the runtime's program that
		// ctrperf starts (podman); engine knobs start private dockerds.
		for _, k := range engineKeys {
			if n, ok := c.nodes["engine."+k]; ok {
				d.errorf(n, field("engine."+k), "engine knobs select a Docker engine; runtime %s runs on a %s service of ctrperf's own (remove it)", c.Runtime, tr.Program)
			}
		}
	}
}

func (d *decoder) checkCPUSet(n *yaml.Node, field, s string) {
	set, err := cpuset.Parse(s)
	if err != nil {
		d.errorf(n, field, "%q is not a CPU list: expected e.g. \"0\", \"0-1\" or \"0,2\"", s)
		return
	}
	if set.IsEmpty() {
		d.errorf(n, field, "empty CPU list; expected at least one CPU like \"0\"")
	}
}

// memory accepts Docker's sizes ("512m", "1g") or a number of bytes.
func (d *decoder) memory(n *yaml.Node, field string) (int64, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.errorf(n, field, "expected a size like 512m or 2g, got %s", describe(n))
		return 0, false
	}
	v, err := ParseMemory(n.Value)
	if err != nil || v <= 0 {
		d.errorf(n, field, "%q: expected a positive size like 512m or 2g", n.Value)
		return 0, false
	}
	// dockerd refuses less than 6 MiB; say so now instead of failing every run.
	if v < 6<<20 {
		d.errorf(n, field, "%q is below Docker's minimum of 6m", n.Value)
		return 0, false
	}
	return v, true
}

var quickKeys = []string{"repetitions", "warmup", "duration", "load", "include"}

func (d *decoder) quick(n *yaml.Node, field string, byName map[string]*Configuration, baseline string, planNodes map[string]*yaml.Node) *Quick {
	pairs, ok := d.mapping(n, field, quickKeys)
	if !ok {
		return nil
	}
	q := &Quick{}
	for _, pr := range pairs {
		f := join(field, pr.key)
		switch pr.key {
		case "repetitions":
			q.repetitionsNode = pr.value
			if v, ok := d.integer(pr.value, f); ok {
				switch {
				case v < 1:
					d.errorf(pr.value, f, "%d: expected at least 1", v)
				case v > MaxRuns:
					d.errorf(pr.value, f, "%d: expected at most %d (a plan has at most %d runs, configurations × repetitions)", v, MaxRuns, MaxRuns)
				default:
					q.Repetitions = int(v)
				}
			}
		case "warmup":
			if v, ok := d.duration(pr.value, f); ok {
				if v < 0 {
					d.errorf(pr.value, f, "%s: expected zero or a positive duration", v)
				}
				q.Warmup = &v
			}
		case "duration":
			if v, ok := d.duration(pr.value, f); ok {
				if v <= 0 {
					d.errorf(pr.value, f, "%s: expected a positive measured window like 5s", v)
				}
				q.Duration = &v
			}
		case "load":
			q.Load, _ = d.anyMap(pr.value, f, "load", planNodes)
		case "include":
			items, ok := d.sequence(pr.value, f)
			if !ok {
				continue
			}
			for i, it := range items {
				s, ok := d.str(it, index(f, i))
				if !ok {
					continue
				}
				if _, found := byName[s]; !found {
					d.errorf(it, index(f, i), "%q names no configuration%s", s, suggest(s, byName))
					continue
				}
				q.Include = append(q.Include, s)
			}
			if len(q.Include) > 0 && baseline != "" && !contains(q.Include, baseline) {
				d.errorf(pr.value, f, "does not include the baseline %q; a quick run without its baseline cannot be compared", baseline)
			}
		}
	}
	return q
}

func suggest(s string, byName map[string]*Configuration) string {
	var all []string
	for k := range byName {
		all = append(all, k)
	}
	if c := closest(s, all); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

func (p *Plan) applyQuick(configs []Configuration, q *Quick) []Configuration {
	if q.Repetitions > 0 {
		p.Repetitions = q.Repetitions
	}
	if q.Warmup != nil {
		p.Warmup = *q.Warmup
	}
	if q.Duration != nil {
		p.Duration = *q.Duration
	}
	if len(q.Include) == 0 {
		return configs
	}
	var out []Configuration
	for _, c := range configs {
		if contains(q.Include, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// only keeps the named configurations; the baseline always stays so that
// the results can still be compared.
func (d *decoder) only(configs []Configuration, only []string, baseline string) []Configuration {
	known := names(configs)
	for _, o := range only {
		if !contains(known, o) {
			msg := fmt.Sprintf("%q names no configuration of the plan; expected %s", o, oneOf(known))
			if c := closest(o, known); c != "" {
				msg = fmt.Sprintf("%q names no configuration of the plan; did you mean %q?", o, c)
			}
			d.errorf(nil, "--only", "%s", msg)
		}
	}
	var out []Configuration
	for _, c := range configs {
		if c.Name == baseline || contains(only, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// describeKnobs is a one-line summary of a configuration for listings.
func (c *Configuration) describeKnobs() string {
	if c.Runtime.Traits().Guest {
		// No placement knobs: the guest's.
		s := c.VM.describe()
		if len(c.Load) > 0 {
			s += " load=" + flatMap(c.Load)
		}
		return s
	}
	parts := []string{string(c.Runtime), "net=" + string(c.Network), "data=" + string(c.Data)}
	if c.Filesystem.On() {
		parts = append(parts, "fs="+c.Filesystem.Key())
		if c.Filesystem.Size != 0 {
			parts[len(parts)-1] += "/" + FormatMemory(c.Filesystem.Size)
		}
	}
	parts = append(parts, "topology="+c.Topology)
	if !c.Engine.IsDefault() {
		parts = append(parts, "engine="+c.Engine.Key())
	}
	r := c.Resources
	if r.CPUSet != "" {
		parts = append(parts, "cpuset="+r.CPUSet)
	}
	if r.CPUShares != 0 {
		parts = append(parts, fmt.Sprintf("cpu_shares=%d", r.CPUShares))
	}
	if r.CPUs != 0 {
		parts = append(parts, fmt.Sprintf("cpus=%g", r.CPUs))
	}
	if r.MemoryBytes != 0 {
		parts = append(parts, "memory="+FormatMemory(r.MemoryBytes))
	}
	if s := c.Isolate.describe(); s != "" {
		parts = append(parts, s)
	}
	if c.Privileged {
		parts = append(parts, "privileged")
	}
	if s := c.Kube.describe(); s != "" {
		parts = append(parts, s)
	}
	if c.Instances > 1 {
		parts = append(parts, fmt.Sprintf("instances=%d", c.Instances))
	}
	if s := c.Hosts.describe(); s != "" {
		parts = append(parts, s)
	}
	for _, kv := range []struct {
		name string
		m    map[string]any
	}{{"app", c.App}, {"load", c.Load}} {
		if len(kv.m) == 0 {
			continue
		}
		parts = append(parts, kv.name+"="+flatMap(kv.m))
	}
	return strings.Join(parts, " ")
}

func flatMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if sub, ok := m[k].(map[string]any); ok {
			fmt.Fprintf(&b, "%s:%s", k, flatMap(sub))
			continue
		}
		fmt.Fprintf(&b, "%s:%v", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

package plan

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A matrix expands to the cartesian product of its axes:
//
//	matrix:
//	  base: {runtime: docker}            # knobs every entry shares
//	  network: [published, container-ip] # an axis: a knob path and its values
//	  data: [layer, volume]
//	  exclude: [{network: container-ip, data: volume}]
//	  name: "docker-{network}-{data}"    # optional; default joins the values
//
// Axes are knob paths: the top-level knobs, "engine.<knob>",
// "resources.<knob>", and "app.<key>" / "load.<key>" for workload knobs.
// The first axis varies slowest, so entries come out in reading order.

var matrixReserved = []string{"base", "exclude", "name"}

var axisPaths = []string{"runtime", "network", "data", "topology", "privileged", "instances", "hosts.sut", "hosts.load",
	"filesystem.type", "engine.storage_driver", "engine.data_root", "engine.userland_proxy",
	"resources.cpuset", "resources.cpu_shares", "resources.cpus", "resources.memory", "isolate.policy", "isolate.irq", "isolate.rps", "isolate.demote", "isolate.stall_gate",
	"kubernetes.node", "kubernetes.qos", "kubernetes.proxy_mode", "kubernetes.context",
	"vm.accel", "vm.vcpus", "vm.memory"}

type axis struct {
	path   string
	keyN   *yaml.Node
	values []*yaml.Node
}

var placeholderRE = regexp.MustCompile(`\{([^{}]*)\}`)

func (d *decoder) matrix(n *yaml.Node, field string) []Configuration {
	pairs, ok := d.mapping(n, field, nil)
	if !ok {
		return nil
	}
	var (
		base     Knobs
		axes     []axis
		excludeN *yaml.Node
		nameN    *yaml.Node
		template string
	)
	base.nodes = map[string]*yaml.Node{}
	for _, pr := range pairs {
		f := join(field, pr.key)
		switch {
		case pr.key == "base":
			bp, ok := d.mapping(pr.value, f, configKeys[1:])
			if !ok {
				continue
			}
			for _, b := range bp {
				d.setKnob(&base, b.key, b.value, join(f, b.key))
			}
		case pr.key == "exclude":
			excludeN = pr.value
		case pr.key == "name":
			nameN = pr.value
			template, _ = d.str(pr.value, f)
		case contains(axisPaths, pr.key) || strings.HasPrefix(pr.key, "app.") || strings.HasPrefix(pr.key, "load."):
			items, ok := d.sequence(pr.value, f)
			if !ok {
				continue
			}
			if len(items) == 0 {
				d.errorf(pr.value, f, "empty axis; expected at least one value")
				continue
			}
			a := axis{path: pr.key, keyN: pr.keyN}
			seen := map[string]bool{}
			for i, it := range items {
				if deref(it).Kind != yaml.ScalarNode {
					d.errorf(it, index(f, i), "expected a single value, got %s", describe(it))
					continue
				}
				if seen[deref(it).Value] {
					d.errorf(it, index(f, i), "value %q given twice", deref(it).Value)
					continue
				}
				seen[deref(it).Value] = true
				// Decode once into a scratch set so that a bad value is
				// reported once, not once per combination.
				var scratch Knobs
				before := len(d.errs)
				d.setKnob(&scratch, pr.key, it, index(f, i))
				if len(d.errs) == before {
					a.values = append(a.values, it)
				}
			}
			axes = append(axes, a)
		default:
			all := append(append([]string{}, matrixReserved...), axisPaths...)
			msg := "unknown matrix key"
			if s := closest(pr.key, all); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else if s := closest(pr.key, shortAxisNames()); s != "" {
				msg += fmt.Sprintf("; did you mean %q? (engine and resources knobs are written engine.<knob>, resources.<knob>)", "engine."+s)
				if contains(resourceKeys, s) {
					msg = fmt.Sprintf("unknown matrix key; did you mean %q?", "resources."+s)
				}
			} else {
				msg += "; expected base, exclude, name, a knob (" + strings.Join(axisPaths, ", ") + ") or app.<key> / load.<key>"
			}
			d.errorf(pr.keyN, f, "%s", msg)
		}
	}
	if len(axes) == 0 {
		d.errorf(n, field, "no axes; expected at least one knob with a list of values, e.g. network: [published, container-ip]")
		return nil
	}
	for _, a := range axes {
		if len(a.values) == 0 {
			return nil // its values were all reported already
		}
	}
	if product, ok := matrixSize(axes); !ok {
		d.errorf(n, field, "%s combinations; expected at most %d entries (fewer axes or values; excludes apply after)", product, MaxMatrixEntries)
		return nil
	}
	excludes := d.excludes(excludeN, join(field, "exclude"), axes)
	if nameN != nil && template != "" {
		for _, m := range placeholderRE.FindAllStringSubmatch(template, -1) {
			if !hasAxis(axes, m[1]) {
				d.errorf(nameN, join(field, "name"), "placeholder {%s} is not an axis of the matrix; expected one of %s", m[1], axisList(axes))
			}
		}
	}

	var out []Configuration
	combo := make([]*yaml.Node, len(axes))
	var walk func(i int)
	walk = func(i int) {
		if i < len(axes) {
			for _, v := range axes[i].values {
				combo[i] = v
				walk(i + 1)
			}
			return
		}
		if excluded(excludes, axes, combo) {
			return
		}
		k := cloneKnobs(base)
		var desc []string
		for j, a := range axes {
			d.setKnob(&k, a.path, combo[j], join(field, a.path))
			desc = append(desc, a.path+"="+combo[j].Value)
		}
		name := entryName(template, base, axes, combo)
		c := Configuration{Name: name, Knobs: k, Line: deref(n).Line,
			Origin: fmt.Sprintf("%s (%s)", field, strings.Join(desc, ", "))}
		nameNode := nameN
		if nameNode == nil {
			nameNode = &yaml.Node{Line: deref(n).Line}
		}
		c.nodes["name"] = nameNode
		if !nameRE.MatchString(name) {
			d.errorf(nameNode, join(field, "name"), "entry name %q: expected letters, digits, '.', '_', '+', '=', '-'; set name: with a template like \"docker-{network}\"", name)
		}
		out = append(out, c)
	}
	walk(0)
	if len(out) == 0 {
		d.errorf(excludeN, join(field, "exclude"), "excludes every combination; the matrix is empty")
	}
	return out
}

// matrixSize is the product of the axes' lengths, written out ("2 × 3 =
// 6"), and whether it is within MaxMatrixEntries. It multiplies in
// float64, which no number of axes overflows into a small number.
func matrixSize(axes []axis) (string, bool) {
	factors := make([]string, len(axes))
	product := 1.0
	for i, a := range axes {
		factors[i] = fmt.Sprint(len(a.values))
		product *= float64(len(a.values))
	}
	return fmt.Sprintf("%s = %.15g", strings.Join(factors, " × "), product), product <= MaxMatrixEntries
}

type exclusion map[int]string // axis index → value

func (d *decoder) excludes(n *yaml.Node, field string, axes []axis) []exclusion {
	if n == nil {
		return nil
	}
	items, ok := d.sequence(n, field)
	if !ok {
		return nil
	}
	var out []exclusion
	for i, it := range items {
		f := index(field, i)
		pairs, ok := d.mapping(it, f, nil)
		if !ok {
			continue
		}
		ex := exclusion{}
		for _, pr := range pairs {
			ai := axisIndex(axes, pr.key)
			if ai < 0 {
				d.errorf(pr.keyN, join(f, pr.key), "not an axis of the matrix; expected one of %s", axisList(axes))
				continue
			}
			v := deref(pr.value)
			if v.Kind != yaml.ScalarNode || !hasValue(axes[ai], v.Value) {
				// An exclude that matches nothing is almost always a typo
				// that would silently keep the combination.
				d.errorf(pr.value, join(f, pr.key), "%s is not a value of the axis; expected %s", describe(v), oneOf(axisValues(axes[ai])))
				continue
			}
			ex[ai] = v.Value
		}
		if len(ex) > 0 {
			out = append(out, ex)
		}
	}
	return out
}

func excluded(exs []exclusion, axes []axis, combo []*yaml.Node) bool {
	for _, ex := range exs {
		all := true
		for ai, v := range ex {
			if combo[ai].Value != v {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// entryName fills the template, or by default joins the runtime and the
// axis values: "docker-published-volume". Non-string values carry their
// knob name ("userland_proxy=false") because a bare "false" says nothing.
func entryName(template string, base Knobs, axes []axis, combo []*yaml.Node) string {
	if template != "" {
		return placeholderRE.ReplaceAllStringFunc(template, func(m string) string {
			ai := axisIndex(axes, m[1:len(m)-1])
			if ai < 0 {
				return m
			}
			return combo[ai].Value
		})
	}
	var parts []string
	if axisIndex(axes, "runtime") < 0 && base.Runtime != "" {
		parts = append(parts, string(base.Runtime))
	}
	for i, a := range axes {
		v := combo[i]
		if v.Tag == "!!str" {
			parts = append(parts, v.Value)
			continue
		}
		seg := a.path
		if j := strings.LastIndexByte(seg, '.'); j >= 0 {
			seg = seg[j+1:]
		}
		parts = append(parts, seg+"="+v.Value)
	}
	return strings.Join(parts, "-")
}

func cloneKnobs(k Knobs) Knobs {
	c := k
	c.App = maps.Clone(k.App)
	c.Load = maps.Clone(k.Load)
	c.Isolate.Raw = maps.Clone(k.Isolate.Raw)
	c.nodes = maps.Clone(k.nodes)
	if c.nodes == nil {
		c.nodes = map[string]*yaml.Node{}
	}
	if k.Engine.UserlandProxy != nil {
		v := *k.Engine.UserlandProxy
		c.Engine.UserlandProxy = &v
	}
	return c
}

func axisIndex(axes []axis, path string) int {
	for i, a := range axes {
		if a.path == path {
			return i
		}
	}
	return -1
}

func hasAxis(axes []axis, path string) bool { return axisIndex(axes, path) >= 0 }

func hasValue(a axis, v string) bool {
	for _, n := range a.values {
		if n.Value == v {
			return true
		}
	}
	return false
}

func axisValues(a axis) []string {
	var out []string
	for _, n := range a.values {
		out = append(out, n.Value)
	}
	return out
}

func axisList(axes []axis) string {
	var out []string
	for _, a := range axes {
		out = append(out, a.path)
	}
	return oneOf(out)
}

func shortAxisNames() []string { return append(append([]string{}, engineKeys...), resourceKeys...) }

func sortStrings(s []string) { sort.Strings(s) }

package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder walks yaml.Nodes rather than unmarshalling into structs so that
// every error can name the line it comes from, and so that unknown keys are
// caught (yaml.v3's KnownFields reports only the first one, without the
// suggestion a user needs).
type decoder struct {
	file   string
	errs   Errors
	schema Schema
}

// workloads are the names the schema knows (none without one).
func (d *decoder) workloads() []string {
	if d.schema == nil {
		return nil
	}
	return d.schema.Workloads()
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// pair is one key of a mapping with its value node.
type pair struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

// mapping returns the pairs of a mapping node in file order, reporting a
// node that is not a mapping, duplicate keys, and keys outside known (when
// known is non-nil) with the closest known key as a suggestion.
func (d *decoder) mapping(n *yaml.Node, field string, known []string) ([]pair, bool) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, field, "expected a mapping of keys to values, got %s", describe(n))
		return nil, false
	}
	seen := map[string]bool{}
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, field, "expected a plain key, got %s", describe(k))
			continue
		}
		sub := join(field, k.Value)
		if seen[k.Value] {
			d.errorf(k, sub, "key given twice")
			continue
		}
		seen[k.Value] = true
		if known != nil && !contains(known, k.Value) {
			msg := "unknown key"
			if s := closest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; expected " + oneOf(known)
			}
			d.errorf(k, sub, "%s", msg)
			continue
		}
		out = append(out, pair{key: k.Value, keyN: k, value: v})
	}
	return out, true
}

func (d *decoder) sequence(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "expected a list, got %s", describe(n))
		return nil, false
	}
	return n.Content, true
}

func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.errorf(n, field, "expected a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) enum(n *yaml.Node, field string, allowed []string) (string, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	if !contains(allowed, s) {
		msg := fmt.Sprintf("%q is not valid; expected %s", s, oneOf(allowed))
		if c := closest(s, allowed); c != "" {
			msg = fmt.Sprintf("%q is not valid; did you mean %q? (expected %s)", s, c, oneOf(allowed))
		}
		d.errorf(n, field, "%s", msg)
		return "", false
	}
	return s, true
}

func (d *decoder) integer(n *yaml.Node, field string) (int64, bool) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil {
			return v, true
		}
	}
	d.errorf(n, field, "expected an integer, got %s", describe(n))
	return 0, false
}

func (d *decoder) float(n *yaml.Node, field string) (float64, bool) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		v, err := strconv.ParseFloat(n.Value, 64)
		if err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true
		}
	}
	d.errorf(n, field, "expected a finite number, got %s", describe(n))
	return 0, false
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	}
	d.errorf(n, field, "expected true or false, got %s", describe(n))
	return false, false
}

// duration accepts Go durations ("30s", "1m30s"). A bare number is refused
// because seconds and milliseconds are equally plausible readings of it.
func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, bool) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		v, err := time.ParseDuration(n.Value)
		if err == nil {
			return v, true
		}
	}
	d.errorf(n, field, "expected a duration with a unit like 30s or 2m, got %s", describe(n))
	return 0, false
}

// keySuffix marks the key node of a knob in a nodes map ("load.search" +
// keySuffix): an error about a block mapping points at its key's line, not
// at its first entry's.
const keySuffix = "\x00key"

// anyMap decodes a free-form mapping (workload-specific app and load knobs).
// When nodes is not nil, each key's value node is kept there under
// "knob.key" ("app.pool"), so that the workload's errors can point at
// their lines.
func (d *decoder) anyMap(n *yaml.Node, field, knob string, nodes map[string]*yaml.Node) (map[string]any, bool) {
	pairs, ok := d.mapping(n, field, nil)
	if !ok {
		return nil, false
	}
	out := make(map[string]any, len(pairs))
	for _, p := range pairs {
		var v any
		if err := p.value.Decode(&v); err != nil {
			d.errorf(p.value, join(field, p.key), "cannot decode: %v", err)
			continue
		}
		out[p.key] = v
		if nodes != nil {
			recordNodes(nodes, knob+"."+p.key, p.value)
			nodes[knob+"."+p.key+keySuffix] = p.keyN
		}
	}
	return out, true
}

// recordNodes remembers where a knob and everything nested in it was set:
// "app.ready.path" for a mapping, "app.sidecars[0].image" for a list, so
// that a workload's error about a nested knob points at its own line.
func recordNodes(nodes map[string]*yaml.Node, path string, n *yaml.Node) {
	nodes[path] = n
	n = deref(n)
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			recordNodes(nodes, path+"."+n.Content[i].Value, n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, it := range n.Content {
			recordNodes(nodes, fmt.Sprintf("%s[%d]", path, i), it)
		}
	}
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "an empty value"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected YAML node"
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// yamlLine extracts the line number yaml.v3 puts in its syntax errors
// ("yaml: line 7: mapping values are not allowed in this context").
func yamlLine(err error) int {
	msg := err.Error()
	i := strings.Index(msg, "line ")
	if i < 0 {
		return 0
	}
	rest := msg[i+len("line "):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(rest[:j])
	return n
}

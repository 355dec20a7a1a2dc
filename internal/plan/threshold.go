package plan

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Threshold is a CI gate: a configuration's ratio to a reference (the
// baseline in a plan, the first result set in `compare --fail-on`) for one
// metric must stay on one side of Limit. It is broken only when the whole
// interval of the ratio is beyond the limit: an interval that straddles it
// is not evidence of a regression.
type Threshold struct {
	// Config names the configuration the rule is about; "" means every
	// configuration but the reference.
	Config string
	Metric string
	// Op is the requirement: the ratio must be Op Limit ("<", "<=", ">",
	// ">=").
	Op    string
	Limit float64
	// Text is the rule as the user wrote it, for messages.
	Text string
	Line int // where a plan set it; 0 on the command line
}

// Broken reports whether the interval [lo, hi] of the ratio lies wholly
// outside what the rule allows.
func (t Threshold) Broken(lo, hi float64) bool {
	switch t.Op {
	case "<":
		return lo >= t.Limit
	case "<=":
		return lo > t.Limit
	case ">":
		return hi <= t.Limit
	case ">=":
		return hi < t.Limit
	}
	return false
}

// Requirement is the rule in the plan's words: "p99_ms < 1.1 x baseline".
func (t Threshold) Requirement(reference string) string {
	return fmt.Sprintf("%s %s %s x %s", t.Metric, t.Op, strconv.FormatFloat(t.Limit, 'f', -1, 64), reference)
}

var (
	metricRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// "< 1.10 x baseline", "<=1.1×baseline", "< +10%", ">= -5%"
	requirementRE = regexp.MustCompile(`^\s*(<=|>=|<|>)\s*(.+?)\s*$`)
	// "p99_ms>+10%", "docker-published:p99_ms > 1.2x", "throughput_per_s<-5%"
	failOnRE = regexp.MustCompile(`^\s*(?:([A-Za-z0-9][A-Za-z0-9._+=-]*)\s*:\s*)?([a-z][a-z0-9_]*)\s*(<=|>=|<|>)\s*(.+?)\s*$`)
)

// parseLimit reads a ratio: "1.10 x baseline", "1.1x", "1.1", "+10%",
// "-5%". what names the reference word allowed after "x" ("" for any).
func parseLimit(s, reference string) (float64, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "%") {
		num := strings.TrimSpace(strings.TrimSuffix(s, "%"))
		if num == "" || (num[0] != '+' && num[0] != '-') {
			return 0, fmt.Errorf("%q: a percentage is a change, written with its sign (+10%% or -5%%)", s)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%q: expected a change like +10%% or -5%%", s)
		}
		if v <= -100 {
			return 0, fmt.Errorf("%q: a ratio cannot fall by 100%% or more", s)
		}
		return 1 + v/100, nil
	}
	num := s
	if i := strings.IndexAny(s, "x×"); i >= 0 {
		num = strings.TrimSpace(s[:i])
		ref := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s[i:], "x"), "×"))
		if ref != "" && ref != reference {
			return 0, fmt.Errorf("%q: expected %q after x, got %q", s, reference, ref)
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("%q: expected a positive ratio like 1.10 x %s, or a change like +10%%", s, reference)
	}
	return v, nil
}

// ParseRequirement reads a plan threshold's value for metric:
// "< 1.10 x baseline" (the ratio to the baseline must stay below 1.10),
// "> 0.95 x baseline", or with a change: "< +10%", "> -5%".
func ParseRequirement(metric, s string) (Threshold, error) {
	m := requirementRE.FindStringSubmatch(s)
	if m == nil {
		return Threshold{}, fmt.Errorf("%q: expected a comparison with the baseline like \"< 1.10 x baseline\" or \"> -5%%\"", s)
	}
	limit, err := parseLimit(m[2], "baseline")
	if err != nil {
		return Threshold{}, err
	}
	return Threshold{Metric: metric, Op: m[1], Limit: limit, Text: metric + ": " + strings.TrimSpace(s)}, nil
}

// ParseFailOn reads a `compare --fail-on` rule, which names what fails:
// "p99_ms>+10%" fails when the new/old ratio of p99_ms is above 1.10 (its
// whole interval), "throughput_per_s<-5%" when it is below 0.95;
// "CONFIG:metric>…" limits the rule to one configuration. The result is
// the requirement the rule protects (p99_ms <= 1.10).
func ParseFailOn(s string) (Threshold, error) {
	m := failOnRE.FindStringSubmatch(s)
	if m == nil {
		return Threshold{}, fmt.Errorf("--fail-on %q: expected METRIC>CHANGE like 'p99_ms>+10%%' or 'throughput_per_s<-5%%' (optionally CONFIG:METRIC…)", s)
	}
	limit, err := parseLimit(m[4], "")
	if err != nil {
		return Threshold{}, fmt.Errorf("--fail-on %q: %w", s, err)
	}
	// Failing when above means requiring at most, and so on.
	req := map[string]string{">": "<=", ">=": "<", "<": ">=", "<=": ">"}[m[3]]
	return Threshold{Config: m[1], Metric: m[2], Op: req, Limit: limit, Text: strings.TrimSpace(s)}, nil
}

// thresholds decodes the plan's `thresholds:` mapping: metric → rule for
// every configuration but the baseline, or configuration → (metric → rule)
// for one configuration (its rules replace the plan-wide ones for the same
// metric).
func (d *decoder) thresholds(n *yaml.Node, field string) []Threshold {
	pairs, ok := d.mapping(n, field, nil)
	if !ok {
		return nil
	}
	var out []Threshold
	rule := func(config, metric string, keyN, v *yaml.Node, f string) {
		if !metricRE.MatchString(metric) {
			d.errorf(keyN, f, "%q: expected a metric name like p99_ms or throughput_per_s", metric)
			return
		}
		s, ok := d.str(v, f)
		if !ok {
			return
		}
		t, err := ParseRequirement(metric, s)
		if err != nil {
			d.errorf(v, f, "%v", err)
			return
		}
		t.Config, t.Line = config, deref(v).Line
		out = append(out, t)
	}
	for _, p := range pairs {
		f := join(field, p.key)
		if deref(p.value).Kind != yaml.MappingNode {
			rule("", p.key, p.keyN, p.value, f)
			continue
		}
		if !nameRE.MatchString(p.key) {
			d.errorf(p.keyN, f, "%q: expected a configuration name", p.key)
			continue
		}
		sub, ok := d.mapping(p.value, f, nil)
		if !ok {
			continue
		}
		if len(sub) == 0 {
			d.errorf(p.value, f, "no rules for configuration %q; expected metric: \"< 1.10 x baseline\"", p.key)
		}
		for _, sp := range sub {
			rule(p.key, sp.key, sp.keyN, sp.value, join(f, sp.key))
		}
	}
	return out
}

// checkThresholds refuses rules about configurations the plan does not
// have, and rules about the baseline (its ratio to itself is 1).
func (d *decoder) checkThresholds(ts []Threshold, configs []Configuration, baseline string) {
	have := names(configs)
	for _, t := range ts {
		if t.Config == "" {
			continue
		}
		at := &yaml.Node{Line: t.Line}
		switch {
		case t.Config == baseline:
			d.errorf(at, join("thresholds", t.Config), "%q is the baseline: its ratio to itself is always 1", t.Config)
		case !contains(have, t.Config):
			msg := fmt.Sprintf("%q names no configuration; expected %s", t.Config, oneOf(have))
			if c := closest(t.Config, have); c != "" {
				msg = fmt.Sprintf("%q names no configuration; did you mean %q?", t.Config, c)
			}
			d.errorf(at, join("thresholds", t.Config), "%s", msg)
		}
	}
}

// ThresholdsFor returns the rules that apply to configuration name: its
// own, and the plan-wide ones for metrics it has no rule of its own for.
func ThresholdsFor(ts []Threshold, name string) []Threshold {
	own := map[string]bool{}
	for _, t := range ts {
		if t.Config == name {
			own[t.Metric] = true
		}
	}
	var out []Threshold
	for _, t := range ts {
		if t.Config == name || (t.Config == "" && !own[t.Metric]) {
			out = append(out, t)
		}
	}
	return out
}

// canonicalThresholds renders the rules the way a plan writes them, keeping
// only those about configurations the plan (as run) has.
func canonicalThresholds(ts []Threshold, configs []Configuration) map[string]any {
	if len(ts) == 0 {
		return nil
	}
	have := names(configs)
	out := map[string]any{}
	for _, t := range ts {
		v := t.Op + " " + strconv.FormatFloat(t.Limit, 'f', -1, 64) + " x baseline"
		if t.Config == "" {
			out[t.Metric] = v
			continue
		}
		if !contains(have, t.Config) {
			continue
		}
		m, _ := out[t.Config].(map[string]any)
		if m == nil {
			m = map[string]any{}
			out[t.Config] = m
		}
		m[t.Metric] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

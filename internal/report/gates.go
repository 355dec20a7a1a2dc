package report

import (
	"fmt"
	"slices"
	"strings"

	"ctrperf/internal/plan"
	"ctrperf/internal/stats"
)

// Gate statuses.
const (
	GateOK     = "ok"
	GateBroken = "broken"
)

// GateResult is one threshold checked against one configuration.
type GateResult struct {
	Config string `json:"config"`
	Metric string `json:"metric"`
	// Rule is the requirement ("p99_ms < 1.1 x bare-metal"); Text the rule
	// as written (plan line or --fail-on argument).
	Rule   string   `json:"rule"`
	Text   string   `json:"text"`
	Ratio  *float64 `json:"ratio"`
	CILow  *float64 `json:"ci_low"`
	CIHigh *float64 `json:"ci_high"`
	// Status is GateOK, GateBroken or "not checked: why".
	Status string `json:"status"`
}

// Broken says whether the whole interval of the ratio is beyond the rule.
func (g GateResult) Broken() bool { return g.Status == GateBroken }

// String names everything a CI log needs: configuration, metric, ratio,
// interval, rule and the outcome.
func (g GateResult) String() string {
	r := "ratio n/a"
	if g.Ratio != nil {
		r = "ratio " + fmtX(*g.Ratio)
		if g.CILow != nil && g.CIHigh != nil {
			r += " " + fmtXCI(*g.Ratio, *g.CILow, *g.CIHigh)
		}
	}
	verb := "meets"
	switch {
	case g.Broken():
		verb = "breaks"
	case g.Status != GateOK:
		verb = "(" + g.Status + ")"
	}
	return fmt.Sprintf("%s %s %s %s %q", g.Config, g.Metric, r, verb, g.Rule)
}

// ThresholdError is returned when a gate is broken. Commands exit with
// ExitCode (3) on it, so that CI can tell a regression from a failure.
type ThresholdError struct {
	Broken []GateResult
}

// ExitThreshold is the exit code of a broken threshold.
const ExitThreshold = 3

// ExitCode is the process exit code the error stands for.
func (e *ThresholdError) ExitCode() int { return ExitThreshold }

func (e *ThresholdError) Error() string {
	parts := make([]string, len(e.Broken))
	for i, g := range e.Broken {
		parts[i] = g.String()
	}
	n := "threshold"
	if len(e.Broken) > 1 {
		n = "thresholds"
	}
	return fmt.Sprintf("%d %s broken: %s", len(e.Broken), n, strings.Join(parts, "; "))
}

// gateError is nil when no gate is broken, else a *ThresholdError.
func gateError(gs []GateResult) error {
	var broken []GateResult
	for _, g := range gs {
		if g.Broken() {
			broken = append(broken, g)
		}
	}
	if len(broken) == 0 {
		return nil
	}
	return &ThresholdError{Broken: broken}
}

// comparable is what a gate needs of one configuration: whether it has
// results (or why not) and its ratio per metric.
type comparable struct {
	name   string
	status string // "" when it has results
	ratios map[string]stats.Comparison
}

// checkGates applies each rule to the configurations it concerns. A rule
// whose metric no configuration has, or that names a configuration that is
// not there, is an error: a gate that silently checks nothing is worse
// than none.
func checkGates(rules []plan.Threshold, configs []comparable, reference string) ([]GateResult, error) {
	var out []GateResult
	var problems []string
	for _, rule := range rules {
		measured, withResults, matched := false, false, false
		for _, c := range configs {
			if rule.Config != "" && rule.Config != c.name {
				continue
			}
			if rule.Config == "" && slices.ContainsFunc(rules, func(o plan.Threshold) bool { return o.Config == c.name && o.Metric == rule.Metric }) {
				continue // the configuration's own rule for this metric replaces it
			}
			matched = true
			g := GateResult{Config: c.name, Metric: rule.Metric, Rule: rule.Text, Text: rule.Text}
			if reference != "" {
				g.Rule = rule.Requirement(reference)
			}
			cmp, has := c.ratios[rule.Metric]
			switch {
			case c.status != "":
				g.Status = "not checked: " + c.status
			case !has:
				withResults = true
				g.Status = "not checked: " + rule.Metric + " not measured"
			default:
				measured = true
				g.Ratio, g.CILow, g.CIHigh = cmp.Ratio, cmp.CILow, cmp.CIHigh
				switch {
				case cmp.CILow == nil || cmp.CIHigh == nil:
					g.Status = "not checked: " + cmp.Verdict
				case rule.Broken(*cmp.CILow, *cmp.CIHigh):
					g.Status = GateBroken
				default:
					g.Status = GateOK
				}
			}
			out = append(out, g)
		}
		switch {
		case rule.Config != "" && !matched:
			problems = append(problems, fmt.Sprintf("threshold %q names configuration %q, which has no results to compare", rule.Text, rule.Config))
		case matched && withResults && !measured:
			problems = append(problems, fmt.Sprintf("threshold %q: no configuration measured %s (have: %s)", rule.Text, rule.Metric, strings.Join(metricNames(configs), ", ")))
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

func metricNames(cs []comparable) []string {
	seen := map[string]bool{}
	for _, c := range cs {
		for m := range c.ratios {
			seen[m] = true
		}
	}
	return sortedKeys(seen)
}

// CheckThresholds checks rules (the plan's thresholds) against every
// configuration's ratio to the baseline, keeps the results in
// rep.Thresholds for the renderers, and returns a *ThresholdError when one
// is broken (or an error when a rule cannot be checked at all).
func (rep *Report) CheckThresholds(rules []plan.Threshold) error {
	var cs []comparable
	for _, c := range rep.Configs {
		if c.Name == rep.Baseline {
			continue
		}
		cc := comparable{name: c.Name, ratios: c.VsBaseline}
		if b := rep.Config(rep.Baseline); !c.OK() {
			cc.status = c.status()
		} else if b == nil || !b.OK() {
			cc.status = "the baseline has no successful run"
		}
		cs = append(cs, cc)
	}
	gs, err := checkGates(rules, cs, rep.Baseline)
	rep.Thresholds = gs
	if err != nil {
		return err
	}
	return gateError(gs)
}

// CheckFailOn checks --fail-on rules against the second/first ratio of
// every configuration in both sets, keeps the results in c.Gates, and
// returns a *ThresholdError when one is broken.
func (c *Comparison) CheckFailOn(rules []plan.Threshold) error {
	var cs []comparable
	for _, cc := range c.Configs {
		x := comparable{name: cc.Name, ratios: map[string]stats.Comparison{}}
		if len(cc.Metrics) == 0 {
			x.status = "first " + cc.StatusFirst
			if strings.HasPrefix(cc.StatusFirst, "ok") {
				x.status = "second " + cc.StatusSecond
			}
		}
		for m, mc := range cc.Metrics {
			x.ratios[m] = mc.Ratio
		}
		cs = append(cs, x)
	}
	gs, err := checkGates(rules, cs, "") // the rules as written: 'p99_ms>+10%'
	c.Gates = gs
	if err != nil {
		return err
	}
	return gateError(gs)
}

// gateSection lists checked gates for the text renderers.
func gateSection(title, note string, gs []GateResult) (section, bool) {
	s := section{Title: title, Note: note,
		Header: []string{"config", "metric", "ratio", "95% CI of ratio", "rule", "result"}}
	for _, g := range gs {
		ratio, ci := "n/a", "n/a"
		if g.Ratio != nil {
			ratio = fmt.Sprintf("%.3f", *g.Ratio)
		}
		if g.CILow != nil && g.CIHigh != nil {
			ci = fmt.Sprintf("%.3f .. %.3f", *g.CILow, *g.CIHigh)
		}
		res := g.Status
		if g.Broken() {
			res = "BROKEN"
		}
		s.Rows = append(s.Rows, []string{g.Config, g.Metric, ratio, ci, g.Rule, res})
	}
	return s, len(s.Rows) > 0
}

package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"ctrperf/internal/stats"
)

// Comparison sets the same configurations of two result sets side by side
// (before and after a change, or two hosts): per configuration and metric,
// the medians in each and the ratio second/first with its interval.
type Comparison struct {
	First  string `json:"first"`  // label of the first set (its directory)
	Second string `json:"second"` // label of the second set
	// Resamples and Level describe the bootstrap behind every interval.
	Resamples int                 `json:"resamples"`
	Level     float64             `json:"level"`
	Configs   []*ConfigComparison `json:"configs"`
	// OnlyFirst and OnlySecond name configurations present in one set only.
	OnlyFirst  []string  `json:"only_first,omitempty"`
	OnlySecond []string  `json:"only_second,omitempty"`
	Warnings   []Warning `json:"warnings"`
	// Gates are the --fail-on rules, checked (CheckFailOn).
	Gates []GateResult `json:"gates,omitempty"`
}

// ConfigComparison is one configuration in both sets.
type ConfigComparison struct {
	Name        string `json:"name"`
	RunsFirst   int    `json:"runs_first"`
	RunsSecond  int    `json:"runs_second"`
	StatusFirst string `json:"status_first"`
	// StatusSecond is "ok" or what went wrong.
	StatusSecond string                      `json:"status_second"`
	Metrics      map[string]MetricComparison `json:"metrics,omitempty"`
}

// MetricComparison is one metric in both sets and their ratio.
type MetricComparison struct {
	First  stats.Estimate   `json:"first"`
	Second stats.Estimate   `json:"second"`
	Ratio  stats.Comparison `json:"second_vs_first"`
}

// CompareDirs loads two results directories and compares them. Each set's
// bootstrap draws from its own streams, so the two are resampled
// independently even though their configuration names are the same.
func CompareDirs(first, second string, opts ...Option) (*Comparison, error) {
	a, err := Load(first, append(opts, withKeyPrefix("first|"))...)
	if err != nil {
		return nil, err
	}
	b, err := Load(second, append(opts, withKeyPrefix("second|"))...)
	if err != nil {
		return nil, err
	}
	return Compare(first, a, second, b), nil
}

// Compare sets two reports side by side; labels name them in the output.
func Compare(firstLabel string, a *Report, secondLabel string, b *Report) *Comparison {
	c := &Comparison{First: firstLabel, Second: secondLabel, Resamples: a.Resamples, Level: a.Level,
		Configs: []*ConfigComparison{}, Warnings: []Warning{}}
	for _, ca := range a.Configs {
		cb := b.Config(ca.Name)
		if cb == nil {
			c.OnlyFirst = append(c.OnlyFirst, ca.Name)
			continue
		}
		cc := &ConfigComparison{Name: ca.Name, RunsFirst: ca.Runs, RunsSecond: cb.Runs,
			StatusFirst: ca.status(), StatusSecond: cb.status(), Metrics: map[string]MetricComparison{}}
		if ca.OK() && cb.OK() {
			for m, ea := range ca.Metrics {
				eb, ok := cb.Metrics[m]
				if !ok {
					continue
				}
				cc.Metrics[m] = MetricComparison{First: ea, Second: eb,
					Ratio: stats.CompareReplicates(stats.Ratio{Sense: a.sense(m), Level: a.Level,
						Num: stats.SideOf(eb, cb.reps[m]), Den: stats.SideOf(ea, ca.reps[m])})}
			}
		}
		c.Configs = append(c.Configs, cc)
	}
	for _, cb := range b.Configs {
		if a.Config(cb.Name) == nil {
			c.OnlySecond = append(c.OnlySecond, cb.Name)
		}
	}
	if len(c.OnlyFirst)+len(c.OnlySecond) > 0 {
		c.Warnings = append(c.Warnings, Warning{Message: fmt.Sprintf("configurations in one set only: %s",
			strings.Join(append(prefixAll(firstLabel+": ", c.OnlyFirst), prefixAll(secondLabel+": ", c.OnlySecond)...), ", ")),
			Advice: "only configurations with the same name are compared"})
	}
	for _, set := range []struct {
		label string
		r     *Report
	}{{firstLabel, a}, {secondLabel, b}} {
		for _, w := range set.r.Warnings {
			if w.Config == "" {
				w.Config = set.label
			} else {
				w.Config += " (" + set.label + ")"
			}
			c.Warnings = append(c.Warnings, w)
		}
	}
	return c
}

func prefixAll(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// CompareFormats are the formats RenderComparison accepts.
var CompareFormats = []string{"table", "md", "json"}

// RenderComparison writes c as table, md or json.
func RenderComparison(w io.Writer, c *Comparison, format string) error {
	var err error
	switch format {
	case "table":
		err = renderText(w, comparisonSections(c), false)
	case "md", "markdown":
		err = renderText(w, comparisonSections(c), true)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(c)
	default:
		return fmt.Errorf("unknown comparison format %q (want one of %s)", format, strings.Join(CompareFormats, ", "))
	}
	if err != nil {
		return fmt.Errorf("render %s comparison: %w", format, err)
	}
	return nil
}

func comparisonSections(c *Comparison) []section {
	head := section{Title: "ctrperf compare", Lines: []string{
		fmt.Sprintf("first: %s", c.First), fmt.Sprintf("second: %s", c.Second),
		fmt.Sprintf("ratio = second / first; %.0f%% percentile-bootstrap intervals over repetitions, each set resampled independently (%d resamples); an interval that contains 1.000 is no measurable difference.", c.Level*100, c.Resamples)}}
	s := section{Title: "Per configuration",
		Header: []string{"config", "metric", "first", "second", "ratio", "95% CI of ratio", "verdict"}}
	for _, cc := range c.Configs {
		if len(cc.Metrics) == 0 {
			why := "first " + cc.StatusFirst
			if strings.HasPrefix(cc.StatusFirst, "ok") {
				why = "second " + cc.StatusSecond
			}
			s.Rows = append(s.Rows, []string{cc.Name, "-", "-", "-", "-", "-", "no comparison: " + cut(why, 70)})
			continue
		}
		metrics := append([]string{}, summaryMetrics...)
		for _, m := range sortedKeys(cc.Metrics) {
			if !standardMetrics[m] {
				metrics = append(metrics, m)
			}
		}
		for _, m := range metrics {
			mc, ok := cc.Metrics[m]
			if !ok {
				continue
			}
			s.Rows = append(s.Rows, []string{cc.Name, metricLabel(m), fmtMetric(m, mc.First.Median), fmtMetric(m, mc.Second.Median),
				fmtRatio(mc.Ratio.Ratio), fmtRatioCI(mc.Ratio), verdictText(mc.Ratio, mc.First.N, mc.Second.N)})
		}
	}
	out := []section{head, s}
	if g, ok := gateSection("Gates (--fail-on)", "a rule is broken only when the whole interval of the ratio is beyond it", c.Gates); ok {
		out = append(out, g)
	}
	return append(out, warningSection(c.Warnings))
}

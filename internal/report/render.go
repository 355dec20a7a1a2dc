package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// Formats Render accepts. "summary" is the short terminal form that bench
// prints at the end of a run: configurations vs the baseline and warnings.
var Formats = []string{"table", "md", "json", "csv", "html", "summary"}

// Render writes rep in format (table, md, json, csv, html, summary).
func Render(w io.Writer, rep *Report, format string) error {
	var err error
	switch format {
	case "table":
		err = renderText(w, textSections(rep, false), false)
	case "summary":
		err = renderText(w, summarySections(rep), false)
	case "md", "markdown":
		err = renderText(w, textSections(rep, true), true)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	case "csv":
		err = renderCSV(w, rep)
	case "html":
		err = renderHTML(w, rep)
	default:
		return fmt.Errorf("unknown report format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return fmt.Errorf("render %s report: %w", format, err)
	}
	return nil
}

// fmtNum prints a figure with about three significant digits, which is all
// the precision repeated benchmark runs support.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.01:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// fmtPercent prints a fraction as a percentage.
func fmtPercent(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	p := f * 100
	switch {
	case p == 0:
		return "0%"
	case p >= 10:
		return fmt.Sprintf("%.1f%%", p)
	case p >= 0.01:
		return fmt.Sprintf("%.2f%%", p)
	default:
		return fmt.Sprintf("%.1g%%", p)
	}
}

// fmtMetric prints a metric's value in its display unit.
func fmtMetric(metric string, v float64) string {
	if metric == results.MetricErrorRate {
		return fmtPercent(v)
	}
	return fmtNum(v)
}

// fmtCI prints an interval or says why there is none.
func fmtCI(metric string, lo, hi *float64) string {
	if lo == nil || hi == nil {
		return "n/a"
	}
	return fmtMetric(metric, *lo) + " .. " + fmtMetric(metric, *hi)
}

func fmtRatio(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *p)
}

func fmtRatioCI(c stats.Comparison) string {
	if c.CILow == nil || c.CIHigh == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f .. %.3f", *c.CILow, *c.CIHigh)
}

// metricLabel is how a metric is titled in tables.
func metricLabel(m string) string {
	switch m {
	case results.MetricThroughput:
		return "throughput/s"
	case results.MetricKBPerS:
		return "KB/s"
	case results.MetricErrorRate:
		return "error %"
	case results.MetricSamples:
		return "samples/run"
	case results.MetricMeanMs:
		return "mean ms"
	case results.MetricP50Ms:
		return "median ms"
	}
	if strings.HasSuffix(m, "_ms") {
		return strings.TrimSuffix(m, "_ms") + " ms"
	}
	return m
}

// standardMetrics are shown in the aggregate table; the rest of a
// configuration's metrics (elapsed_s, a tool's own figures) go to "other".
var standardMetrics = map[string]bool{
	results.MetricThroughput: true, results.MetricKBPerS: true, results.MetricErrorRate: true, results.MetricSamples: true,
	results.MetricMeanMs: true, results.MetricP50Ms: true, results.MetricP90Ms: true, results.MetricP95Ms: true, results.MetricP99Ms: true, results.MetricP999Ms: true, results.MetricMinMs: true, results.MetricMaxMs: true,
}

// summaryMetrics are compared with the baseline in the summary, in order,
// when the configuration has them (the seed's final table: 90% line, error %,
// KB/s, plus the primary rate and the tail).
var summaryMetrics = []string{results.MetricThroughput, results.MetricP50Ms, results.MetricP90Ms, results.MetricP99Ms, results.MetricErrorRate, results.MetricKBPerS}

// otherMetrics are a configuration's non-standard metrics in a stable order.
func otherMetrics(rep *Report) []string {
	seen := map[string]bool{}
	for _, c := range rep.Configs {
		for k := range c.Metrics {
			if !standardMetrics[k] && !capacityMetrics[k] {
				seen[k] = true
			}
		}
	}
	return sortedKeys(seen)
}

// status is a configuration's runs in words.
func (c *ConfigResult) status() string {
	switch {
	case c.Runs == 0 && c.NotRun > 0 && c.Failed == 0:
		return "NOT RUN: " + strings.Join(c.Errors, "; ")
	case c.Runs == 0:
		return "FAILED: " + strings.Join(c.Errors, "; ")
	case c.Failed+c.NotRun > 0:
		parts := []string{fmt.Sprintf("%d ok", c.Runs)}
		if c.Failed > 0 {
			parts = append(parts, fmt.Sprintf("%d failed", c.Failed))
		}
		if c.NotRun > 0 {
			parts = append(parts, fmt.Sprintf("%d not run", c.NotRun))
		}
		return strings.Join(parts, ", ")
	}
	return "ok"
}

// fewRuns is below which repetition count a verdict is flagged in tables:
// the interval's real coverage is far below 95% there (see warnings).
const fewRuns = 3

// verdictText is a comparison's verdict, flagged when it rests on too few
// repetitions on either side.
func verdictText(c stats.Comparison, n1, n2 int) string {
	if c.Significant() && min(n1, n2) < fewRuns {
		return fmt.Sprintf("%s (only %d runs)", c.Verdict, min(n1, n2))
	}
	return c.Verdict
}

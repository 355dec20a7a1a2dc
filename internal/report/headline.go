package report

import (
	"fmt"
	"math"
	"strings"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// fmtX prints a ratio for a sentence: two decimals, three when it is
// within 10% of 1 (1.004 must not read as 1.00).
func fmtX(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	if math.Abs(r-1) < 0.1 {
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtXCI prints the interval of ratio r with fmtX's precision for r.
func fmtXCI(r, lo, hi float64) string {
	f := "%.2f"
	if math.Abs(r-1) < 0.1 {
		f = "%.3f"
	}
	return fmt.Sprintf("["+f+", "+f+"]", lo, hi)
}

// headlineMetrics picks what a configuration's line speaks of: the
// workload's primary latency (median, else mean, else its tail), the p99
// tail, and the primary rate; a tool without those, its elapsed time, else
// its first own figure.
func headlineMetrics(b *ConfigResult) []string {
	var out []string
	for _, m := range []string{results.MetricP50Ms, results.MetricMeanMs} {
		if _, ok := b.Metrics[m]; ok {
			out = append(out, m)
			break
		}
	}
	if _, ok := b.Metrics[results.MetricP99Ms]; ok {
		out = append(out, results.MetricP99Ms)
	}
	if _, ok := b.Metrics[results.MetricThroughput]; ok {
		out = append(out, results.MetricThroughput)
	}
	if len(out) == 0 {
		if _, ok := b.Metrics[results.MetricElapsed]; ok {
			out = append(out, results.MetricElapsed)
		} else if ks := sortedKeys(b.Metrics); len(ks) > 0 {
			out = append(out, ks[0])
		}
	}
	return out
}

// headlineLabel names a metric in a sentence.
func headlineLabel(m string) string {
	switch m {
	case results.MetricP50Ms:
		return "median latency"
	case results.MetricMeanMs:
		return "mean latency"
	case results.MetricP99Ms:
		return "p99 latency"
	case results.MetricThroughput:
		return "throughput"
	case results.MetricElapsed:
		return "elapsed time"
	}
	return metricLabel(m)
}

// runsCaveat is the sample-size caveat that goes with a verdict resting on
// fewer than 5 repetitions on one side, "" otherwise.
func runsCaveat(n int) string {
	switch {
	case n < 2:
		return ""
	case n < 5:
		return fmt.Sprintf("only %d runs: intervals are approximate below 5", n)
	}
	return ""
}

// headline answers first: per configuration, in words, the differences
// whose interval excludes 1 (configurations with one come first), or that
// there is none, or why it could not be compared.
func headline(rep *Report) []string {
	b := rep.Config(rep.Baseline)
	if b == nil || !b.OK() {
		return []string{fmt.Sprintf("no comparison: the baseline %s has no successful run", rep.Baseline)}
	}
	if len(rep.Configs) == 1 {
		return []string{fmt.Sprintf("%s only: nothing to compare it with", b.Name)}
	}
	metrics := headlineMetrics(b)
	var diff, same, none, emulated []string
	for _, c := range rep.Configs {
		if c == b {
			continue
		}
		if !c.OK() {
			none = append(none, fmt.Sprintf("%s: no result (%s)", c.Name, cut(c.status(), 100)))
			continue
		}
		if c.Emulated {
			var figs []string
			for _, m := range metrics {
				if e, ok := c.Metrics[m]; ok {
					figs = append(figs, headlineLabel(m)+" "+fmtMetric(m, e.Median)+metricUnit(m))
				}
			}
			emulated = append(emulated, fmt.Sprintf("%s: %s (ran: %s; no ratio to %s)", c.Label(), EmulatedNote, strings.Join(figs, ", "), b.Name))
			continue
		}
		var sig, flat, undefined []string
		why := ""
		n := c.Runs
		for _, m := range metrics {
			cmp, ok := c.VsBaseline[m]
			if !ok {
				continue
			}
			n = min(n, c.Metrics[m].N, b.Metrics[m].N)
			switch {
			case cmp.Significant():
				ref := ""
				if len(sig) == 0 {
					ref = " " + b.Name
				}
				sig = append(sig, fmt.Sprintf("%s %s%s %s", headlineLabel(m), fmtX(*cmp.Ratio), ref, fmtXCI(*cmp.Ratio, *cmp.CILow, *cmp.CIHigh)))
			case cmp.Verdict == stats.NoDifference || cmp.Verdict == stats.BothZero:
				flat = append(flat, headlineLabel(m))
			default:
				r := "n/a"
				if cmp.Ratio != nil {
					r = fmtX(*cmp.Ratio)
				}
				undefined = append(undefined, fmt.Sprintf("%s %s", headlineLabel(m), r))
				why = cmp.Verdict
			}
		}
		caveat := runsCaveat(n)
		switch {
		case len(sig) > 0:
			line := c.Name + ": " + strings.Join(sig, ", ")
			if len(flat) > 0 {
				line += "; " + andList(flat) + " unchanged"
			}
			if caveat != "" {
				line += " (" + caveat + ")"
			}
			diff = append(diff, line)
		case len(undefined) > 0:
			if n < 2 {
				why = "only 1 repetition: at least 2 on each side are needed"
			}
			same = append(same, fmt.Sprintf("%s: %s of %s, no interval (%s)", c.Name, strings.Join(undefined, ", "), b.Name, why))
		default:
			line := fmt.Sprintf("%s: no measurable difference from %s in %s", c.Name, b.Name, orList(flat))
			if caveat != "" {
				line += " (" + caveat + ")"
			}
			same = append(same, line)
		}
	}
	return append(append(append(diff, same...), none...), emulated...)
}

// metricUnit is the unit a figure of metric m is read in, by its name.
func metricUnit(m string) string {
	switch {
	case strings.HasSuffix(m, "_ms"):
		return " ms"
	case strings.HasSuffix(m, "_per_s"):
		return "/s"
	case strings.HasSuffix(m, "_s"):
		return " s"
	}
	return ""
}

// orList joins "a", "a or b", "a, b or c".
func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// andList joins "a", "a and b", "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

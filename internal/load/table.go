package load

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/results"
)

// AggregateRow is one line of the JMeter "aggregate report" the source
// documents print per operation. Times are in milliseconds.
type AggregateRow struct {
	Label                          string
	Samples                        int64
	Errors                         int64
	MeanMs, MedianMs, P90Ms, P99Ms float64
	// P95Ms and P999Ms are not in the table, only in JSON; 0 when a
	// wrapped tool did not report them.
	P95Ms, P999Ms          float64
	MinMs, MaxMs           float64
	ErrorPct               float64
	ThroughputPerS, KBPerS float64
	HasLatency             bool // false when the operation carried no latency data
}

// TotalLabel names the row that sums all operations.
const TotalLabel = "TOTAL"

// AggregateRows computes the rows of m in the given label order (labels of
// m not in order follow, sorted), then a TOTAL row over all operations
// with a merged histogram. Rates are per second of m.DurationS.
func AggregateRows(m *results.Measurement, order []string) ([]AggregateRow, error) {
	labels := orderedLabels(m, order)
	var rows []AggregateRow
	total := AggregateRow{Label: TotalLabel}
	merged := results.NewHistogram()
	var totalErrs, totalBytes int64
	haveHist := false
	for _, l := range labels {
		op := m.Operations[l]
		row := AggregateRow{Label: l, Samples: op.Count}
		if op.Histogram != "" {
			h, err := results.DecodeHistogram(op.Histogram)
			if err != nil {
				return nil, fmt.Errorf("operation %q: %w", l, err)
			}
			fillFromHist(&row, h)
			merged.Merge(h)
			haveHist = true
		} else if len(op.PercentilesMs) > 0 || op.MeanMs > 0 {
			row.HasLatency = true
			row.MeanMs = op.MeanMs
			row.MedianMs = pct(op.PercentilesMs, "50")
			row.P90Ms = pct(op.PercentilesMs, "90")
			row.P99Ms = pct(op.PercentilesMs, "99")
			row.P95Ms = pct(op.PercentilesMs, "95")
			row.P999Ms = pct(op.PercentilesMs, "99.9")
			row.MinMs = pct(op.PercentilesMs, "min")
			row.MaxMs = pct(op.PercentilesMs, "max")
		}
		errs := op.ErrorCount()
		row.Errors = errs
		if op.Count > 0 {
			row.ErrorPct = 100 * float64(errs) / float64(op.Count)
		}
		if m.DurationS > 0 {
			row.ThroughputPerS = float64(op.Count) / m.DurationS
			row.KBPerS = float64(op.Bytes) / 1024 / m.DurationS
		}
		rows = append(rows, row)
		total.Samples += op.Count
		totalErrs += errs
		totalBytes += op.Bytes
	}
	if len(rows) > 1 {
		if haveHist {
			fillFromHist(&total, merged)
		}
		total.Errors = totalErrs
		if total.Samples > 0 {
			total.ErrorPct = 100 * float64(totalErrs) / float64(total.Samples)
		}
		if m.DurationS > 0 {
			total.ThroughputPerS = float64(total.Samples) / m.DurationS
			total.KBPerS = float64(totalBytes) / 1024 / m.DurationS
		}
		rows = append(rows, total)
	}
	return rows, nil
}

func orderedLabels(m *results.Measurement, order []string) []string {
	var labels []string
	seen := map[string]bool{}
	for _, l := range order {
		if _, ok := m.Operations[l]; ok && !seen[l] {
			labels = append(labels, l)
			seen[l] = true
		}
	}
	var rest []string
	for l := range m.Operations {
		if !seen[l] {
			rest = append(rest, l)
		}
	}
	sort.Strings(rest)
	return append(labels, rest...)
}

// pct looks a percentile up by the keys wrapped tools use ("50", "p50", "50.000000").
func pct(p map[string]float64, key string) float64 {
	for _, k := range []string{key, "p" + key, key + ".000000", key + ".0"} {
		if v, ok := p[k]; ok {
			return v
		}
	}
	return 0
}

func fillFromHist(r *AggregateRow, h *hdrhistogram.Histogram) {
	if h.TotalCount() == 0 {
		return
	}
	r.HasLatency = true
	for name, dst := range map[string]*float64{results.MetricMeanMs: &r.MeanMs, results.MetricP50Ms: &r.MedianMs,
		results.MetricP90Ms: &r.P90Ms, results.MetricP95Ms: &r.P95Ms, results.MetricP99Ms: &r.P99Ms,
		results.MetricP999Ms: &r.P999Ms, results.MetricMinMs: &r.MinMs, results.MetricMaxMs: &r.MaxMs} {
		*dst, _ = results.HistogramFigure(h, name)
	}
}

// WriteAggregateTable prints the per-label table (label, samples, mean,
// median, 90%, 99%, min, max in ms, error %, throughput/s, KB/s) followed by
// the generator's line: target vs achieved rate, late starts, CPU used. It is
// the table of `ctrperf load` and is meant to be reused by reports.
func WriteAggregateTable(w io.Writer, m *results.Measurement, order []string) error {
	rows, err := AggregateRows(m, order)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "label\tsamples\tmean\tmedian\t90%\t99%\tmin\tmax\terror %\tthroughput/s\tKB/s\t")
	for _, r := range rows {
		lat := []string{"-", "-", "-", "-", "-", "-"}
		if r.HasLatency {
			lat = []string{f2(r.MeanMs), f2(r.MedianMs), f2(r.P90Ms), f2(r.P99Ms), f2(r.MinMs), f2(r.MaxMs)}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.1f\t%.1f\t\n", r.Label, r.Samples, strings.Join(lat, "\t"), r.ErrorPct, r.ThroughputPerS, r.KBPerS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(times in ms)")
	if l := m.Load; l != nil {
		switch l.Mode {
		case "open":
			fmt.Fprintf(w, "open loop: target %.1f sessions/s, achieved %.1f/s (%.1f%%), late %d\n",
				l.TargetRate, l.AchievedRate, 100*safeDiv(l.AchievedRate, l.TargetRate), l.Late)
			if l.LatenessMaxMs > 0 {
				fmt.Fprintf(w, "generator lateness (intended start to dispatch, included in the latencies): p50 %.2f, p99 %.2f, max %.2f ms\n",
					l.LatenessP50Ms, l.LatenessP99Ms, l.LatenessMaxMs)
			}
		case "closed":
			fmt.Fprintf(w, "closed loop: %d workers\n", l.Concurrency)
		}
		if l.CPUSeconds > 0 || l.CPUSet != "" {
			cpus := l.CPUSet
			if cpus == "" {
				cpus = "any"
			}
			fmt.Fprintf(w, "generator: %.2f CPU s (%.1f%% of one core) on CPUs %s\n", l.CPUSeconds, 100*safeDiv(l.CPUSeconds, m.DurationS), cpus)
		}
	}
	var keys []string
	for k := range m.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.4g", k, m.Metrics[k]))
	}
	if len(parts) > 0 {
		fmt.Fprintln(w, strings.Join(parts, "  "))
	}
	for _, n := range m.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

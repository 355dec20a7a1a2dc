package bench

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// SummaryRow is one configuration's short result: what the end of
// `ctrperf bench run` prints. The full statistics (confidence intervals,
// latency percentiles, verdicts) are the report's job.
type SummaryRow struct {
	Config   string
	Baseline bool
	OK       int
	Failed   int
	NotRun   int
	// MedianThroughput is the median of throughput_per_s over the ok runs
	// (NaN when there are none); Ratio is it over the baseline's.
	MedianThroughput float64
	Ratio            float64
}

// SummaryRows condenses records into one row per configuration, in plan
// order.
func SummaryRows(p *plan.Plan, recs []results.RunRecord) []SummaryRow {
	byConfig := map[string]*SummaryRow{}
	tput := map[string][]float64{}
	var rows []*SummaryRow
	for _, c := range p.Configurations {
		r := &SummaryRow{Config: c.Name, Baseline: c.Name == p.Baseline}
		byConfig[c.Name] = r
		rows = append(rows, r)
	}
	for _, rec := range recs {
		r, ok := byConfig[rec.Config]
		if !ok || rec.Plan != p.Name {
			continue
		}
		switch rec.Status {
		case results.StatusOK:
			r.OK++
			if rec.Result != nil {
				if v, ok := rec.Result.Metrics["throughput_per_s"]; ok {
					tput[rec.Config] = append(tput[rec.Config], v)
				}
			}
		case results.StatusFailed:
			r.Failed++
		case results.StatusNotRun:
			r.NotRun++
		}
	}
	base := math.NaN()
	for _, r := range rows {
		r.MedianThroughput = math.NaN()
		if xs := tput[r.Config]; len(xs) > 0 {
			r.MedianThroughput = stats.Median(xs)
		}
		if r.Baseline {
			base = r.MedianThroughput
		}
	}
	out := make([]SummaryRow, len(rows))
	for i, r := range rows {
		r.Ratio = math.NaN()
		if base > 0 && !math.IsNaN(r.MedianThroughput) {
			r.Ratio = r.MedianThroughput / base
		}
		out[i] = *r
	}
	return out
}

// writeSummary prints the short table for everything in the output
// directory (earlier invocations included) and points at the full report.
func writeSummary(w io.Writer, s *Summary) {
	recs, err := results.ReadDir(s.Out)
	if err != nil {
		// The records of this invocation are still known.
		recs = s.Records
	}
	fmt.Fprintf(w, "\n%d runs this time: %d ok, %d failed, %d not run", len(s.Records), s.OK, s.Failed, s.NotRun)
	if s.Skipped > 0 {
		fmt.Fprintf(w, " (%d done before)", s.Skipped)
	}
	if s.Interrupted {
		fmt.Fprint(w, "; interrupted")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "configuration\truns ok\tfailed\tnot run\tmedian throughput/s\tvs baseline\t")
	for _, r := range SummaryRows(s.Plan, recs) {
		name := r.Config
		if r.Baseline {
			name += " (baseline)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t\n", name, r.OK, r.Failed, r.NotRun, num(r.MedianThroughput, "%.1f"), num(r.Ratio, "%.3f"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nresults: %s\nconfidence intervals and latencies: ctrperf report %s\n", s.Out, s.Out)
}

func num(v float64, format string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

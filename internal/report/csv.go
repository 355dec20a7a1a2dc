package report

import (
	"encoding/csv"
	"io"
	"strconv"

	"ctrperf/internal/stats"
)

// csvHeader is the tidy layout: one row per configuration × operation ×
// metric. operation is empty for the configuration as a whole; the ratio
// columns compare with the baseline and are empty where undefined.
var csvHeader = []string{"config", "operation", "metric", "median", "ci_low", "ci_high", "n",
	"ratio", "ratio_ci_low", "ratio_ci_high", "verdict"}

func renderCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	fp := func(p *float64) string {
		if p == nil {
			return ""
		}
		return f(*p)
	}
	for _, c := range rep.Configs {
		// Run counts as rows, so a configuration without successful runs is
		// still visible, with counts and no figures.
		for _, kv := range []struct {
			k string
			v int
		}{{"runs", c.Runs}, {"failed", c.Failed}, {"not_run", c.NotRun}} {
			if err := cw.Write([]string{c.Name, "", kv.k, strconv.Itoa(kv.v), "", "", "", "", "", "", ""}); err != nil {
				return err
			}
		}
		// A capacity search's outcomes as counts of runs: a configuration
		// below the lowest rate has no capacity_per_s row, only these.
		if cp := c.Capacity; cp != nil {
			for _, kv := range []struct {
				k string
				v int
			}{{"capacity_found_runs", cp.Found}, {"capacity_bounded_runs", cp.Bounded}, {"capacity_at_least_runs", cp.AtLeast}, {"capacity_below_runs", cp.Below}} {
				if err := cw.Write([]string{c.Name, "", kv.k, strconv.Itoa(kv.v), "", "", "", "", "", "", ""}); err != nil {
					return err
				}
			}
		}
		write := func(op, m string, e stats.Estimate, cmp *stats.Comparison) error {
			row := []string{c.Name, op, m, f(e.Median), fp(e.CILow), fp(e.CIHigh), strconv.Itoa(e.N), "", "", "", ""}
			if cmp != nil {
				row[7], row[8], row[9], row[10] = fp(cmp.Ratio), fp(cmp.CILow), fp(cmp.CIHigh), cmp.Verdict
			}
			return cw.Write(row)
		}
		for _, m := range sortedKeys(c.Metrics) {
			var cmp *stats.Comparison
			if v, ok := c.VsBaseline[m]; ok {
				cmp = &v
			}
			if err := write("", m, c.Metrics[m], cmp); err != nil {
				return err
			}
		}
		for _, op := range c.OperationNames() {
			for _, m := range sortedKeys(c.Operations[op]) {
				if err := write(op, m, c.Operations[op][m], nil); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// Capacity is what a configuration's capacity searches (load.search) found
// over its successful runs. The capacity itself is the metric
// capacity_per_s (median, interval, ratio to the baseline like any
// metric); a run whose lowest rate failed has no such value, which only
// this summary tells.
type Capacity struct {
	SLO  string  `json:"slo"` // "p99_ms ≤ 50, error_rate ≤ 0.01"
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Runs is the number of successful runs that searched; the others
	// count them by outcome (results.Capacity*).
	Runs    int `json:"runs"`
	Found   int `json:"found"`
	Bounded int `json:"bounded"`
	AtLeast int `json:"at_least"`
	Below   int `json:"below"`
	// Steps and SearchS are the medians of the searches' steps and time.
	Steps   float64 `json:"steps"`
	SearchS float64 `json:"search_s"`
	// Text is the outcome in words, as the report shows it: "found within
	// 5%", "below the lowest rate tried (50/s)", "at least 5000/s", ….
	Text string `json:"text"`
}

// summarizeCapacity reads the searches of a configuration's runs; nil when
// none searched.
func summarizeCapacity(ok []runData) *Capacity {
	var c *Capacity
	var steps, secs []float64
	var precision float64
	for _, d := range ok {
		s := d.rec.Result.Capacity
		if s == nil {
			continue
		}
		if c == nil {
			c = &Capacity{SLO: sloText(s.SLO), From: s.From, To: s.To}
			precision = s.Precision
		}
		c.Runs++
		switch s.Outcome {
		case results.CapacityFound:
			c.Found++
		case results.CapacityBounded:
			c.Bounded++
		case results.CapacityAtLeast:
			c.AtLeast++
		case results.CapacityBelow:
			c.Below++
		}
		steps = append(steps, float64(len(s.Steps)))
		secs = append(secs, s.ElapsedS)
	}
	if c == nil {
		return nil
	}
	c.Steps, c.SearchS = stats.Median(steps), stats.Median(secs)
	of := func(n int) string {
		if n == c.Runs {
			return ""
		}
		return fmt.Sprintf(" in %d of %d runs", n, c.Runs)
	}
	var parts []string
	if c.Below > 0 {
		parts = append(parts, fmt.Sprintf("below the lowest rate tried (%s/s)%s", fmtRate(c.From), of(c.Below)))
	}
	if c.AtLeast > 0 {
		parts = append(parts, fmt.Sprintf("at least %s/s%s: no rate tried failed, the capacity is a lower bound", fmtRate(c.To), of(c.AtLeast)))
	}
	if c.Bounded > 0 {
		parts = append(parts, fmt.Sprintf("bisection cut short by max_steps/max_time%s", of(c.Bounded)))
	}
	if c.Found > 0 {
		parts = append(parts, fmt.Sprintf("found within %s%%%s", strconv.FormatFloat(precision*100, 'g', -1, 64), of(c.Found)))
	}
	c.Text = strings.Join(parts, "; ")
	return c
}

// sloText is an SLO in a stable order: latencies by quantile, then errors.
func sloText(slo map[string]float64) string {
	keys := sortedKeys(slo)
	rank := func(k string) int {
		for i, f := range []string{results.MetricP50Ms, results.MetricP90Ms, results.MetricP95Ms, results.MetricP99Ms, results.MetricP999Ms, results.MetricErrorRate} {
			if k == f {
				return i
			}
		}
		return 99
	}
	sort.SliceStable(keys, func(i, j int) bool { return rank(keys[i]) < rank(keys[j]) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" ≤ "+strconv.FormatFloat(slo[k], 'g', -1, 64))
	}
	return strings.Join(parts, ", ")
}

// capacitySection is the capacity of every configuration that searched:
// median [interval], ratio to the baseline, the search's cost and its
// outcome in words. A configuration whose searches found no passing rate
// shows "below the lowest rate tried" instead of a number.
func capacitySection(rep *Report) (section, bool) {
	slos := map[string]bool{}
	for _, c := range rep.Configs {
		if c.Capacity != nil {
			slos[c.Capacity.SLO] = true
		}
	}
	if len(slos) == 0 {
		return section{}, false
	}
	s := section{Title: "Capacity at the SLO",
		Note:   "the highest offered rate (load.rate's unit per second) that met the SLO, searched in every run: median [95% CI] across runs and ratio to the baseline; each run's other figures are those of its highest passing step, so they compare different offered rates",
		Header: []string{"config", "capacity/s", "95% CI", "ratio", "95% CI of ratio", "verdict", "steps/run", "search s/run", "result"}}
	oneSLO := len(slos) == 1
	if oneSLO {
		for slo := range slos {
			s.Note = "SLO " + slo + ". " + strings.ToUpper(s.Note[:1]) + s.Note[1:]
		}
	} else {
		s.Header = append(s.Header[:1], append([]string{"SLO"}, s.Header[1:]...)...)
	}
	b := rep.Config(rep.Baseline)
	for _, c := range rep.Configs {
		row := []string{c.Name}
		capa := c.Capacity
		if !oneSLO {
			slo := "-"
			if capa != nil {
				slo = capa.SLO
			}
			row = append(row, slo)
		}
		switch {
		case !c.OK():
			row = append(row, "-", "-", "-", "-", "-", "-", "-", cut(c.status(), 70))
		case capa == nil:
			row = append(row, "-", "-", "-", "-", "-", "-", "-", "no capacity search")
		default:
			e, has := c.Metrics[results.MetricCapacity]
			value, ci, ratio, ratioCI, verdict := "below "+fmtRate(capa.From), "-", "-", "-", "no capacity: no rate met the SLO"
			if has {
				value, ci = fmtNum(e.Median), fmtCI(results.MetricCapacity, e.CILow, e.CIHigh)
				switch {
				case e.Median < capa.From:
					value = "below " + fmtRate(capa.From) // most runs found no passing rate
				case capa.AtLeast > 0:
					value = "≥ " + value
				}
				ratio, verdict = "-", "baseline"
				if c != b {
					ratio, ratioCI, verdict = "n/a", "n/a", "no baseline capacity"
					if cmp, ok := c.VsBaseline[results.MetricCapacity]; ok {
						ratio, ratioCI, verdict = fmtRatio(cmp.Ratio), fmtRatioCI(cmp), verdictText(cmp, e.N, b.Metrics[results.MetricCapacity].N)
						if capa.AtLeast > 0 || (b.Capacity != nil && b.Capacity.AtLeast > 0) {
							verdict += " (a side is only a lower bound)"
						}
					}
				}
			}
			row = append(row, value, ci, ratio, ratioCI, verdict, fmtNum(capa.Steps), fmtNum(capa.SearchS), capa.Text)
		}
		s.Rows = append(s.Rows, row)
	}
	return s, true
}

// capacityMetrics are shown by the capacity section rather than among the
// other metrics.
var capacityMetrics = map[string]bool{results.MetricCapacity: true, results.MetricCapacitySteps: true, results.MetricCapacitySearch: true}

// fmtRate prints a rate a plan wrote (from, to) as written: 50, 2.5.
func fmtRate(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return fmtNum(v)
}

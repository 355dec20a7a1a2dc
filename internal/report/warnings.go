package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// Advice texts, shared so that the same problem always reads the same way.
const (
	adviceRepetitions = "set repetitions: 5 or more for an interval that means what it says"
	adviceNoisy       = "noisy: add repetitions or lengthen duration"
	adviceRate        = "the load generator or the system could not keep up, so latencies describe an overloaded system: lower the rate, or give the load generator its own CPUs"
	adviceErrors      = "errors distort latency (a refused request is fast, a timeout is slow): find their cause before comparing"
	adviceFailed      = "failed runs are left out of the statistics; fix the cause and resume the plan"
	// adviceNotRunnable: every run not_run, none failed — the configuration
	// cannot run here (no VM runtime, a storage driver the kernel lacks, a
	// capability dockerd lacks); resuming would only record it again.
	adviceNotRunnable = "nothing was measured: this configuration cannot run on this machine as it is, for the reason given (`ctrperf doctor` shows what is missing); resuming records it not_run again until that changes"
)

// wideLimit is the interval width, relative to the median, above which an
// estimate is called noisy.
const wideLimit = 0.20

// rateShortfall is how far below its target the achieved rate may fall
// before the run counts as not keeping up.
const rateShortfall = 0.95

func configWarnings(c *ConfigResult, ok []runData) []Warning {
	var w []Warning
	add := func(msg, advice string) { w = append(w, Warning{Config: c.Name, Message: msg, Advice: advice}) }

	if bad := c.Failed + c.NotRun; bad > 0 {
		total := bad + c.Runs
		var parts []string
		if c.Failed > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d runs failed", c.Failed, total))
		}
		if c.NotRun > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d runs were not run", c.NotRun, total))
		}
		advice := adviceFailed
		if c.Failed == 0 && c.Runs == 0 {
			advice = adviceNotRunnable
		}
		add(strings.Join(parts, ", ")+": "+strings.Join(c.Errors, "; "), advice)
	}
	switch n := c.Runs; {
	case n == 0:
		return w
	case n == 1:
		add("1 successful repetition: no confidence interval", adviceRepetitions)
	case n < 5:
		cov := stats.MedianCoverage(n, 0.95)
		what := "less than 95%"
		if !math.IsNaN(cov) {
			what = fmt.Sprintf("only about %.0f%%", cov*100)
		}
		add(fmt.Sprintf("%d successful repetitions: the nominal 95%% interval of a median covers the true value %s of the time", n, what),
			adviceRepetitions)
	}
	for _, m := range []string{results.MetricThroughput, results.MetricP90Ms, results.MetricP99Ms} {
		e, has := c.Metrics[m]
		if !has || !e.HasCI() {
			continue
		}
		if rw := e.RelWidth(); rw > wideLimit {
			add(fmt.Sprintf("%s interval is %.0f%% of its median (%s .. %s)", m, rw*100, fmtNum(*e.CILow), fmtNum(*e.CIHigh)), adviceNoisy)
		}
	}

	// Late starts are the driver's to describe (it knows its slack and
	// writes a note, passed through below); a rate below target is ours.
	var short int
	var target, achieved []float64
	for _, d := range ok {
		l := d.rec.Result.Load
		if l == nil || l.TargetRate <= 0 {
			continue
		}
		target = append(target, l.TargetRate)
		achieved = append(achieved, l.AchievedRate)
		if l.AchievedRate < rateShortfall*l.TargetRate {
			short++
		}
	}
	if short > 0 {
		add(fmt.Sprintf("achieved rate below target in %d of %d runs (median %s/s of %s/s)",
			short, len(ok), fmtNum(stats.Median(achieved)), fmtNum(stats.Median(target))), adviceRate)
	}

	if e, has := c.Metrics[results.MetricErrorRate]; has && e.Median > 0 {
		kinds := map[string]int64{}
		for _, d := range ok {
			for _, op := range d.rec.Result.Operations {
				if op == nil {
					continue
				}
				for k, v := range op.Errors {
					kinds[k] += v
				}
			}
		}
		var ks []string
		for _, k := range sortedKeys(kinds) {
			if kinds[k] > 0 {
				ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
			}
		}
		add(fmt.Sprintf("errors present: %s of requests failed (%s)", fmtPercent(e.Median), strings.Join(ks, ", ")), adviceErrors)
	}

	notes := map[string]int{}
	unavailable := map[string]int{}
	for _, d := range ok {
		for _, n := range d.rec.Result.Notes {
			notes[n]++
		}
		if s := d.rec.System; s != nil {
			for k, why := range s.Unavailable {
				unavailable[k+": "+why]++
			}
		}
	}
	for _, n := range sortedKeys(notes) {
		add(fmt.Sprintf("%s (%d of %d runs)", n, notes[n], len(ok)), "")
	}
	for _, u := range sortedKeys(unavailable) {
		add(fmt.Sprintf("observer unavailable, %s (%d of %d runs)", u, unavailable[u], len(ok)), "")
	}
	return w
}

// crossWarnings concern the report as a whole.
func crossWarnings(rep *Report) []Warning {
	var w []Warning
	b := rep.Config(rep.Baseline)
	if b != nil && !b.OK() {
		w = append(w, Warning{Message: fmt.Sprintf("the baseline %q has no successful run: nothing can be compared with it", b.Name),
			Advice: "fix the baseline's error or choose another with --baseline"})
	}
	sort.SliceStable(w, func(i, j int) bool { return w[i].Config < w[j].Config })
	return w
}

// mergeAlike folds warnings that say the same thing about several
// configurations into one line naming them all ("every configuration" when
// it is all of them), in the position of the first: a plan of eight
// configurations at 3 repetitions should say so once, not eight times.
func mergeAlike(ws []Warning, configs int) []Warning {
	type key struct{ msg, advice string }
	idx := map[key]int{}
	names := map[key][]string{}
	var out []Warning
	for _, w := range ws {
		if w.Config == "" {
			out = append(out, w)
			continue
		}
		k := key{w.Message, w.Advice}
		if i, seen := idx[k]; seen {
			names[k] = append(names[k], w.Config)
			out[i].Config = strings.Join(names[k], ", ")
			continue
		}
		idx[k] = len(out)
		names[k] = []string{w.Config}
		out = append(out, w)
	}
	for k, i := range idx {
		if n := len(names[k]); n > 1 && n == configs {
			out[i].Config = "every configuration"
		}
	}
	return out
}

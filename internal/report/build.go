package report

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// Options of Build and Load.
type Options struct {
	// Baseline names the reference configuration. When empty, Load takes
	// plan.yaml's baseline, then a configuration with runtime host, then the
	// first configuration.
	Baseline string
	Stats    stats.Options
	// KeyPrefix separates the bootstrap streams of two result sets that are
	// compared with each other (they share configuration names).
	KeyPrefix string
}

// Option sets an Option.
type Option func(*Options)

// WithBaseline names the baseline configuration.
func WithBaseline(name string) Option { return func(o *Options) { o.Baseline = name } }

// WithStats sets the bootstrap options (resamples, level, seed).
func WithStats(s stats.Options) Option { return func(o *Options) { o.Stats = s } }

func withKeyPrefix(p string) Option { return func(o *Options) { o.KeyPrefix = p } }

// Load reads OUT/results.jsonl (and OUT/plan.yaml for the baseline, when
// present) and builds the report. A truncated last line (a run killed while
// writing) becomes a warning, not an error.
func Load(dir string, opts ...Option) (*Report, error) {
	recs, err := results.ReadDir(dir)
	var warn []Warning
	if err != nil {
		if !errors.Is(err, results.ErrTruncated) {
			return nil, fmt.Errorf("load report from %s: %w", dir, err)
		}
		warn = append(warn, Warning{Message: "the last line of results.jsonl is truncated (a crash or a full disk cut a record short); it is skipped",
			Advice: "`ctrperf bench run --resume " + dir + "` removes it (keeping its bytes in results.jsonl.partial) and redoes that run"})
	}
	o := applyOptions(opts)
	explicit := o.Baseline != ""
	p := loadPlan(filepath.Join(dir, "plan.yaml"))
	if !explicit && p != nil {
		o.Baseline = p.Baseline
	}
	rep, err := build(recs, o, explicit)
	if err != nil {
		return nil, fmt.Errorf("load report from %s: %w", dir, err)
	}
	if env, err := results.ReadEnv(dir); err != nil {
		warn = append(warn, Warning{Message: fmt.Sprintf("cannot tell where the results were measured: %v", err)})
	} else {
		rep.Env.addEnvFile(env)
		if w, ok := sameKernelWarning(rep.Env); ok {
			warn = append(warn, w)
		}
	}
	if p != nil && len(p.Thresholds) > 0 {
		if rep.Baseline == p.Baseline {
			rep.gateErr = rep.CheckThresholds(p.Thresholds)
		} else {
			warn = append(warn, Warning{Message: fmt.Sprintf("the plan's thresholds are not checked: they are ratios to its baseline %s, not to %s", p.Baseline, rep.Baseline)})
		}
	}
	if conc, err := results.ReadConcurrency(dir); err != nil {
		warn = append(warn, Warning{Message: fmt.Sprintf("cannot tell whether other bench runs ran beside this one: %v", err)})
	} else if w, ok := concurrencyWarning(conc); ok {
		warn = append(warn, w)
	}
	rep.Warnings = append(warn, rep.Warnings...)
	return rep, nil
}

// concurrencyWarning says that the plan ran with --allow-concurrent, and
// beside which sessions.
func concurrencyWarning(c *results.Concurrency) (Warning, bool) {
	if c == nil || !c.AllowConcurrent {
		return Warning{}, false
	}
	msg := "the plan ran with --allow-concurrent"
	if len(c.Beside) > 0 {
		msg += " beside another bench run (" + strings.Join(c.Beside, "; ") + ")"
	} else {
		msg += " (no other bench run was running when it started, one may have started later)"
	}
	return Warning{Message: msg + ": runs that overlapped share CPUs, disks and the engine with it, and their numbers are disturbed",
		Advice: "rerun the plan alone for numbers to rely on"}, true
}

// loadPlan reads the plan a run directory was made from (its own schema
// only: a report needs no workload) for its baseline and thresholds. Any
// problem means "unknown": nil.
func loadPlan(path string) *plan.Plan {
	p, err := plan.Load(path, plan.Options{})
	if err != nil {
		return nil
	}
	return p
}

func applyOptions(opts []Option) Options {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Build computes the report from run records. A baseline that names no
// configuration is an error; everything else that is wrong with the data
// (failed runs, undecodable histograms, missing observers) is a warning.
func Build(recs []results.RunRecord, opts ...Option) (*Report, error) {
	o := applyOptions(opts)
	return build(recs, o, o.Baseline != "")
}

func build(recs []results.RunRecord, o Options, baselineExplicit bool) (*Report, error) {
	so := o.Stats
	if so.Resamples <= 0 {
		so.Resamples = stats.DefaultResamples
	}
	if so.Level <= 0 || so.Level >= 1 {
		so.Level = stats.DefaultLevel
	}
	o.Stats = so
	rep := &Report{Resamples: so.Resamples, Level: so.Level, Configs: []*ConfigResult{}, Warnings: []Warning{}}

	groups := map[string][]*results.RunRecord{}
	var order []string
	firstIndex := map[string]int{}
	for i := range recs {
		r := &recs[i]
		if rep.Plan == "" {
			rep.Plan = r.Plan
		}
		if rep.Workload == "" {
			rep.Workload = r.Workload
		}
		if _, ok := groups[r.Config]; !ok {
			order = append(order, r.Config)
			firstIndex[r.Config] = r.Index
		}
		groups[r.Config] = append(groups[r.Config], r)
		firstIndex[r.Config] = min(firstIndex[r.Config], r.Index)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no run records")
	}
	sort.SliceStable(order, func(i, j int) bool { return firstIndex[order[i]] < firstIndex[order[j]] })

	base, warn, err := chooseBaseline(o.Baseline, baselineExplicit, order, groups)
	if err != nil {
		return nil, err
	}
	rep.Baseline = base
	rep.Warnings = append(rep.Warnings, warn...)
	order = append([]string{base}, slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s == base })...)

	var declWarn []Warning
	rep.Declared, declWarn = declared(recs)
	rep.Warnings = append(rep.Warnings, declWarn...)
	for _, name := range order {
		c, w := buildConfig(name, groups[name], o)
		rep.Configs = append(rep.Configs, c)
		rep.Warnings = append(rep.Warnings, w...)
	}
	b := rep.Config(base)
	for _, c := range rep.Configs {
		if c != b && !c.Emulated && !b.Emulated {
			// An emulated CPU's figures compare with nothing.
			c.VsBaseline = compareConfigs(c, b, so.Level, rep.sense)
			c.OpVsBaseline = compareOperations(c, b, so.Level)
		}
	}
	rep.Warnings = mergeAlike(append(rep.Warnings, crossWarnings(rep)...), len(rep.Configs))
	rep.Headline = headline(rep)
	rep.Env = environmentFromRecords(recs, order)
	return rep, nil
}

// declared gathers what the successful runs declared about their metrics.
// Runs that disagree (a matrix over load.better) make the metric neutral
// again, with a warning: no verdict is better than a wrong one.
func declared(recs []results.RunRecord) (map[string]results.MetricInfo, []Warning) {
	out := map[string]results.MetricInfo{}
	conflict := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		if r.Status != results.StatusOK || r.Result == nil {
			continue
		}
		for k, info := range r.Result.Declared {
			if prev, seen := out[k]; seen && prev != info {
				conflict[k] = true
				continue
			}
			out[k] = info
		}
	}
	var warn []Warning
	for _, k := range sortedKeys(conflict) {
		info := out[k]
		info.Better = ""
		out[k] = info
		warn = append(warn, Warning{Message: fmt.Sprintf("runs declare metric %s differently (which way is better, or its unit); its verdicts only say higher or lower", k),
			Advice: "give the figure one name per meaning"})
	}
	if len(out) == 0 {
		return nil, warn
	}
	return out, warn
}

func chooseBaseline(want string, explicit bool, order []string, groups map[string][]*results.RunRecord) (string, []Warning, error) {
	if want != "" {
		if _, ok := groups[want]; ok {
			return want, nil, nil
		}
		if explicit {
			return "", nil, fmt.Errorf("baseline %q names no configuration in the results (have: %s)", want, strings.Join(order, ", "))
		}
	}
	var w []Warning
	if want != "" {
		w = append(w, Warning{Message: fmt.Sprintf("plan.yaml names baseline %q, which has no runs in the results", want)})
	}
	for _, name := range order {
		for _, r := range groups[name] {
			if plan.Runtime(r.Runtime()).Traits().ProcessesHere() { // the bare-metal baseline, not a guest
				w = append(w, Warning{Message: fmt.Sprintf("no baseline given; using %q (runtime host)", name),
					Advice: "name one with --baseline"})
				return name, w, nil
			}
		}
	}
	w = append(w, Warning{Message: fmt.Sprintf("no baseline given and none runs on the host; using the first configuration %q", order[0]),
		Advice: "name one with --baseline"})
	return order[0], w, nil
}

// runData is what one successful run contributes.
type runData struct {
	rec     *results.RunRecord
	metrics map[string]float64            // per-run metrics, configuration level
	ops     map[string]map[string]float64 // per-run metrics per operation
	hist    *hdrhistogram.Histogram       // all operations merged; nil without histograms
	opHist  map[string]*hdrhistogram.Histogram
	count   int64
	errs    int64
	opCount map[string]int64
	opErrs  map[string]int64
}

func collectRun(r *results.RunRecord) (runData, []string) {
	m := r.Result
	d := runData{rec: r, metrics: map[string]float64{}, ops: map[string]map[string]float64{},
		opHist: map[string]*hdrhistogram.Histogram{}, opCount: map[string]int64{}, opErrs: map[string]int64{}}
	var problems []string
	var bytes int64
	for name, op := range m.Operations {
		if op == nil {
			continue
		}
		om := map[string]float64{results.MetricSamples: float64(op.Count)}
		if m.DurationS > 0 {
			om[results.MetricThroughput] = float64(op.Count) / m.DurationS
			if op.Bytes > 0 {
				om[results.MetricKBPerS] = float64(op.Bytes) / 1024 / m.DurationS
			}
		}
		if op.Histogram != "" {
			h, err := results.DecodeHistogram(op.Histogram)
			if err != nil {
				problems = append(problems, fmt.Sprintf("run %s operation %s: %v", r.RunID, name, err))
			} else {
				d.opHist[name] = h
				if d.hist == nil {
					d.hist = results.NewHistogram()
				}
				d.hist.Merge(h)
			}
		} else {
			// A wrapped tool reported percentiles only: they are per-run
			// figures, summarised across repetitions like any other.
			for k, v := range op.PercentilesMs {
				if mk := percentileMetric(k); mk != "" {
					om[mk] = v
				}
			}
			if op.MeanMs > 0 {
				om[results.MetricMeanMs] = op.MeanMs
			}
		}
		d.ops[name] = om
		d.count += op.Count
		d.errs += op.ErrorCount()
		d.opCount[name] = op.Count
		d.opErrs[name] = op.ErrorCount()
		bytes += op.Bytes
	}
	if len(m.Operations) > 0 {
		d.metrics[results.MetricSamples] = float64(d.count)
	}
	if m.DurationS > 0 {
		if len(m.Operations) > 0 {
			d.metrics[results.MetricThroughput] = float64(d.count) / m.DurationS
		}
		if bytes > 0 {
			d.metrics[results.MetricKBPerS] = float64(bytes) / 1024 / m.DurationS
		}
	}
	// The workload's own figures win: throughput_per_s is its primary rate,
	// which may count sessions rather than requests.
	for k, v := range m.Metrics {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			d.metrics[k] = v
		}
	}
	return d, problems
}

// percentileMetric maps a tool's percentile key ("99", "99.9", "p99",
// "99.000000") to a metric name, or "" for ones the report does not show.
func percentileMetric(k string) string {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(k), "p"), "%"), 64)
	if err != nil {
		return ""
	}
	switch f {
	case 50:
		return results.MetricP50Ms
	case 90:
		return results.MetricP90Ms
	case 95:
		return results.MetricP95Ms
	case 99:
		return results.MetricP99Ms
	case 99.9:
		return results.MetricP999Ms
	}
	return ""
}

func buildConfig(name string, runs []*results.RunRecord, o Options) (*ConfigResult, []Warning) {
	c := &ConfigResult{Name: name, Metrics: map[string]stats.Estimate{}, reps: map[string][]float64{},
		opReps: map[string]map[string][]float64{}, opPooled: map[string]*stats.Pooled{}}
	var warn []Warning
	var ok []runData
	seenErr := map[string]bool{}
	for _, r := range runs {
		if c.Knobs == nil && r.Knobs != nil {
			c.Knobs = r.Knobs
		}
		c.Emulated = c.Emulated || r.Emulated
		c.ContainerInVM = c.ContainerInVM || (r.Engine != nil && r.Engine.VM != nil && r.Engine.VM.Docker)
		switch {
		case r.Status == results.StatusNotRun:
			c.NotRun++
		case r.Status != results.StatusOK:
			c.Failed++
		case r.Result == nil:
			c.Failed++
			r = withError(r, "run recorded as ok but carries no measurement")
		default:
			d, problems := collectRun(r)
			for _, p := range problems {
				warn = append(warn, Warning{Config: name, Message: p, Advice: "that run's latencies are left out"})
			}
			ok = append(ok, d)
			continue
		}
		msg := r.Error
		if msg == "" {
			msg = string(r.Status) + " without an error message"
		}
		if !seenErr[msg] {
			seenErr[msg] = true
			c.Errors = append(c.Errors, msg)
		}
	}
	c.Runs = len(ok)
	if len(ok) == 0 {
		return c, append(warn, configWarnings(c, ok)...)
	}
	key := func(parts ...string) string { return o.KeyPrefix + "config=" + name + "|" + strings.Join(parts, "|") }
	so := o.Stats

	// Per-run metrics: median and interval across repetitions.
	perRun := map[string][]float64{}
	for _, d := range ok {
		for k, v := range d.metrics {
			perRun[k] = append(perRun[k], v)
		}
	}
	if len(perRun[results.MetricCapacity]) > 0 {
		// A run whose search found no passing rate has no capacity_per_s,
		// but it is a run whose capacity is below the lowest rate tried:
		// it counts as 0, or the median of the other runs would overstate
		// the configuration's capacity (below, below, 100, 200, 300 has
		// a median of 100, not 200). The capacity section shows a median
		// under the lowest rate as "below" it.
		for _, d := range ok {
			if s := d.rec.Result.Capacity; s != nil && s.Outcome == results.CapacityBelow {
				perRun[results.MetricCapacity] = append(perRun[results.MetricCapacity], 0)
			}
		}
	}
	for k, xs := range perRun {
		c.reps[k] = so.MedianReplicates(key("metric="+k), xs)
		c.Metrics[k] = stats.Summarize(stats.Median(xs), c.reps[k], len(xs), so.Level)
	}
	// Error rate and latency are pooled over runs, never averaged.
	c.setErrorRate(c.Metrics, c.reps, ok, func(d runData) (int64, int64) { return d.errs, d.count }, key(results.MetricErrorRate), so)
	var hs []*hdrhistogram.Histogram
	for _, d := range ok {
		if d.hist != nil {
			hs = append(hs, d.hist)
		}
	}
	if p, err := stats.NewPooled(hs); err == nil {
		c.pooled = p
		setLatency(c.Metrics, c.reps, p, key("latency"), so)
	} else if len(hs) > 0 {
		warn = append(warn, Warning{Config: name, Message: "latency histograms cannot be merged: " + err.Error()})
	}

	// Per operation.
	c.Operations = map[string]map[string]stats.Estimate{}
	opNames := map[string]bool{}
	for _, d := range ok {
		for op := range d.ops {
			opNames[op] = true
		}
	}
	for op := range opNames {
		est, reps := map[string]stats.Estimate{}, map[string][]float64{}
		perRun := map[string][]float64{}
		var withOp []runData
		for _, d := range ok {
			if om, has := d.ops[op]; has {
				withOp = append(withOp, d)
				for k, v := range om {
					perRun[k] = append(perRun[k], v)
				}
			}
		}
		for k, xs := range perRun {
			reps[k] = so.MedianReplicates(key("op="+op, "metric="+k), xs)
			est[k] = stats.Summarize(stats.Median(xs), reps[k], len(xs), so.Level)
		}
		c.setErrorRate(est, reps, withOp, func(d runData) (int64, int64) { return d.opErrs[op], d.opCount[op] }, key("op="+op, results.MetricErrorRate), so)
		var hs []*hdrhistogram.Histogram
		for _, d := range withOp {
			if h := d.opHist[op]; h != nil {
				hs = append(hs, h)
			}
		}
		if p, err := stats.NewPooled(hs); err == nil {
			c.opPooled[op] = p
			setLatency(est, reps, p, key("op="+op, "latency"), so)
		}
		c.Operations[op] = est
		c.opReps[op] = reps
	}
	// A single-operation tool workload without histograms: its percentiles
	// are the configuration's.
	if c.pooled == nil && len(c.Operations) == 1 {
		for op, est := range c.Operations {
			for k, e := range est {
				if _, has := c.Metrics[k]; !has && strings.HasSuffix(k, "_ms") {
					c.Metrics[k] = e
					c.reps[k] = c.opReps[op][k]
				}
			}
		}
	}

	// Each repetition's own figures, for the strip plots: the per-run
	// metrics, and p50/p99 read from each run's own histogram.
	c.perRun = perRun
	for _, d := range ok {
		c.okRuns = append(c.okRuns, d.rec)
		if d.hist == nil || d.hist.TotalCount() == 0 {
			continue
		}
		for _, q := range []struct {
			metric string
			q      float64
		}{{results.MetricP50Ms, 50}, {results.MetricP99Ms, 99}} {
			if _, own := d.metrics[q.metric]; !own {
				c.perRun[q.metric] = append(c.perRun[q.metric], float64(d.hist.ValueAtQuantile(q.q))/1000)
			}
		}
	}
	c.Capacity = summarizeCapacity(ok)
	c.representative = representative(ok, c.Metrics[results.MetricThroughput].Median)
	c.System = summarizeSystem(ok)
	warn = append(warn, configWarnings(c, ok)...)
	return c, warn
}

func withError(r *results.RunRecord, msg string) *results.RunRecord {
	cp := *r
	if cp.Error == "" {
		cp.Error = msg
	}
	return &cp
}

// setErrorRate pools errors and attempts over the runs: a rate per run would
// let one bad run vanish in the median.
func (c *ConfigResult) setErrorRate(est map[string]stats.Estimate, reps map[string][]float64, runs []runData,
	get func(runData) (errs, count int64), key string, so stats.Options) {
	var errs, count int64
	es := make([]int64, len(runs))
	cs := make([]int64, len(runs))
	for i, d := range runs {
		es[i], cs[i] = get(d)
		errs += es[i]
		count += cs[i]
	}
	if count == 0 {
		return
	}
	r := so.Replicates(key, len(runs), 1, func(w []int, out []float64) {
		var e, n int64
		for i, m := range w {
			e += int64(m) * es[i]
			n += int64(m) * cs[i]
		}
		out[0] = math.NaN()
		if n > 0 {
			out[0] = float64(e) / float64(n)
		}
	})[0]
	reps[results.MetricErrorRate] = r
	est[results.MetricErrorRate] = stats.Summarize(float64(errs)/float64(count), r, len(runs), so.Level)
}

func setLatency(est map[string]stats.Estimate, reps map[string][]float64, p *stats.Pooled, key string, so stats.Options) {
	if p.Merged().TotalCount() == 0 {
		return // histograms present but empty: no latency, not NaN
	}
	e, r := so.LatencyEstimates(key, p, stats.StandardLatency, 1e-3) // µs → ms
	for i, f := range stats.StandardLatency {
		est[f.Name] = e[i]
		reps[f.Name] = r[i]
	}
}

func representative(ok []runData, median float64) *results.RunRecord {
	best, bestD := ok[0].rec, math.Inf(1)
	for _, d := range ok {
		if d.rec.System == nil || len(d.rec.System.Samples) == 0 {
			continue
		}
		dist := math.Abs(d.metrics[results.MetricThroughput] - median)
		if dist < bestD {
			best, bestD = d.rec, dist
		}
	}
	return best
}

// compareConfigs is config/baseline for every metric both have.
func compareConfigs(c, b *ConfigResult, level float64, sense func(string) stats.Sense) map[string]stats.Comparison {
	out := map[string]stats.Comparison{}
	if !c.OK() || !b.OK() {
		return out
	}
	for k, e := range c.Metrics {
		be, ok := b.Metrics[k]
		if !ok {
			continue
		}
		out[k] = stats.CompareReplicates(stats.Ratio{Sense: sense(k), Level: level,
			Num: stats.SideOf(e, c.reps[k]), Den: stats.SideOf(be, b.reps[k])})
	}
	return out
}

// compareOperations is config/baseline per operation both have, for the
// latency and throughput figures.
func compareOperations(c, b *ConfigResult, level float64) map[string]map[string]stats.Comparison {
	if !c.OK() || !b.OK() {
		return nil
	}
	out := map[string]map[string]stats.Comparison{}
	for op, est := range c.Operations {
		best, ok := b.Operations[op]
		if !ok {
			continue
		}
		m := map[string]stats.Comparison{}
		for _, k := range opCompareMetrics {
			e, has := est[k]
			be, bhas := best[k]
			if !has || !bhas {
				continue
			}
			m[k] = stats.CompareReplicates(stats.Ratio{Sense: stats.SenseOf(k), Level: level,
				Num: stats.SideOf(e, c.opReps[op][k]), Den: stats.SideOf(be, b.opReps[op][k])})
		}
		if len(m) > 0 {
			out[op] = m
		}
	}
	return out
}

// opCompareMetrics are compared per operation.
var opCompareMetrics = []string{results.MetricP50Ms, results.MetricP99Ms, results.MetricThroughput}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

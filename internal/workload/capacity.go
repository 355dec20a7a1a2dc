package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// A capacity search (load.search) finds, in every run, the highest
// open-loop rate that meets an SLO, the way an ISUCON score is a capacity
// rather than a latency at a fixed load:
//
//	load: {search: {slo: {p99_ms: 50, error_rate: 0.01}, from: 50, to: 5000}}
//
// It brackets (from, from×factor, … until a step fails or `to` is reached)
// and then bisects between the highest passing and the lowest failing rate
// until they are within `precision` of each other, each step measured for
// the plan's window (warm-up + duration), at most max_steps steps and
// max_time. The run's measurement is that of its highest passing step,
// with capacity_per_s, capacity_steps and capacity_search_s among its
// metrics and every step in Measurement.Capacity.
//
// A workload adopts it with OpenLoop (openloop.go; see web.go and kv.go):
//
//  1. its load struct embeds OpenLoop, whose Search field its ParseXLoad
//     reads with k.openLoop(&l.OpenLoop), and refuses beside a fixed
//     rate or concurrency with searchConflicts; OpenLoop's CapacitySearch
//     (plan.Searching) lets the runner budget the run and bench validate
//     show the search;
//  2. in Drive, when l.Search is set, RunSearch(ctx, env, l.Search,
//     measure) with measure driving one window at a given rate.

// SLOFigures are the figures an SLO may bound, each with the highest value
// a step may measure: latency quantiles of all operations together (from
// their merged histogram), in ms, and the error rate (failed attempts /
// attempts).
var SLOFigures = []string{results.MetricP50Ms, results.MetricP90Ms, results.MetricP95Ms,
	results.MetricP99Ms, results.MetricP999Ms, results.MetricErrorRate}

// DefaultSLOErrorRate bounds the error rate of an SLO that names latencies
// only: a rate at which requests fail fast must not pass a latency SLO.
const DefaultSLOErrorRate = 0.01

// Defaults of a search's tuning knobs.
const (
	DefaultSearchFactor    = 2.0
	DefaultSearchPrecision = 0.05
	DefaultSearchMaxSteps  = 16
	DefaultSearchMaxTime   = 30 * time.Minute
)

// Limit is one bound of an SLO: Figure (one of SLOFigures) at most Max.
type Limit struct {
	Figure string
	Max    float64
}

// Search is a decoded load.search.
type Search struct {
	// SLO in SLOFigures order; error_rate is always there (Defaulted when
	// the plan did not name it).
	SLO []Limit
	// ErrorRateDefaulted says the error_rate bound is DefaultSLOErrorRate
	// because the plan named latencies only.
	ErrorRateDefaulted bool
	From, To           float64 // rates per second, From < To
	Factor             float64 // bracketing growth per step
	Precision          float64 // relative gap at which the bisection stops
	MaxSteps           int
	MaxTime            time.Duration // 0: MaxSteps only
}

// search reads a search mapping (load.search) into *dst; problems are the
// reader's, each a *plan.KnobError at its own line.
func (k *knobs) search(key string, dst **Search) {
	v, ok := k.get(key)
	if !ok {
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		k.fail(key, v, "want a mapping like {slo: {p99_ms: 50}, from: 50, to: 5000}")
		return
	}
	what := k.what + "." + key
	s := &Search{Factor: DefaultSearchFactor, Precision: DefaultSearchPrecision,
		MaxSteps: DefaultSearchMaxSteps, MaxTime: DefaultSearchMaxTime}
	sk := newKnobs(what, m)
	sk.float("from", &s.From, load.MinRate, load.MaxRate)
	sk.float("to", &s.To, load.MinRate, load.MaxRate)
	sk.float("factor", &s.Factor, 1.1, 100)
	sk.float("precision", &s.Precision, 0.001, 0.5)
	whole(sk, "max_steps", &s.MaxSteps, 2, 1000)
	sk.duration("max_time", &s.MaxTime, 0, 7*24*time.Hour)
	sloOK := false
	if sv, has := sk.get("slo"); !has {
		sk.errs = append(sk.errs, knobError(what, "%s: no slo: name the bound to meet, e.g. slo: {p99_ms: 50, error_rate: 0.01} (figures: %s)",
			what, strings.Join(SLOFigures, ", ")))
	} else if slo, isMap := sv.(map[string]any); !isMap {
		sk.fail("slo", sv, "want a mapping like {p99_ms: 50, error_rate: 0.01}")
	} else if len(slo) == 0 {
		sk.errs = append(sk.errs, knobError(what+".slo", "%s.slo is empty: name at least one of %s", what, strings.Join(SLOFigures, ", ")))
	} else {
		lk := newKnobs(what+".slo", slo)
		vals := map[string]float64{}
		for _, f := range SLOFigures {
			if _, set := slo[f]; !set {
				lk.used[f] = true // known, for the unknown-key message
				continue
			}
			x := math.NaN()
			if f == results.MetricErrorRate {
				lk.float(f, &x, 0, 1)
			} else {
				lk.float(f, &x, 1e-3, 1e7)
			}
			if !math.IsNaN(x) {
				vals[f] = x
			}
		}
		if err := lk.err(); err != nil {
			sk.errs = append(sk.errs, err)
		} else {
			sloOK = true
			if _, has := vals[results.MetricErrorRate]; !has {
				vals[results.MetricErrorRate] = DefaultSLOErrorRate
				s.ErrorRateDefaulted = true
			}
			for _, f := range SLOFigures {
				if x, has := vals[f]; has {
					s.SLO = append(s.SLO, Limit{Figure: f, Max: x})
				}
			}
		}
	}
	_, hasFrom := m["from"]
	_, hasTo := m["to"]
	if !hasFrom {
		sk.errs = append(sk.errs, knobError(what, "%s: no from: the lowest rate to try (per second)", what))
	}
	if !hasTo {
		sk.errs = append(sk.errs, knobError(what, "%s: no to: the highest rate to try (per second)", what))
	}
	rangeOK := !hasFrom || !hasTo || s.From < s.To
	if !rangeOK {
		sk.errs = append(sk.errs, knobError(what+".to", "%s.to = %g is not above from = %g: the search needs a range of rates", what, s.To, s.From))
	}
	if err := sk.err(); err != nil {
		k.errs = append(k.errs, err)
		return
	}
	if sloOK {
		*dst = s
	}
}

// searchConflicts refuses a search beside a fixed rate or concurrency in
// the same load map (the plan's, merged): the search chooses the rate.
func searchConflicts(m map[string]any, s *Search, fixed ...string) error {
	if s == nil {
		return nil
	}
	var set []string
	for _, key := range fixed {
		if v, ok := m[key]; ok && v != nil {
			set = append(set, fmt.Sprintf("load.%s = %v", key, v))
		}
	}
	if len(set) == 0 {
		return nil
	}
	return knobError("load.search", "load.search with %s: a capacity search chooses the rate itself (open loop); remove %s (a plan-level load: is merged into every configuration)",
		strings.Join(set, " and "), strings.Join(set, ", "))
}

// String is the SLO as plans write it: "p99_ms ≤ 50, error_rate ≤ 0.01".
func (s *Search) sloText() string {
	var parts []string
	for _, l := range s.SLO {
		p := l.Figure + " ≤ " + strconv.FormatFloat(l.Max, 'g', -1, 64)
		if l.Figure == results.MetricErrorRate && s.ErrorRateDefaulted {
			p += " (default)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// Describe is the search in one line, for bench validate.
func (s *Search) Describe() string {
	limit := fmt.Sprintf("at most %d steps", s.MaxSteps)
	if s.MaxTime > 0 {
		limit += " and " + s.MaxTime.String()
	}
	return fmt.Sprintf("highest rate with %s; %s/s → %s/s ×%s until a step fails, then bisect to %s%%; %s",
		s.sloText(), fmtRate(s.From), fmtRate(s.To), strconv.FormatFloat(s.Factor, 'g', -1, 64),
		strconv.FormatFloat(s.Precision*100, 'g', -1, 64), limit)
}

// Spec is the search as the plan and the runner see it; stepSlack is how
// long one step may take beyond its window (the generator's drain).
func (s *Search) Spec(stepSlack time.Duration) plan.SearchSpec {
	return plan.SearchSpec{Description: s.Describe(), MaxSteps: s.MaxSteps, MaxTime: s.MaxTime, StepSlack: stepSlack}
}

// SLOMap is the SLO as a record keeps it.
func (s *Search) SLOMap() map[string]float64 {
	out := map[string]float64{}
	for _, l := range s.SLO {
		out[l.Figure] = l.Max
	}
	return out
}

// Figures are what a step measured of the SLO's figures (and
// throughput_per_s), from a measurement's operations.
func (s *Search) Figures(m *results.Measurement) (map[string]float64, error) {
	if m == nil {
		return nil, errors.New("no measurement")
	}
	out := map[string]float64{}
	var count, errs int64
	for _, op := range m.Operations {
		if op != nil {
			count += op.Count
			errs += op.ErrorCount()
		}
	}
	merged, err := results.MergedHistogram(m.Operations)
	if err != nil {
		return nil, err
	}
	if v, ok := m.Metrics[results.MetricThroughput]; ok {
		out[results.MetricThroughput] = v
	}
	if count == 0 {
		return out, errors.New("no operation completed")
	}
	for _, l := range s.SLO {
		if l.Figure == results.MetricErrorRate {
			out[l.Figure] = float64(errs) / float64(count)
			continue
		}
		if merged == nil || merged.TotalCount() == 0 {
			return out, fmt.Errorf("no latency recorded for %s", l.Figure)
		}
		out[l.Figure], _ = results.HistogramFigure(merged, l.Figure)
	}
	return out, nil
}

// Check measures a step against the SLO: whether it passed and, if not,
// which bounds it broke.
func (s *Search) Check(m *results.Measurement) (figures map[string]float64, pass bool, reason string) {
	figures, err := s.Figures(m)
	if err != nil {
		return figures, false, err.Error()
	}
	var broke []string
	for _, l := range s.SLO {
		if v := figures[l.Figure]; v > l.Max {
			limit := strconv.FormatFloat(l.Max, 'g', -1, 64)
			if l.Figure == results.MetricErrorRate {
				limit = strconv.FormatFloat(l.Max*100, 'g', -1, 64) + "%"
			}
			broke = append(broke, fmt.Sprintf("%s %s > %s", l.Figure, fmtFigure(l.Figure, v), limit))
		}
	}
	return figures, len(broke) == 0, strings.Join(broke, ", ")
}

// MeasureFunc measures one window at an open-loop rate per second.
type MeasureFunc func(ctx context.Context, rate float64) (*results.Measurement, error)

// searchRun is the pure search: measure, a clock and a hook per step.
type searchRun struct {
	s       *Search
	measure MeasureFunc
	now     func() time.Time
	onStep  func(i int, st results.CapacityStep)
}

// run searches and returns the record and the measurement the run keeps:
// the highest passing step's, or the first step's when none passed. An
// error of measure ends the search with it; so does ctx.
func (r searchRun) run(ctx context.Context) (*results.CapacitySearch, *results.Measurement, error) {
	s := r.s
	rec := &results.CapacitySearch{SLO: s.SLOMap(), From: s.From, To: s.To, Precision: s.Precision}
	start := r.now()
	var lo, hi float64 // highest passing and lowest failing rate so far; 0: none
	var best, first *results.Measurement
	var longest time.Duration
	rate := s.From
	for {
		if err := ctx.Err(); err != nil {
			return rec, nil, err
		}
		if len(rec.Steps) >= s.MaxSteps {
			rec.Stopped = fmt.Sprintf("max_steps %d", s.MaxSteps)
			break
		}
		if elapsed := r.now().Sub(start); s.MaxTime > 0 && len(rec.Steps) > 0 && elapsed+longest > s.MaxTime {
			rec.Stopped = fmt.Sprintf("max_time %s (%s spent, a step takes up to %s)", s.MaxTime, elapsed.Round(time.Second), longest.Round(time.Second))
			break
		}
		t0 := r.now()
		m, err := r.measure(ctx, rate)
		took := r.now().Sub(t0)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return rec, nil, ctxErr
		}
		if err != nil {
			rec.ElapsedS = r.now().Sub(start).Seconds()
			return rec, nil, fmt.Errorf("capacity search, step %d at %s/s: %w", len(rec.Steps)+1, fmtRate(rate), err)
		}
		longest = max(longest, took)
		figures, pass, reason := s.Check(m)
		st := results.CapacityStep{RatePerS: rate, Figures: figures, Pass: pass, Reason: reason, DurationS: took.Seconds()}
		rec.Steps = append(rec.Steps, st)
		if r.onStep != nil {
			r.onStep(len(rec.Steps), st)
		}
		if first == nil {
			first = m
		}
		if pass {
			lo, best = rate, m
		} else {
			hi = rate
		}
		if hi == 0 { // still bracketing
			if rate >= s.To {
				rec.Stopped = fmt.Sprintf("every rate up to to = %s/s met the SLO", fmtRate(s.To))
				break
			}
			rate = min(rate*s.Factor, s.To)
			continue
		}
		if lo == 0 {
			rec.Stopped = fmt.Sprintf("the lowest rate, from = %s/s, did not meet the SLO", fmtRate(s.From))
			break
		}
		if hi/lo-1 <= s.Precision {
			rec.Stopped = fmt.Sprintf("precision %s%% reached", strconv.FormatFloat(s.Precision*100, 'g', -1, 64))
			break
		}
		rate = bisect(lo, hi)
	}
	rec.ElapsedS = r.now().Sub(start).Seconds()
	rec.CapacityPerS, rec.FailedAtPerS = lo, hi
	switch {
	case lo == 0:
		rec.Outcome = results.CapacityBelow
		return rec, first, nil
	case hi == 0:
		rec.Outcome = results.CapacityAtLeast
	case hi/lo-1 <= s.Precision:
		rec.Outcome = results.CapacityFound
	default:
		rec.Outcome = results.CapacityBounded
	}
	return rec, best, nil
}

// bisect is the geometric midpoint of lo and hi (the bracket grew
// geometrically), rounded to three significant digits when that keeps it
// strictly inside.
func bisect(lo, hi float64) float64 {
	mid := math.Sqrt(lo * hi)
	r, err := strconv.ParseFloat(strconv.FormatFloat(mid, 'g', 3, 64), 64)
	if err == nil && r > lo && r < hi {
		return r
	}
	return mid
}

// RunSearch drives a capacity search on a deployed target: measure drives
// one window (env.Window: warm-up + duration) at a rate, passing started
// to its generator as the window's start. env.Started is called once, at
// the first measured window, so the observers' series covers every step
// from there; env.Progress hears one line per step. The measurement
// returned is the highest passing step's with the search in Capacity and
// its metrics (capacity_per_s unless no rate passed, capacity_steps,
// capacity_search_s).
func RunSearch(ctx context.Context, env Env, s *Search,
	measure func(ctx context.Context, rate float64, started func()) (*results.Measurement, error)) (*results.Measurement, error) {
	var once sync.Once
	started := func() {
		once.Do(func() {
			if env.Started != nil {
				env.Started()
			}
		})
	}
	say := func(msg string) {
		if env.Progress != nil {
			env.Progress(msg)
		}
	}
	say(fmt.Sprintf("capacity search: %s", s.Describe()))
	r := searchRun{s: s, now: time.Now,
		measure: func(ctx context.Context, rate float64) (*results.Measurement, error) {
			return measure(ctx, rate, started)
		},
		onStep: func(i int, st results.CapacityStep) { say(StepText(i, st)) }}
	rec, m, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	out := Searched(rec, m)
	say("capacity search: " + OutcomeText(rec))
	return out, nil
}

// Searched is the run's measurement for a finished search: m (a copy) with
// the search record, its metrics and, for an outcome that is not a plain
// capacity, a note saying so.
func Searched(rec *results.CapacitySearch, m *results.Measurement) *results.Measurement {
	cp := *m
	cp.Metrics = maps.Clone(m.Metrics)
	if cp.Metrics == nil {
		cp.Metrics = map[string]float64{}
	}
	cp.Notes = slices.Clone(m.Notes)
	cp.Capacity = rec
	cp.Metrics[results.MetricCapacitySteps] = float64(len(rec.Steps))
	cp.Metrics[results.MetricCapacitySearch] = rec.ElapsedS
	if rec.Outcome != results.CapacityBelow {
		cp.Metrics[results.MetricCapacity] = rec.CapacityPerS
	}
	// Notes without the cost, which differs from run to run, so the
	// report can say "(3 of 3 runs)" once.
	switch rec.Outcome {
	case results.CapacityBelow:
		cp.Notes = append(cp.Notes, fmt.Sprintf("capacity search: %s; the operations shown are that step's", outcome(rec)))
	case results.CapacityAtLeast, results.CapacityBounded:
		cp.Notes = append(cp.Notes, "capacity search: "+outcome(rec))
	}
	return &cp
}

// StepText is one step for progress output:
// "step 3: 200/s → p99_ms 12.3, error_rate 0%: pass (25.1 s)".
func StepText(i int, st results.CapacityStep) string {
	var figs []string
	for _, f := range SLOFigures {
		if v, ok := st.Figures[f]; ok {
			figs = append(figs, f+" "+fmtFigure(f, v))
		}
	}
	verdict := "pass"
	if !st.Pass {
		verdict = "FAIL (" + st.Reason + ")"
	}
	return fmt.Sprintf("capacity step %d: %s/s → %s: %s (%.1f s)", i, fmtRate(st.RatePerS), strings.Join(figs, ", "), verdict, st.DurationS)
}

// OutcomeText is a search's result in words, with its cost.
func OutcomeText(rec *results.CapacitySearch) string {
	steps := "steps"
	if len(rec.Steps) == 1 {
		steps = "step"
	}
	return fmt.Sprintf("%s (%d %s in %s)", outcome(rec), len(rec.Steps), steps,
		(time.Duration(rec.ElapsedS * float64(time.Second))).Round(time.Second))
}

func outcome(rec *results.CapacitySearch) string {
	switch rec.Outcome {
	case results.CapacityBelow:
		return fmt.Sprintf("below the lowest rate tried (%s/s): no rate met the SLO", fmtRate(rec.From))
	case results.CapacityAtLeast:
		return fmt.Sprintf("at least %s/s: no rate tried failed the SLO; %s", fmtRate(rec.CapacityPerS), rec.Stopped)
	case results.CapacityBounded:
		return fmt.Sprintf("%s/s, but only within [%s, %s)/s: %s stopped the bisection before the precision was reached",
			fmtRate(rec.CapacityPerS), fmtRate(rec.CapacityPerS), fmtRate(rec.FailedAtPerS), rec.Stopped)
	}
	return fmt.Sprintf("%s/s (%s/s failed)", fmtRate(rec.CapacityPerS), fmtRate(rec.FailedAtPerS))
}

// fmtRate prints a rate with up to three significant digits' worth of
// decimals: 50, 282.8, 4.5.
func fmtRate(r float64) string {
	switch {
	case r >= 100:
		return strconv.FormatFloat(math.Round(r*10)/10, 'f', -1, 64)
	case r >= 1:
		return strconv.FormatFloat(math.Round(r*100)/100, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', 3, 64)
}

// fmtFigure prints an SLO figure: error rates as percentages, latencies in
// ms with three significant digits.
func fmtFigure(figure string, v float64) string {
	if figure == results.MetricErrorRate {
		v *= 100
	}
	var s string
	switch a := math.Abs(v); {
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if figure == results.MetricErrorRate {
		s += "%"
	}
	return s
}

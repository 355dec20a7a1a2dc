package report

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// htmlPercentiles are the points of the latency curves, dense in the tail.
var htmlPercentiles = func() []float64 {
	var ps []float64
	for n := nines(50); n <= 4.0001; n += 0.05 {
		ps = append(ps, 100*(1-math.Pow(10, -n)))
	}
	return ps
}()

type htmlVerdict struct {
	Metric, Baseline, Value, Ratio, CI, Verdict, Class string
}

type htmlSummaryRow struct {
	Config, Colour, Status string
	Caveat                 string // the sample-size caveat of its verdicts
	Knobs                  string
	Failed                 bool
	Cells                  []htmlVerdict
}

// htmlApart are the summary's rows shown apart, under a note that spans
// the table (emulated configurations: EmulatedNote).
type htmlApart struct {
	Note string
	Span int
	Rows []htmlSummaryRow
}

// htmlOpRow is one operation of one configuration against the baseline's.
type htmlOpRow struct {
	Config, Colour, Op string
	Cells              []htmlVerdict
}

// htmlWindow is one configuration's measured window, second by second.
type htmlWindow struct {
	Config, Colour, Run string
	Throughput, Latency template.HTML
}

type htmlSmall struct {
	Config, Colour, Run string
	CPU, Disk           template.HTML
}

type htmlAggRow struct {
	Config, Op string
	Cells      []string
	IsOp       bool
	Failed     string // non-empty: no numbers, this instead
	Span       int
}

type htmlPage struct {
	R             *Report
	Head          []string
	SummaryCols   []string
	SummaryLabels []string
	Summary       []htmlSummaryRow
	Apart         *htmlApart
	CommonKnobs   string // knobs every configuration has alike, shown once
	Throughput    template.HTML
	P99           template.HTML
	Percentiles   template.HTML
	AggHeader     []string
	Aggregate     []htmlAggRow
	Other         *section
	Capacity      *section
	System        *section
	Smalls        []htmlSmall
	Coverage      string
	Headline      []template.HTML
	Broken        []template.HTML
	Env           []template.HTML
	EnvHosts      *htmlTable // the hosts side by side (hosts:)
	OpCols        []string
	OpRows        []htmlOpRow
	Windows       []htmlWindow
	Thresholds    *section
}

func renderHTML(w io.Writer, rep *Report) error {
	p := htmlPage{R: rep}
	p.Head = headSection(rep).Lines
	// Escaped here rather than by the template, which writes "+" as &#43;:
	// versions like 20.10.24+dfsg1 stay greppable in the file.
	p.Headline = plainHTML(rep.Headline)
	for _, g := range rep.Thresholds {
		if g.Broken() {
			p.Broken = append(p.Broken, plainHTML([]string{g.String()})...)
		}
	}
	if s, ok := envSection(rep.Env); ok {
		p.Env = plainHTML(s.Lines)
		if s.Header != nil {
			p.EnvHosts = &htmlTable{Header: plainHTML(s.Header)}
			for _, r := range s.Rows {
				p.EnvHosts.Rows = append(p.EnvHosts.Rows, plainHTML(r))
			}
		}
	}
	if s, ok := thresholdSection(rep); ok {
		p.Thresholds = &s
	}
	agg := aggregateSection(rep)
	p.AggHeader = agg.Header[:len(agg.Header)-1] // status goes under the name
	for _, r := range agg.Rows {
		row := htmlAggRow{Config: r[0], Op: r[1], Cells: r[2 : len(r)-1], IsOp: r[1] != "(all)"}
		if c := rep.Config(r[0]); c != nil && !c.OK() {
			row = htmlAggRow{Config: r[0], Failed: c.status(), Span: len(p.AggHeader) - 1}
		}
		p.Aggregate = append(p.Aggregate, row)
	}
	if s, ok := otherSection(rep); ok {
		p.Other = &s
	}
	if s, ok := capacitySection(rep); ok {
		p.Capacity = &s
	}
	if s, ok := systemSection(rep); ok {
		p.System = &s
	}
	p.Coverage = fmt.Sprintf("With the percentile bootstrap the nominal 95%% interval of a median covers the true value %.0f%% of the time at 3 repetitions, %.0f%% at 5, %.1f%% at 7 and %.0f%% at 9.",
		100*stats.MedianCoverage(3, 0.95), 100*stats.MedianCoverage(5, 0.95), 100*stats.MedianCoverage(7, 0.95), 100*stats.MedianCoverage(9, 0.95))

	// Summary vs baseline: one row per configuration, one cell per metric.
	b := rep.Config(rep.Baseline)
	for _, m := range summaryMetrics {
		if b != nil {
			if _, ok := b.Metrics[m]; ok {
				p.SummaryCols = append(p.SummaryCols, m)
				p.SummaryLabels = append(p.SummaryLabels, metricLabel(m))
			}
		}
	}
	var thr, p99 []dotRow
	var windows []windowData
	var curves []curve
	common := commonKnobs(rep.Configs)
	p.CommonKnobs = strings.Join(common, " ")
	for i, c := range rep.Configs {
		col := colour(i)
		row := htmlSummaryRow{Config: c.Label(), Colour: col, Status: c.status(), Failed: !c.OK(), Knobs: knobText(c.Knobs, common...)}
		if c.OK() && b != nil && b.OK() {
			row.Caveat = runsCaveat(min(c.Runs, b.Runs))
		}
		for _, m := range p.SummaryCols {
			cell := htmlVerdict{Metric: metricLabel(m)}
			if e, ok := c.Metrics[m]; ok {
				cell.Value = fmtMetric(m, e.Median)
				cell.CI = fmtCI(m, e.CILow, e.CIHigh)
			}
			if cmp, ok := c.VsBaseline[m]; ok {
				if cmp.Ratio != nil {
					cell.Ratio = "×" + fmtRatio(cmp.Ratio)
					if cmp.CILow != nil {
						cell.Ratio += fmt.Sprintf(" [%.3f–%.3f]", *cmp.CILow, *cmp.CIHigh)
					}
				}
				cell.Verdict = verdictText(cmp, b.Metrics[m].N, c.Metrics[m].N)
				cell.Class = verdictClass(rep.sense(m), cmp)
			}
			row.Cells = append(row.Cells, cell)
		}
		if c.Emulated {
			// Its figures compare with nothing: after the others, apart.
			if p.Apart == nil {
				p.Apart = &htmlApart{Note: EmulatedNote, Span: len(p.SummaryCols) + 1}
			}
			p.Apart.Rows = append(p.Apart.Rows, row)
		} else {
			p.Summary = append(p.Summary, row)
		}

		thr = append(thr, dotFor(c, results.MetricThroughput, col, c.Name == rep.Baseline))
		p99 = append(p99, dotFor(c, results.MetricP99Ms, col, c.Name == rep.Baseline))
		if c.OK() {
			if w, ok := windowFor(c, col); ok {
				windows = append(windows, w)
			}
		}
		if c.pooled != nil {
			h := c.pooled.Merged()
			cv := curve{Label: c.Name, Colour: col}
			for _, q := range htmlPercentiles {
				// Beyond the last sample the curve would be invented.
				if (1-q/100)*float64(h.TotalCount()) < 1 {
					break
				}
				cv.P = append(cv.P, q)
				cv.V = append(cv.V, float64(h.ValueAtQuantile(q))/1000)
			}
			curves = append(curves, cv)
		}
		if c.OK() && c.representative != nil && c.representative.System != nil {
			p.Smalls = append(p.Smalls, htmlSmall{Config: c.Name, Colour: col,
				Run:  fmt.Sprintf("run %s, repetition %d", c.representative.RunID, c.representative.Repetition+1),
				CPU:  template.HTML(timelinePlot("CPU utilisation per CPU (% busy)", 100, cpuTimelines(c.representative.System))),
				Disk: template.HTML(timelinePlot("Disk writes per second, per device", 0, diskTimelines(c.representative.System))),
			})
		}
	}
	p.OpCols, p.OpRows = opRows(rep)
	p.Windows = drawWindows(windows)
	p.Throughput = template.HTML(dotPlot("Throughput per configuration: median, 95% CI and each repetition", "throughput (per second)", thr))
	p.P99 = template.HTML(dotPlot("p99 latency per configuration: merged histogram, 95% CI and each repetition's own p99", "p99 latency (ms)", p99))
	if len(curves) > 0 {
		p.Percentiles = template.HTML(percentilePlot("Latency by percentile (all operations, merged over repetitions)", curves))
	}
	return htmlTemplate.Execute(w, p)
}

// plainHTML escapes text for an HTML text node (<, >, &, quotes) and
// nothing else.
func plainHTML(lines []string) []template.HTML {
	out := make([]template.HTML, len(lines))
	for i, l := range lines {
		out[i] = template.HTML(html.EscapeString(l))
	}
	return out
}

// knobText lists a configuration's knobs as key=value, keys sorted, so a
// reader sees what each name stands for; pairs in omit (the knobs every
// configuration shares, shown once under the table) are left out.
func knobText(k map[string]any, omit ...string) string {
	var parts []string
	for _, kv := range knobPairs(k) {
		if !slices.Contains(omit, kv) {
			parts = append(parts, kv)
		}
	}
	return strings.Join(parts, " ")
}

// commonKnobs are the key=value pairs every one of two or more
// configurations has, in order.
func commonKnobs(cs []*ConfigResult) []string {
	if len(cs) < 2 {
		return nil
	}
	var out []string
	for _, kv := range knobPairs(cs[0].Knobs) {
		all := true
		for _, c := range cs[1:] {
			if !slices.Contains(knobPairs(c.Knobs), kv) {
				all = false
				break
			}
		}
		if all {
			out = append(out, kv)
		}
	}
	return out
}

// knobPairs flattens knobs into sorted key=value pairs.
func knobPairs(k map[string]any) []string {
	var parts []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			parts = append(parts, fmt.Sprintf("%s=%v", prefix, v))
			return
		}
		for _, key := range sortedKeys(m) {
			p := key
			if prefix != "" {
				p = prefix + "." + key
			}
			walk(p, m[key])
		}
	}
	walk("", k)
	return parts
}

func dotFor(c *ConfigResult, m, col string, baseline bool) dotRow {
	r := dotRow{Label: c.Name, Colour: col, Baseline: baseline}
	e, ok := c.Metrics[m]
	switch {
	case !c.OK():
		r.Missing = cut(c.status(), 90)
	case !ok:
		r.Missing = "not measured"
	default:
		r.Value, r.Lo, r.Hi = e.Median, e.CILow, e.CIHigh
		r.Points = c.perRun[m]
	}
	return r
}

// opRows are the per-operation ratios: each operation's latency and rate
// against the baseline's same operation.
func opRows(rep *Report) ([]string, []htmlOpRow) {
	b := rep.Config(rep.Baseline)
	var rows []htmlOpRow
	for i, c := range rep.Configs {
		if c == b || len(c.OpVsBaseline) == 0 {
			continue
		}
		for _, op := range sortedKeys(c.OpVsBaseline) {
			row := htmlOpRow{Config: c.Name, Colour: colour(i), Op: op}
			for _, m := range opCompareMetrics {
				cell := htmlVerdict{Metric: metricLabel(m)}
				if cmp, ok := c.OpVsBaseline[op][m]; ok {
					if cmp.Ratio != nil {
						cell.Ratio = fmtX(*cmp.Ratio)
						if cmp.CILow != nil {
							cell.CI = fmtXCI(*cmp.Ratio, *cmp.CILow, *cmp.CIHigh)
						}
					}
					cell.Verdict = cmp.Verdict
					cell.Class = verdictClass(rep.sense(m), cmp)
				}
				row.Cells = append(row.Cells, cell)
			}
			rows = append(rows, row)
		}
	}
	return mapStrings(opCompareMetrics, metricLabel), rows
}

// windowData is a configuration's measured window as timelines.
type windowData struct {
	htmlWindow
	rate, p50, p99 timeline
}

// windowFor takes the measured window of a configuration's representative
// run (else its first run that has one), second by second.
func windowFor(c *ConfigResult, col string) (windowData, bool) {
	r := c.representative
	if r == nil || r.Result == nil || len(r.Result.PerSecond) == 0 {
		for _, o := range c.okRuns {
			if o.Result != nil && len(o.Result.PerSecond) > 0 {
				r = o
				break
			}
		}
	}
	if r == nil || r.Result == nil || len(r.Result.PerSecond) == 0 {
		return windowData{}, false
	}
	w := windowData{htmlWindow: htmlWindow{Config: c.Name, Colour: col,
		Run: fmt.Sprintf("run %s, repetition %d", r.RunID, r.Repetition+1)}}
	w.rate.Name, w.p50.Name, w.p99.Name = "requests/s", "p50", "p99"
	for _, s := range r.Result.PerSecond {
		w.rate.T = append(w.rate.T, s.T)
		w.rate.V = append(w.rate.V, float64(s.Count))
		if s.Count > 0 {
			w.p50.T, w.p50.V = append(w.p50.T, s.T), append(w.p50.V, s.P50Ms)
			w.p99.T, w.p99.V = append(w.p99.T, s.T), append(w.p99.V, s.P99Ms)
		}
	}
	return w, true
}

// drawWindows draws every configuration's window on the same scales, so
// that the small multiples compare at a glance (the k6 picture).
func drawWindows(ws []windowData) []htmlWindow {
	var maxRate, maxLat float64
	for _, w := range ws {
		for _, v := range w.rate.V {
			maxRate = math.Max(maxRate, v)
		}
		for _, v := range w.p99.V {
			maxLat = math.Max(maxLat, v)
		}
	}
	out := make([]htmlWindow, len(ws))
	for i, w := range ws {
		out[i] = w.htmlWindow
		out[i].Throughput = template.HTML(windowPlot("Requests completed per second", niceMax(maxRate), []timeline{w.rate}))
		out[i].Latency = template.HTML(windowPlot("Latency per second (ms)", niceMax(maxLat), []timeline{w.p50, w.p99}))
	}
	return out
}

// verdictClass colours a verdict: better, worse, or neither.
func verdictClass(s stats.Sense, c stats.Comparison) string {
	switch {
	case !c.Significant():
		return "same"
	case s.Neutral:
		return "same"
	case c.Verdict == s.Better:
		return "better"
	default:
		return "worse"
	}
}

var htmlTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ctrperf report: {{.R.Plan}}</title>
<style>
:root { --ink:#1d2329; --muted:#5b6670; --line:#dde1e6; --bg:#f6f7f9; --card:#fff;
        --better:#0a7d5a; --worse:#c2410c; --same:#5b6670; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1230px; margin: 0 auto; padding: 28px 24px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 19px; margin: 34px 0 10px; }
.sub { color: var(--muted); margin: 0 0 4px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px; margin: 12px 0; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 13.5px; }
th, td { padding: 6px 9px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 12.5px; text-transform: none; background: #fafbfc; }
th:first-child, td:first-child, td.l, th.l { text-align: left; }
tr.apart th { background: #fff4e0; font-weight: normal; font-style: italic; }
tr.op td:first-child { color: var(--muted); }
td.status, div.status { text-align: left; color: var(--muted); white-space: normal; font-size: 12.5px; }
td.cfgcell { white-space: normal; min-width: 170px; max-width: 300px; }
.failed { color: var(--worse) !important; font-weight: 600; }
table.text-last td:last-child, table.text-last th:last-child { text-align: left; }
.swatch { display:inline-block; width:11px; height:11px; border-radius:3px; margin-right:7px; vertical-align: -1px; }
.knobs { color: var(--muted); font-size: 12px; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.cell { display:flex; flex-direction:column; align-items:flex-end; gap:1px; }
.cell .v { font-weight: 600; }
.cell .ci { color: var(--muted); font-size: 12px; }
table.summary td { white-space: normal; }
.badge { display:inline-block; max-width: 150px; text-align: center; line-height: 1.3; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; }
.badge.better { color: var(--better); background: #e8f5f0; }
.badge.worse { color: var(--worse); background: #fdf0e8; }
.badge.same { color: var(--same); background: #f1f3f5; }
.warnings li { margin: 6px 0; }
.warnings .cfg { font-weight: 600; }
.warnings .adv { color: var(--muted); }
.grid { display:grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 12px; }
.small { background: var(--card); border:1px solid var(--line); border-radius:10px; padding: 10px 12px; }
.small h3 { font-size: 14px; margin: 0 0 2px; }
.small .run { color: var(--muted); font-size: 12px; margin: 0 0 4px; }
svg { max-width: 100%; height: auto; display: block; }
svg text { font-family: inherit; fill: var(--ink); }
svg .ptitle { font-size: 15px; font-weight: 600; }
svg .stitle { font-size: 12px; font-weight: 600; }
svg .tick { font-size: 12px; fill: var(--muted); }
svg .axis { font-size: 12.5px; fill: var(--muted); }
svg .label { font-size: 13.5px; }
svg .value { font-size: 12px; fill: var(--muted); }
svg .legend { font-size: 13px; }
svg .legend-s { font-size: 11px; }
svg .missing { font-size: 13px; fill: var(--worse); font-style: italic; }
.note { color: var(--muted); font-size: 13px; }
.answer ul { margin: 0; padding-left: 20px; font-size: 16px; }
.answer li { margin: 4px 0; }
.env h3 { font-size: 14px; margin: 0 0 4px; color: var(--muted); }
.env ul { margin: 0; padding-left: 20px; font-size: 13.5px; }
.env table.hosts { margin-top: 10px; font-size: 13px; }
.env table.hosts td, .env table.hosts th { text-align: left; white-space: normal; }
.caveat { color: var(--worse); font-size: 12px; white-space: normal; }
footer { color: var(--muted); font-size: 12.5px; margin-top: 40px; border-top: 1px solid var(--line); padding-top: 12px; }
</style>
</head>
<body>
<main>
<h1>ctrperf report{{if .R.Plan}}: {{.R.Plan}}{{end}}</h1>
<div class="card answer"><ul>{{range .Headline}}<li>{{.}}</li>{{end}}{{range .Broken}}<li class="failed">THRESHOLD BROKEN: {{.}}</li>{{end}}</ul></div>
{{range .Head}}<p class="sub">{{.}}</p>{{end}}
{{if .Env}}<div class="card env"><h3>Environment</h3><ul>{{range .Env}}<li>{{.}}</li>{{end}}</ul>{{with .EnvHosts}}
<table class="hosts">
<tr>{{range $i, $h := .Header}}<th{{if lt $i 1}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 1}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}
</table>{{end}}</div>{{end}}

{{with .Capacity}}<h2>{{.Title}}</h2>
<div class="card"><table class="text-last">
<tr>{{range $i, $h := .Header}}<th{{if lt $i 1}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 1}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}
</table><p class="note">{{.Note}}</p></div>{{end}}

<h2>Versus the baseline <em>{{.R.Baseline}}</em></h2>
<div class="card">
<table class="summary">
<tr><th class="l">configuration</th>{{range .SummaryLabels}}<th>{{.}}</th>{{end}}</tr>
{{define "summaryRow"}}<tr>
<td class="cfgcell"><span class="swatch" style="background:{{.Colour}}"></span><b>{{.Config}}</b>{{if .Knobs}}<div class="knobs">{{.Knobs}}</div>{{end}}<div class="status{{if .Failed}} failed{{end}}">{{.Status}}</div>{{if .Caveat}}<div class="caveat">{{.Caveat}}</div>{{end}}</td>
{{range .Cells}}<td title="{{.Metric}}: 95% CI {{.CI}}"><div class="cell">{{if .Value}}<span class="v">{{.Value}}</span>{{if .Ratio}}<span class="ci">{{.Ratio}}</span>{{else}}<span class="ci">CI {{.CI}}</span>{{end}}{{if .Verdict}}<span class="badge {{.Class}}">{{.Verdict}}</span>{{end}}{{else}}–{{end}}</div></td>{{end}}
</tr>{{end}}{{range .Summary}}{{template "summaryRow" .}}{{end}}
{{with .Apart}}<tr class="apart"><th class="l" colspan="{{.Span}}">{{.Note}}</th></tr>
{{range .Rows}}{{template "summaryRow" .}}{{end}}{{end}}
</table>
{{if .CommonKnobs}}<p class="note">Common to every configuration: <span class="knobs">{{.CommonKnobs}}</span></p>{{end}}
<p class="note">Each cell: the configuration's median, then ×ratio to the baseline with the ratio's 95% interval in brackets (both sides resampled independently), then the verdict. An interval that contains 1 is “no measurable difference”, never a win or a loss. The baseline row shows each median's own interval; hover a cell for any configuration's.</p>
</div>

{{with .Thresholds}}<h2>Thresholds</h2>
<div class="card"><table class="text-last">
<tr>{{range $i, $h := .Header}}<th{{if lt $i 2}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 2}} class="l"{{end}}{{if eq $c "BROKEN"}} class="failed"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}
</table><p class="note">{{.Note}}</p></div>{{end}}

{{if .OpRows}}<h2>Per operation, versus the baseline</h2>
<div class="card"><table class="summary">
<tr><th class="l">configuration</th><th class="l">operation</th>{{range .OpCols}}<th>{{.}} ratio</th>{{end}}</tr>
{{range .OpRows}}<tr><td class="l"><span class="swatch" style="background:{{.Colour}}"></span>{{.Config}}</td><td class="l">{{.Op}}</td>
{{range .Cells}}<td title="{{.Metric}}"><div class="cell">{{if .Ratio}}<span class="v">{{.Ratio}}</span>{{if .CI}}<span class="ci">{{.CI}}</span>{{end}}<span class="badge {{.Class}}">{{.Verdict}}</span>{{else}}–{{end}}</div></td>{{end}}</tr>
{{end}}</table>
<p class="note">Each operation's median latency, p99 and rate divided by the baseline's same operation, with the 95% interval of the ratio.</p></div>{{end}}

<h2>Throughput</h2>
<div class="card">{{.Throughput}}</div>
<div class="card">{{.P99}}</div>

{{if .Windows}}<h2>Over the measured window</h2>
<p class="note">Second by second, as the load generator saw it, in each configuration's representative run (throughput nearest the median): requests completed in each second and their p50 and p99.</p>
<div class="grid">{{range .Windows}}<div class="small"><h3><span class="swatch" style="background:{{.Colour}}"></span>{{.Config}}</h3><p class="run">{{.Run}}</p>{{.Throughput}}{{.Latency}}</div>{{end}}</div>{{end}}

{{if .Percentiles}}<h2>Latency percentiles</h2>
<div class="card">{{.Percentiles}}
<p class="note">Each curve is read from the latency histogram merged over all repetitions of the configuration (never averaged percentiles). The x axis spreads the tail: equal steps for 90%, 99%, 99.9%, 99.99%.</p></div>{{end}}

<h2>Aggregate report</h2>
<div class="card">
<table>
<tr>{{range $i, $h := .AggHeader}}<th{{if lt $i 2}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Aggregate}}{{if .Failed}}<tr><td>{{.Config}}</td><td class="l failed" colspan="{{.Span}}">{{.Failed}}</td></tr>
{{else}}<tr{{if .IsOp}} class="op"{{end}}><td>{{if .IsOp}}{{else}}<b>{{.Config}}</b>{{end}}</td><td class="l">{{.Op}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}{{end}}</table>
<p class="note">One row per configuration (all operations, in bold) and per operation. samples/run, throughput and KB/s are medians across runs; latencies come from the merged histogram.</p>
</div>

{{with .Other}}<h2>{{.Title}}</h2>
<div class="card"><table class="text-last">
<tr>{{range $i, $h := .Header}}<th{{if lt $i 2}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 2}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}
</table><p class="note">{{.Note}}</p></div>{{end}}

<h2>System</h2>
{{if .Smalls}}<p class="note">Timelines of one representative run per configuration (the run whose throughput is nearest the median).</p>
<div class="grid">{{range .Smalls}}<div class="small"><h3><span class="swatch" style="background:{{.Colour}}"></span>{{.Config}}</h3><p class="run">{{.Run}}</p>{{.CPU}}{{.Disk}}</div>{{end}}</div>{{end}}
{{with .System}}<div class="card"><table>
<tr>{{range $i, $h := .Header}}<th{{if lt $i 3}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 3}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}
</table><p class="note">Mean / max over every sample of every successful run.</p></div>{{else}}<p class="note">No observer data in these results.</p>{{end}}

<h2>Warnings</h2>
<div class="card warnings">{{if .R.Warnings}}<ul>{{range .R.Warnings}}<li>{{if .Config}}<span class="cfg">{{.Config}}:</span> {{end}}{{.Message}}{{if .Advice}} <span class="adv">— {{.Advice}}</span>{{end}}</li>{{end}}</ul>{{else}}<p>None.</p>{{end}}</div>

<footer>Generated by ctrperf from results.jsonl; recompute any time with <code>ctrperf report DIR --format html</code>. Intervals: percentile bootstrap over whole repetitions, {{.R.Resamples}} resamples. {{.Coverage}}</footer>
</main>
</body>
</html>
`))

package report

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// section is one titled table (or, with no header, a list of lines) that the
// terminal and Markdown renderers both print.
type section struct {
	Title  string
	Note   string
	Header []string
	Rows   [][]string
	Lines  []string // for lists (warnings)
	// Bullets makes Lines a list in Markdown (an untitled section is the
	// report's answer: plain lines on a terminal).
	Bullets bool
}

// cut shortens long cells (error messages) for the terminal table; the full
// text is in the warnings.
func cut(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// headSection is the report's title block: what was compared and how the
// figures were computed.
func headSection(rep *Report) section {
	head := fmt.Sprintf("plan %s", orDash(rep.Plan))
	if rep.Workload != "" {
		head += ", workload " + rep.Workload
	}
	head += fmt.Sprintf(", baseline %s, %d configurations", rep.Baseline, len(rep.Configs))
	return section{Title: "ctrperf report", Lines: []string{head,
		fmt.Sprintf("Figures are medians across repetitions; latencies come from histograms merged over all repetitions; intervals are %.0f%% percentile-bootstrap intervals (%d resamples of whole runs).", rep.Level*100, rep.Resamples)}}
}

// answerSection is the report's first lines: the headline, then the
// gates that are broken.
func answerSection(rep *Report) section {
	s := section{Lines: append([]string{}, rep.Headline...), Bullets: true}
	for _, g := range rep.Thresholds {
		if g.Broken() {
			s.Lines = append(s.Lines, "THRESHOLD BROKEN: "+g.String())
		}
	}
	return s
}

// textSections are the table and Markdown report. The terminal form starts
// with the answer itself; Markdown with its title, then the answer.
func textSections(rep *Report, md bool) []section {
	var out []section
	if md {
		a, h := answerSection(rep), headSection(rep)
		a.Title, h.Title = h.Title, ""
		if rep.Plan != "" {
			a.Title += ": " + rep.Plan
		}
		out = append(out, a, h)
	} else {
		out = append(out, answerSection(rep), headSection(rep))
	}
	if s, ok := envSection(rep.Env); ok {
		out = append(out, s)
	}
	if s, ok := capacitySection(rep); ok {
		out = append(out, s)
	}
	out = append(out, aggregateSection(rep))
	if s, ok := summarySection(rep); ok {
		out = append(out, s)
	}
	if s, ok := thresholdSection(rep); ok {
		out = append(out, s)
	}
	if s, ok := otherSection(rep); ok {
		out = append(out, s)
	}
	if s, ok := systemSection(rep); ok {
		out = append(out, s)
	}
	out = append(out, warningSection(rep.Warnings))
	return out
}

func thresholdSection(rep *Report) (section, bool) {
	return gateSection("Thresholds", "the plan's gates; a rule is broken only when the whole interval of the ratio is beyond it (exit code 3)", rep.Thresholds)
}

// summarySections are the short form: the answer, the headline comparison
// and what to be careful about. With the baseline alone there is nothing
// to compare, so the aggregate stands in.
func summarySections(rep *Report) []section {
	out := []section{answerSection(rep), headSection(rep)}
	if s, ok := capacitySection(rep); ok {
		out = append(out, s)
	}
	if s, ok := summarySection(rep); ok {
		out = append(out, s)
	} else {
		out = append(out, aggregateSection(rep))
	}
	if s, ok := thresholdSection(rep); ok {
		out = append(out, s)
	}
	return append(out, warningSection(rep.Warnings))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

var aggregateCols = []string{results.MetricSamples, results.MetricMeanMs, results.MetricP50Ms, results.MetricP90Ms, results.MetricP99Ms, results.MetricMinMs, results.MetricMaxMs, results.MetricErrorRate, results.MetricThroughput, results.MetricKBPerS}

func aggregateSection(rep *Report) section {
	s := section{Title: "Aggregate report",
		Note:   "one row per configuration (all operations) and per operation; samples/run, throughput and KB/s are medians across runs",
		Header: append([]string{"config", "operation", "runs"}, mapStrings(aggregateCols, metricLabel)...)}
	s.Header = append(s.Header, "status")
	for _, c := range rep.Configs {
		if !c.OK() {
			row := []string{c.Label(), "-", fmt.Sprint(c.Runs)}
			for range aggregateCols {
				row = append(row, "-")
			}
			s.Rows = append(s.Rows, append(row, cut(c.status(), 70)))
			continue
		}
		s.Rows = append(s.Rows, aggregateRow(c.Label(), "(all)", c.Runs, c.Metrics, cut(c.status(), 70)))
		for _, op := range c.OperationNames() {
			s.Rows = append(s.Rows, aggregateRow(c.Label(), op, c.Operations[op][results.MetricSamples].N, c.Operations[op], ""))
		}
	}
	return s
}

func aggregateRow(config, op string, runs int, m map[string]stats.Estimate, status string) []string {
	row := []string{config, op, fmt.Sprint(runs)}
	for _, k := range aggregateCols {
		e, ok := m[k]
		if !ok {
			row = append(row, "-")
			continue
		}
		row = append(row, fmtMetric(k, e.Median))
	}
	return append(row, status)
}

func summarySection(rep *Report) (section, bool) {
	s := section{Title: "Versus baseline " + rep.Baseline,
		Note:   "ratio = configuration / baseline; an interval that contains 1.000 is no measurable difference",
		Header: []string{"config", "metric", "baseline", "config", "ratio", "95% CI of ratio", "verdict"}}
	b := rep.Config(rep.Baseline)
	for _, c := range rep.Configs {
		if c == b {
			continue
		}
		if c.Emulated && c.OK() {
			s.Rows = append(s.Rows, []string{c.Label(), "-", "-", "-", "-", "-", EmulatedNote})
			continue
		}
		if !c.OK() || b == nil || !b.OK() {
			s.Rows = append(s.Rows, []string{c.Name, "-", "-", "-", "-", "-", "no comparison: " + cut(firstNonEmpty(c.status(), b.status()), 60)})
			continue
		}
		for _, m := range summaryMetrics {
			cmp, ok := c.VsBaseline[m]
			if !ok {
				continue
			}
			s.Rows = append(s.Rows, []string{c.Name, metricLabel(m), fmtMetric(m, b.Metrics[m].Median), fmtMetric(m, c.Metrics[m].Median),
				fmtRatio(cmp.Ratio), fmtRatioCI(cmp), verdictText(cmp, b.Metrics[m].N, c.Metrics[m].N)})
		}
	}
	return s, len(s.Rows) > 0
}

func firstNonEmpty(c, b string) string {
	if !strings.HasPrefix(c, "ok") {
		return c
	}
	return "baseline " + b
}

func otherSection(rep *Report) (section, bool) {
	others := otherMetrics(rep)
	s := section{Title: "Other metrics",
		Note:   "the workload's and tools' own figures: median [95% CI] and ratio to the baseline",
		Header: []string{"config", "metric", "median", "95% CI", "ratio", "verdict"}}
	for _, c := range rep.Configs {
		for _, m := range others {
			e, ok := c.Metrics[m]
			if !ok {
				continue
			}
			ratio, verdict := "-", "baseline"
			if c.Name != rep.Baseline {
				ratio, verdict = "n/a", "no baseline value"
				if cmp, ok := c.VsBaseline[m]; ok {
					ratio, verdict = fmtRatio(cmp.Ratio), verdictText(cmp, e.N, rep.Config(rep.Baseline).Metrics[m].N)
				}
			}
			name := m
			if u := rep.Declared[m].Unit; u != "" {
				name += " (" + u + ")"
			}
			s.Rows = append(s.Rows, []string{c.Name, name, fmtNum(e.Median), fmtCI(m, e.CILow, e.CIHigh), ratio, verdict})
		}
	}
	return s, len(s.Rows) > 0
}

// systemSection pivots the observers' figures: one row per figure, one
// "mean / max" column per configuration, as the seed compared iostat maxima.
func systemSection(rep *Report) (section, bool) {
	type key struct{ group, subject, figure, unit string }
	var keys []key
	seen := map[key]bool{}
	vals := map[key]map[string]SystemFigure{}
	for _, c := range rep.Configs {
		for _, f := range c.System {
			k := key{f.Group, f.Subject, f.Figure, f.Unit}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
				vals[k] = map[string]SystemFigure{}
			}
			vals[k][c.Name] = f
		}
	}
	rank := map[string]int{"cpu": 0, "system": 1, "disk": 2, "container": 3, "process": 4}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return rank[keys[i].group] < rank[keys[j].group]
		}
		return keys[i].subject < keys[j].subject
	})
	s := section{Title: "System (mean / max over all samples of successful runs)",
		Header: []string{"group", "subject", "figure"}}
	for _, c := range rep.Configs {
		s.Header = append(s.Header, c.Name)
	}
	for _, k := range keys {
		allZero := k.group != "cpu"
		for _, f := range vals[k] {
			allZero = allZero && f.Max == 0
		}
		if allZero {
			continue
		}
		label := k.figure
		if k.unit != "" && !strings.HasSuffix(k.figure, k.unit) {
			label += " " + k.unit
		}
		row := []string{k.group, k.subject, label}
		for _, c := range rep.Configs {
			f, ok := vals[k][c.Name]
			if !ok {
				row = append(row, "-")
				continue
			}
			row = append(row, fmtNum(f.Mean)+" / "+fmtNum(f.Max))
		}
		s.Rows = append(s.Rows, row)
	}
	return s, len(s.Rows) > 0
}

func warningSection(ws []Warning) section {
	s := section{Title: "Warnings"}
	for _, w := range ws {
		s.Lines = append(s.Lines, warningLine(w))
	}
	if len(ws) == 0 {
		s.Lines = []string{"none"}
	}
	return s
}

func warningLine(w Warning) string {
	line := w.Message
	if w.Config != "" {
		line = w.Config + ": " + line
	}
	if w.Advice != "" {
		line += " — " + w.Advice
	}
	return line
}

func renderText(w io.Writer, secs []section, md bool) error {
	var b strings.Builder
	for i, s := range secs {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case s.Title == "":
		case md && i == 0:
			fmt.Fprintf(&b, "# %s\n\n", s.Title)
		case md:
			fmt.Fprintf(&b, "## %s\n\n", s.Title)
		default:
			fmt.Fprintf(&b, "%s\n%s\n", s.Title, strings.Repeat("=", len([]rune(s.Title))))
		}
		if s.Note != "" {
			if md {
				fmt.Fprintf(&b, "_%s_\n\n", s.Note)
			} else {
				fmt.Fprintf(&b, "(%s)\n", s.Note)
			}
		}
		for _, l := range s.Lines {
			if md && s.Header == nil && (s.Title == "Warnings" || s.Bullets) {
				fmt.Fprintf(&b, "- %s\n", mdEscape(l))
			} else if md {
				fmt.Fprintf(&b, "%s\n\n", mdEscape(l))
			} else if s.Title == "Warnings" {
				fmt.Fprintf(&b, "- %s\n", l)
			} else {
				fmt.Fprintf(&b, "%s\n", l)
			}
		}
		if s.Header == nil {
			continue
		}
		if md {
			writeMDTable(&b, s.Header, s.Rows)
			continue
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(s.Header, "\t"))
		for _, r := range s.Rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	text := b.String()
	if md {
		// paragraphs end in a blank line and sections start with one
		text = regexp.MustCompile(`\n{3,}`).ReplaceAllString(text, "\n\n")
	}
	_, err := io.WriteString(w, text)
	return err
}

func writeMDTable(b *strings.Builder, header []string, rows [][]string) {
	esc := func(cells []string) []string { return mapStrings(cells, mdEscape) }
	fmt.Fprintf(b, "| %s |\n", strings.Join(esc(header), " | "))
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
		if i >= 2 {
			seps[i] = "--:" // figures right-aligned
		}
	}
	fmt.Fprintf(b, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(esc(r), " | "))
	}
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "_", `\_`, "*", `\*`).Replace(s)
}

func mapStrings(xs []string, f func(string) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

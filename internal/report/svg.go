package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The plots are SVG written here, so that the HTML report is one file with
// no scripts or fonts fetched from anywhere.

// palette is Okabe & Ito's colour-blind-safe set (yellow left out: it
// vanishes on white).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"}

func colour(i int) string { return palette[i%len(palette)] }

// linear maps a data interval onto a pixel interval.
type linear struct{ d0, d1, r0, r1 float64 }

func (s linear) at(v float64) float64 {
	if s.d1 == s.d0 {
		return (s.r0 + s.r1) / 2
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

// niceTicks returns round tick values covering [lo, hi] with about n steps.
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Floor(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// niceMax is the top of an axis that starts at zero and holds max.
func niceMax(max float64) float64 {
	if max <= 0 || math.IsNaN(max) {
		return 1
	}
	t := niceTicks(0, max, 5)
	top := t[len(t)-1]
	if top < max {
		top += t[1] - t[0]
	}
	return top
}

// svgDoc accumulates one SVG element.
type svgDoc struct {
	b    strings.Builder
	w, h float64
}

func newSVG(w, h float64, label string) *svgDoc {
	s := &svgDoc{w: w, h: h}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		w, h, w, h, esc(label))
	fmt.Fprintf(&s.b, `<title>%s</title>`, esc(label))
	return s
}

func (s *svgDoc) raw(format string, a ...any) { fmt.Fprintf(&s.b, format, a...) }

func (s *svgDoc) text(x, y float64, anchor, class, t string) {
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`, x, y, anchor, class, esc(t))
}

func (s *svgDoc) line(x1, y1, x2, y2 float64, stroke string, width float64, extra string) {
	fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f" %s/>`, x1, y1, x2, y2, stroke, width, extra)
}

func (s *svgDoc) polyline(xs, ys []float64, stroke string, width float64, tip string) {
	var pts []string
	for i := range xs {
		if math.IsNaN(xs[i]) || math.IsNaN(ys[i]) {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs[i], ys[i]))
	}
	fmt.Fprintf(&s.b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round" points="%s"><title>%s</title></polyline>`,
		stroke, width, strings.Join(pts, " "), esc(tip))
}

func (s *svgDoc) String() string { return s.b.String() + "</svg>" }

func esc(s string) string { return html.EscapeString(s) }

// dotRow is one configuration in a dot plot with whiskers.
type dotRow struct {
	Label    string
	Colour   string
	Value    float64
	Lo, Hi   *float64
	Missing  string // non-empty: no value, say this instead
	Baseline bool
	// Points are the repetitions' own values, drawn as small rings beside
	// the median (a strip plot): how the runs spread, not only the interval.
	Points []float64
}

// dotPlot draws one horizontal row per configuration: a dot at the median
// and a whisker over its interval, with a dashed reference line at the
// baseline's median. Dots suit medians better than bars: the axis need not
// start at zero to be honest, but here it does, so ratios read off directly.
func dotPlot(title, unit string, rows []dotRow) string {
	const left, right, top, rowH, bottom = 210.0, 30.0, 56.0, 40.0, 46.0
	w := 1060.0
	h := top + rowH*float64(len(rows)) + bottom
	max := 0.0
	for _, r := range rows {
		if r.Missing != "" {
			continue
		}
		max = math.Max(max, r.Value)
		if r.Hi != nil {
			max = math.Max(max, *r.Hi)
		}
		for _, v := range r.Points {
			max = math.Max(max, v)
		}
	}
	x := linear{0, niceMax(max), left, w - right}
	s := newSVG(w, h, title)
	s.text(8, 20, "start", "ptitle", title)
	axisBottom := top + rowH*float64(len(rows))
	for _, t := range niceTicks(0, x.d1, 6) {
		px := x.at(t)
		s.line(px, top-6, px, axisBottom, "#e3e6ea", 1, "")
		s.text(px, axisBottom+16, "middle", "tick", tickLabel(t))
	}
	s.text((left+w-right)/2, h-8, "middle", "axis", unit)
	for _, r := range rows {
		if r.Baseline && r.Missing == "" {
			px := x.at(r.Value)
			s.line(px, top-6, px, axisBottom, "#555", 1, `stroke-dasharray="4 3"`)
			s.text(px, top-12, "middle", "tick", "baseline")
		}
	}
	for i, r := range rows {
		y := top + rowH*float64(i) + rowH/2
		s.text(left-12, y+4, "end", "label", r.Label)
		if r.Missing != "" {
			s.text(left+6, y+4, "start", "missing", r.Missing)
			continue
		}
		tip := fmt.Sprintf("%s: %s %s", r.Label, fmtNum(r.Value), unit)
		if r.Lo != nil && r.Hi != nil {
			tip += fmt.Sprintf(" (95%% CI %s .. %s)", fmtNum(*r.Lo), fmtNum(*r.Hi))
			x0, x1 := x.at(*r.Lo), x.at(*r.Hi)
			s.line(x0, y, x1, y, r.Colour, 2.5, "")
			s.line(x0, y-7, x0, y+7, r.Colour, 2.5, "")
			s.line(x1, y-7, x1, y+7, r.Colour, 2.5, "")
		}
		for j, v := range r.Points {
			// Below the whisker, spread a little so equal runs stay visible.
			dy := 10 + float64(j%3)*3
			s.raw(`<circle cx="%.1f" cy="%.1f" r="3.2" fill="none" stroke="%s" stroke-width="1.4" opacity="0.85"><title>%s: repetition value %s</title></circle>`,
				x.at(v), y+dy, r.Colour, esc(r.Label), fmtNum(v))
		}
		s.raw(`<circle cx="%.1f" cy="%.1f" r="6.5" fill="%s" stroke="#fff" stroke-width="1.5"><title>%s</title></circle>`,
			x.at(r.Value), y, r.Colour, esc(tip))
		label := fmtNum(r.Value)
		if r.Lo == nil {
			label += " (no CI)"
		}
		// Near the right edge the label goes left of the dot.
		if px := x.at(r.Value); px > w-right-110 {
			s.text(px-10, y-9, "end", "value", label)
		} else {
			s.text(px+10, y-9, "start", "value", label)
		}
	}
	return s.String()
}

// curve is one line of a percentile plot.
type curve struct {
	Label  string
	Colour string
	P      []float64 // percentiles in (0, 100)
	V      []float64 // ms
}

// nines maps a percentile onto the "number of nines" axis: 50 → 0.30,
// 90 → 1, 99 → 2, 99.9 → 3.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// percentilePlot draws latency against percentile on a nines scale, so the
// tail gets as much room as the body, and latency on a log scale, so a 10x
// tail does not flatten the median into the floor.
func percentilePlot(title string, curves []curve) string {
	const left, right, top, bottom = 70.0, 220.0, 44.0, 50.0
	w, h := 1060.0, 400.0
	minV, maxV := math.Inf(1), 0.0
	for _, c := range curves {
		for _, v := range c.V {
			if v > 0 {
				minV = math.Min(minV, v)
				maxV = math.Max(maxV, v)
			}
		}
	}
	if maxV == 0 {
		minV, maxV = 0.1, 1
	}
	lo, hi := logBelow(minV), logAbove(maxV)
	x := linear{nines(50), nines(99.99), left, w - right}
	y := linear{lo, hi, h - bottom, top}
	s := newSVG(w, h, title)
	s.text(8, 20, "start", "ptitle", title)
	for _, p := range []float64{50, 90, 99, 99.9, 99.99} {
		px := x.at(nines(p))
		s.line(px, top, px, h-bottom, "#e3e6ea", 1, "")
		s.text(px, h-bottom+18, "middle", "tick", trimFloat(p)+"%")
	}
	for d := math.Floor(lo); d <= hi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > hi+1e-9 || math.Log10(v) < lo-1e-9 {
				continue
			}
			py := y.at(math.Log10(v))
			stroke := "#eef0f3"
			if m == 1 {
				stroke = "#d5dae0"
			}
			s.line(left, py, w-right, py, stroke, 1, "")
			s.text(left-8, py+4, "end", "tick", tickLabel(v))
		}
	}
	s.text((left+w-right)/2, h-10, "middle", "axis", "percentile (log scale of nines)")
	s.raw(`<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle" class="axis">latency (ms, log scale)</text>`, (top+h-bottom)/2)
	for i, c := range curves {
		xs := make([]float64, len(c.P))
		ys := make([]float64, len(c.V))
		for j := range c.P {
			xs[j] = x.at(nines(c.P[j]))
			ys[j] = math.NaN()
			if c.V[j] > 0 {
				ys[j] = y.at(math.Log10(c.V[j]))
			}
		}
		s.polyline(xs, ys, c.Colour, 2.5, c.Label)
		ly := top + 10 + float64(i)*22
		s.line(w-right+16, ly, w-right+40, ly, c.Colour, 3, "")
		s.text(w-right+46, ly+4, "start", "legend", c.Label)
	}
	return s.String()
}

// logBelow is log10 of the largest 1-2-5 step at or below v; logAbove of
// the smallest at or above it. They keep a log axis tight around the data.
func logBelow(v float64) float64 {
	d := math.Floor(math.Log10(v))
	for _, m := range []float64{5, 2, 1} {
		if m*math.Pow(10, d) <= v {
			return math.Log10(m * math.Pow(10, d))
		}
	}
	return d
}

func logAbove(v float64) float64 {
	d := math.Floor(math.Log10(v))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*math.Pow(10, d) >= v {
			return math.Log10(m * math.Pow(10, d))
		}
	}
	return d + 1
}

// tickLabel prints a round tick value without trailing zeros.
func tickLabel(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func trimFloat(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// timelinePlot is a small multiple: a few series over the seconds of one run.
func timelinePlot(title string, fixedMax float64, series []timeline) string {
	return timeAxisPlot(title, fixedMax, series, "seconds into the run")
}

// windowPlot is a small multiple over the seconds of the measured window.
func windowPlot(title string, yMax float64, series []timeline) string {
	return timeAxisPlot(title, yMax, series, "seconds into the measured window")
}

func timeAxisPlot(title string, fixedMax float64, series []timeline, xLabel string) string {
	const left, right, top, bottom = 40.0, 18.0, 40.0, 34.0
	w, h := 370.0, 170.0
	maxV, maxT := 0.0, 0.0
	for _, tl := range series {
		for i := range tl.V {
			maxV = math.Max(maxV, tl.V[i])
			maxT = math.Max(maxT, tl.T[i])
		}
	}
	if fixedMax > 0 {
		maxV = fixedMax
	}
	x := linear{0, math.Max(maxT, 1), left, w - right}
	y := linear{0, niceMax(maxV), h - bottom, top}
	s := newSVG(w, h, title)
	s.text(4, 14, "start", "stitle", title)
	for _, t := range niceTicks(0, y.d1, 4) {
		py := y.at(t)
		s.line(left, py, w-right, py, "#e3e6ea", 1, "")
		s.text(left-5, py+4, "end", "tick", tickLabel(t))
	}
	for _, t := range niceTicks(0, x.d1, 5) {
		s.text(x.at(t), h-bottom+14, "middle", "tick", tickLabel(t))
	}
	s.text((left+w-right)/2, h-6, "middle", "axis", xLabel)
	for i, tl := range series {
		xs := make([]float64, len(tl.T))
		ys := make([]float64, len(tl.V))
		for j := range tl.T {
			xs[j], ys[j] = x.at(tl.T[j]), y.at(tl.V[j])
		}
		s.polyline(xs, ys, colour(i), 1.8, tl.Name)
		lx := left + float64(i)*70
		s.line(lx, 26, lx+14, 26, colour(i), 3, "")
		s.text(lx+18, 30, "start", "legend-s", tl.Name)
	}
	if len(series) == 0 {
		s.text(w/2, h/2, "middle", "missing", "not observed")
	}
	return s.String()
}

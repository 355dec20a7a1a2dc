package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

// withSearch turns a fixture run into a capacity search run: its
// measurement is the highest passing step's, with the search record and
// the metrics a workload's RunSearch adds (no capacity_per_s when no rate
// passed).
func withSearch(rec *results.RunRecord, outcome string, capacity float64, steps int) {
	s := &results.CapacitySearch{SLO: map[string]float64{results.MetricP99Ms: 50, results.MetricErrorRate: 0.01},
		From: 50, To: 5000, Precision: 0.05, Outcome: outcome, CapacityPerS: capacity, ElapsedS: float64(steps) * 8}
	for i := 0; i < steps; i++ {
		s.Steps = append(s.Steps, results.CapacityStep{RatePerS: 50 * float64(i+1), Pass: i < steps-1, DurationS: 8})
	}
	m := rec.Result
	m.Capacity = s
	m.Metrics[results.MetricCapacitySteps] = float64(steps)
	m.Metrics[results.MetricCapacitySearch] = s.ElapsedS
	if outcome != results.CapacityBelow {
		m.Metrics[results.MetricCapacity] = capacity
	}
}

func capacityRecords(t *testing.T) []results.RunRecord {
	cfgs := []fixtureConfig{
		{name: "host", knobs: map[string]any{"runtime": "host"}, reps: 3, rate: 40, noise: 0.02, latencyMs: 4, failRep: -1, shortRep: -1},
		{name: "docker-published", knobs: map[string]any{"runtime": "docker"}, reps: 3, rate: 33, noise: 0.02, latencyMs: 6, failRep: -1, shortRep: -1},
		{name: "docker-overloaded", knobs: map[string]any{"runtime": "docker"}, reps: 3, rate: 20, noise: 0.02, latencyMs: 90, failRep: -1, shortRep: -1},
		{name: "docker-huge", knobs: map[string]any{"runtime": "docker"}, reps: 3, rate: 60, noise: 0.02, latencyMs: 2, failRep: -1, shortRep: -1},
	}
	recs := genRecordsFrom(t, cfgs, 7)
	capacity := map[string][]float64{"host": {400, 410, 395}, "docker-published": {300, 310, 290}, "docker-huge": {5000, 5000, 5000}}
	for i := range recs {
		r := &recs[i]
		switch r.Config {
		case "docker-overloaded":
			withSearch(r, results.CapacityBelow, 0, 1)
		case "docker-huge":
			withSearch(r, results.CapacityAtLeast, 5000, 8)
		default:
			withSearch(r, results.CapacityFound, capacity[r.Config][r.Repetition], 11)
		}
	}
	return recs
}

// The report shows every configuration's capacity with its interval and
// ratio, the searches' cost, "below the lowest rate tried" for a
// configuration where no rate met the SLO, and "at least" for one that
// never failed, in every format people read.
func TestCapacityReport(t *testing.T) {
	rep, err := Build(capacityRecords(t), WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	over := rep.Config("docker-overloaded")
	if _, has := over.Metrics[results.MetricCapacity]; has {
		t.Errorf("a configuration where no rate met the SLO has capacity_per_s %v", over.Metrics[results.MetricCapacity])
	}
	if over.Capacity == nil || over.Capacity.Below != 3 || over.Capacity.Text != "below the lowest rate tried (50/s)" {
		t.Fatalf("capacity %+v", over.Capacity)
	}
	pub := rep.Config("docker-published")
	if e := pub.Metrics[results.MetricCapacity]; e.Median != 300 || !e.HasCI() {
		t.Errorf("docker-published capacity %+v", e)
	}
	cmp, ok := pub.VsBaseline[results.MetricCapacity]
	if !ok || cmp.Ratio == nil || *cmp.Ratio != 0.75 || cmp.Verdict != "slower" {
		t.Errorf("docker-published capacity vs host: %+v", cmp)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "table"); err != nil {
		t.Fatal(err)
	}
	if l := lineWith(buf.String(), "docker-huge  "); !strings.Contains(l, "faster (a side is only a lower bound)") {
		t.Errorf("at-least verdict: %q", l)
	}
	if huge := rep.Config("docker-huge").Capacity; huge.AtLeast != 3 || !strings.HasPrefix(huge.Text, "at least 5000/s") {
		t.Errorf("docker-huge %+v", huge)
	}
	if rep.Config("host").Capacity.Steps != 11 || rep.Config("host").Capacity.SearchS != 88 {
		t.Errorf("host cost %+v", rep.Config("host").Capacity)
	}

	for _, format := range []string{"table", "md", "summary", "html"} {
		var buf bytes.Buffer
		if err := Render(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if format == "md" {
			out = strings.ReplaceAll(out, `\_`, "_")
		}
		for _, want := range []string{"Capacity at the SLO", "p99_ms ≤ 50, error_rate ≤ 0.01",
			"below the lowest rate tried (50/s)", "below 50", "no capacity: no rate met the SLO",
			"≥ 5000", "at least 5000/s", "found within 5%", "0.750"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s report lacks %q:\n%s", format, want, out)
			}
		}
		if format == "table" {
			line := lineWith(sectionOf(out, "Capacity at the SLO"), "docker-published")
			if !strings.Contains(line, " 300 ") || !strings.Contains(line, "290 .. 310") || !strings.Contains(line, " 11.0 ") || !strings.Contains(line, " 88.0 ") {
				t.Errorf("docker-published capacity row %q lacks interval or cost", line)
			}
			if strings.Contains(sectionOf(out, "Other metrics"), "capacity_") {
				t.Errorf("capacity metrics repeated among the other metrics")
			}
		}
	}
	var csvOut bytes.Buffer
	if err := Render(&csvOut, rep, "csv"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csvOut.String(), "docker-overloaded,,capacity_below_runs,3,") ||
		strings.Contains(csvOut.String(), "docker-overloaded,,capacity_per_s") {
		t.Errorf("csv:\n%s", csvOut.String())
	}
}

// A plan without searches has no capacity section.
func TestNoCapacitySectionWithoutSearch(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, loadFixture(t), "table"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Capacity") {
		t.Error("capacity section without a search")
	}
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return fmt.Sprintf("(no line with %q)", sub)
}

func sectionOf(text, title string) string {
	i := strings.Index(text, title)
	if i < 0 {
		return ""
	}
	rest := text[i:]
	if j := strings.Index(rest[len(title):], "\n\n"); j >= 0 {
		return rest[:len(title)+j]
	}
	return rest
}

// A run whose search found no passing rate counts as capacity 0 in the
// median, so that the configuration's capacity is not the median of its
// luckier runs only; when most runs found nothing, the section says
// "below" the lowest rate.
func TestCapacityMedianCountsRunsBelow(t *testing.T) {
	cfgs := []fixtureConfig{
		{name: "host", knobs: map[string]any{"runtime": "host"}, reps: 3, rate: 40, noise: 0.02, latencyMs: 4, failRep: -1, shortRep: -1},
		{name: "one-below", knobs: map[string]any{"runtime": "docker"}, reps: 3, rate: 30, noise: 0.02, latencyMs: 6, failRep: -1, shortRep: -1},
		{name: "two-below", knobs: map[string]any{"runtime": "docker"}, reps: 3, rate: 20, noise: 0.02, latencyMs: 60, failRep: -1, shortRep: -1},
	}
	recs := genRecordsFrom(t, cfgs, 11)
	found := map[string][]float64{"host": {400, 410, 395}, "one-below": {0, 200, 300}, "two-below": {0, 0, 300}}
	for i := range recs {
		r := &recs[i]
		if v := found[r.Config][r.Repetition]; v == 0 {
			withSearch(r, results.CapacityBelow, 0, 1)
		} else {
			withSearch(r, results.CapacityFound, v, 11)
		}
	}
	rep, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	one := rep.Config("one-below")
	if e := one.Metrics[results.MetricCapacity]; e.Median != 200 || e.N != 3 {
		t.Errorf("one run below, two at 200 and 300: capacity %+v, want the median of all three runs, 200", e)
	}
	if one.Capacity.Below != 1 || !strings.Contains(one.Capacity.Text, "below the lowest rate tried (50/s) in 1 of 3 runs") {
		t.Errorf("capacity %+v", one.Capacity)
	}
	two := rep.Config("two-below")
	if e := two.Metrics[results.MetricCapacity]; e.Median != 0 {
		t.Errorf("two runs below: capacity %+v, want a median of 0", e)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "table"); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "two-below ") {
			row = l // the capacity section comes first
			break
		}
	}
	if !strings.Contains(row, "below 50") {
		t.Errorf("the capacity row of two-below does not say it is below the lowest rate:\n%s", buf.String())
	}
}

package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

var update = flag.Bool("update", false, "regenerate testdata/smoke and the golden files")

const fixtureDir = "testdata/smoke"

// testStats keeps the bootstrap small and seeded: goldens must be stable
// and the tests fast.
var testStats = WithStats(stats.Options{Resamples: 400, Seed: 1})

func loadFixture(t *testing.T) *Report {
	t.Helper()
	if *update {
		writeFixture(t, fixtureDir, genRecords(t), "host")
	}
	rep, err := Load(fixtureDir, testStats)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGolden(t *testing.T) {
	rep := loadFixture(t)
	for _, format := range []string{"table", "md", "csv", "json", "summary"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, rep, format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", "smoke."+format)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s output differs from %s (run go test -update and review the diff):\n%s", format, golden, buf.String())
			}
		})
	}
}

func TestReportSemantics(t *testing.T) {
	rep := loadFixture(t)
	if rep.Baseline != "host" || rep.Configs[0].Name != "host" {
		t.Fatalf("baseline %q (first %q), want host from plan.yaml", rep.Baseline, rep.Configs[0].Name)
	}
	tests := []struct {
		desc    string
		config  string
		metric  string
		verdict string
	}{
		{"docker-proxy costs throughput", "docker-published", results.MetricThroughput, "slower"},
		{"docker-proxy costs latency", "docker-published", "p90_ms", "slower"},
		{"docker-proxy errors", "docker-published", results.MetricErrorRate, stats.UndefinedZero},
		{"host networking is as fast as the host", "docker-host-net", results.MetricThroughput, stats.NoDifference},
		{"no errors on either side", "docker-host-net", results.MetricErrorRate, stats.BothZero},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := rep.Config(tt.config)
			cmp, ok := c.VsBaseline[tt.metric]
			if !ok {
				t.Fatalf("%s has no comparison for %s", tt.config, tt.metric)
			}
			if cmp.Verdict != tt.verdict {
				t.Errorf("%s %s: verdict %q, want %q (ratio %s [%s])", tt.config, tt.metric, cmp.Verdict, tt.verdict, fmtRatio(cmp.Ratio), fmtRatioCI(cmp))
			}
		})
	}

	t.Run("not-run configuration has no numbers", func(t *testing.T) {
		c := rep.Config("docker-btrfs")
		if c.Runs != 0 || c.NotRun != 3 || len(c.Metrics) != 0 || len(c.Operations) != 0 || len(c.VsBaseline) != 0 {
			t.Errorf("docker-btrfs: runs %d not_run %d metrics %v", c.Runs, c.NotRun, c.Metrics)
		}
		var buf bytes.Buffer
		if err := Render(&buf, rep, "table"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "NOT RUN: storage driver btrfs unavailable") {
			t.Error("table does not show the not-run configuration with its error")
		}
	})
	t.Run("failed run is counted and excluded", func(t *testing.T) {
		c := rep.Config("docker-host-net")
		if c.Runs != 4 || c.Failed != 1 || c.Metrics[results.MetricThroughput].N != 4 {
			t.Errorf("docker-host-net: runs %d failed %d n %d", c.Runs, c.Failed, c.Metrics[results.MetricThroughput].N)
		}
	})
	t.Run("two repetitions have an interval, one is noisy", func(t *testing.T) {
		c := rep.Config("docker-volume-2reps")
		if !c.Metrics[results.MetricThroughput].HasCI() {
			t.Error("n=2 should have an interval")
		}
	})

	wantWarnings := []struct{ config, contains string }{
		{"docker-btrfs", "3 of 3 runs were not run"},
		{"docker-host-net", "1 of 5 runs failed: deploy ticketd"},
		{"docker-volume-2reps", "2 successful repetitions"},
		{"docker-volume-2reps", "noisy: add repetitions or lengthen duration"},
		{"docker-published", "achieved rate below target in 5 of 5 runs"},
		{"docker-published", "sessions started late (driver note)"},
		{"docker-published", "errors present"},
	}
	for _, ww := range wantWarnings {
		found := false
		for _, w := range rep.Warnings {
			if w.Config == ww.config && strings.Contains(w.Message+" — "+w.Advice, ww.contains) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing warning for %s containing %q; have %+v", ww.config, ww.contains, rep.Warnings)
		}
	}
	for _, w := range rep.Warnings {
		if w.Config == "host" && !strings.Contains(w.Message, "observer") {
			t.Errorf("unexpected warning for the clean baseline: %+v", w)
		}
	}
}

// TestPercentilesFromMergedHistograms recomputes the configuration's p99
// independently from the raw records and checks the report used the merged
// histogram, not an average of per-run percentiles.
func TestPercentilesFromMergedHistograms(t *testing.T) {
	recs, err := results.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	merged := results.NewHistogram()
	var perRun []float64
	var errs, count int64
	for _, r := range recs {
		if r.Config != "docker-published" || r.Status != results.StatusOK {
			continue
		}
		run := results.NewHistogram()
		for _, op := range r.Result.Operations {
			h, err := results.DecodeHistogram(op.Histogram)
			if err != nil {
				t.Fatal(err)
			}
			merged.Merge(h)
			run.Merge(h)
			errs += op.ErrorCount()
			count += op.Count
		}
		perRun = append(perRun, float64(run.ValueAtQuantile(99))/1000)
	}
	c := rep.Config("docker-published")
	want := float64(merged.ValueAtQuantile(99)) / 1000
	if got := c.Metrics["p99_ms"].Median; got != want {
		t.Errorf("p99_ms = %v, merged histogram says %v", got, want)
	}
	if got, want := c.Metrics[results.MetricErrorRate].Median, float64(errs)/float64(count); math.Abs(got-want) > 1e-12 {
		t.Errorf("error_rate = %v, pooled %v", got, want)
	}
	var avg float64
	for _, v := range perRun {
		avg += v / float64(len(perRun))
	}
	if avg == want {
		t.Log("note: averaged per-run p99 happens to equal the merged one")
	}
	e := c.Metrics["p99_ms"]
	if !e.HasCI() || *e.CILow > want || *e.CIHigh < want {
		t.Errorf("p99 interval %s does not contain the point %v", fmtCI("p99_ms", e.CILow, e.CIHigh), want)
	}
}

func TestJSONSchema(t *testing.T) {
	rep := loadFixture(t)
	var buf bytes.Buffer
	if err := Render(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plan     string `json:"plan"`
		Baseline string `json:"baseline"`
		Configs  []struct {
			Name       string                               `json:"name"`
			Runs       int                                  `json:"runs"`
			Failed     int                                  `json:"failed"`
			NotRun     int                                  `json:"not_run"`
			Metrics    map[string]map[string]any            `json:"metrics"`
			VsBaseline map[string]map[string]any            `json:"vs_baseline"`
			Operations map[string]map[string]map[string]any `json:"operations"`
		} `json:"configs"`
		Warnings []map[string]string `json:"warnings"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Plan != "smoke" || doc.Baseline != "host" || len(doc.Configs) != 5 || len(doc.Warnings) == 0 {
		t.Fatalf("top level: plan %q baseline %q configs %d warnings %d", doc.Plan, doc.Baseline, len(doc.Configs), len(doc.Warnings))
	}
	for _, c := range doc.Configs {
		if c.Runs == 0 {
			continue
		}
		for _, m := range []string{results.MetricThroughput, "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", results.MetricErrorRate, results.MetricKBPerS, "elapsed_s"} {
			e, ok := c.Metrics[m]
			if !ok {
				t.Errorf("%s lacks metric %s", c.Name, m)
				continue
			}
			for _, f := range []string{"median", "ci_low", "ci_high"} {
				if _, ok := e[f]; !ok {
					t.Errorf("%s.%s lacks %s", c.Name, m, f)
				}
			}
		}
		if c.Name != "host" {
			v := c.VsBaseline[results.MetricThroughput]
			for _, f := range []string{"ratio", "ci_low", "ci_high", "verdict"} {
				if _, ok := v[f]; !ok {
					t.Errorf("%s vs_baseline.throughput_per_s lacks %s", c.Name, f)
				}
			}
		}
		if _, ok := c.Operations["login"]["p90_ms"]["median"]; !ok {
			t.Errorf("%s lacks operations.login.p90_ms", c.Name)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	recs := genRecords(t)
	tests := []struct {
		desc string
		recs []results.RunRecord
		opts []Option
		want string
	}{
		{"no records", nil, nil, "no run records"},
		{"baseline names no configuration", recs, []Option{WithBaseline("nope")}, `baseline "nope" names no configuration`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Build(tt.recs, append(tt.opts, testStats)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := Render(&bytes.Buffer{}, &Report{}, "pdf"); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestBaselineChoice(t *testing.T) {
	recs := genRecords(t)
	tests := []struct {
		desc     string
		recs     []results.RunRecord
		opts     []Option
		want     string
		warnPart string
	}{
		{"explicit", recs, []Option{WithBaseline("docker-host-net")}, "docker-host-net", ""},
		{"runtime host when none is named", recs, nil, "host", "runtime host"},
		{"first configuration otherwise", onlyConfigs(recs, "docker-published", "docker-host-net"), nil, "docker-published", "first configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			rep, err := Build(tt.recs, append(tt.opts, testStats)...)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Baseline != tt.want || rep.Configs[0].Name != tt.want {
				t.Errorf("baseline %q first %q, want %q", rep.Baseline, rep.Configs[0].Name, tt.want)
			}
			if tt.warnPart != "" && !strings.Contains(rep.Warnings[0].Message, tt.warnPart) {
				t.Errorf("first warning %+v, want one mentioning %q", rep.Warnings[0], tt.warnPart)
			}
		})
	}
}

func onlyConfigs(recs []results.RunRecord, names ...string) []results.RunRecord {
	var out []results.RunRecord
	for _, r := range recs {
		for _, n := range names {
			if r.Config == n {
				out = append(out, r)
			}
		}
	}
	return out
}

func TestLoadTruncatedAndBadHistogram(t *testing.T) {
	dir := t.TempDir()
	recs := onlyConfigs(genRecords(t), "host", "docker-published")
	recs[1].Result.Operations["login"].Histogram = "not base64!"
	writeFixture(t, dir, recs, "")
	f, err := os.OpenFile(filepath.Join(dir, results.FileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"plan":"smoke","config":"ho`)
	f.Close()
	rep, err := Load(dir, testStats)
	if err != nil {
		t.Fatal(err)
	}
	var truncated, badHist bool
	for _, w := range rep.Warnings {
		truncated = truncated || strings.Contains(w.Message, "truncated")
		badHist = badHist || strings.Contains(w.Message, "decode histogram")
	}
	if !truncated || !badHist {
		t.Errorf("warnings %+v: want a truncated-file and a bad-histogram warning", rep.Warnings)
	}
	if rep.Config("host").Runs != 5 {
		t.Errorf("host runs %d, want 5 (the bad histogram drops latency, not the run)", rep.Config("host").Runs)
	}
}

// TestToolPercentilesWithoutHistogram covers wrapped tools (fio, sysbench)
// that give percentiles but no histogram: they are medians across runs.
func TestToolPercentilesWithoutHistogram(t *testing.T) {
	var recs []results.RunRecord
	for i, p99 := range []float64{2.0, 2.2, 2.1} {
		recs = append(recs, results.RunRecord{Plan: "fio", Config: "host", Index: i, Status: results.StatusOK, Workload: "fileio",
			Result: &results.Measurement{DurationS: 10, Metrics: map[string]float64{"throughput_per_s": 1000 + float64(i), "iops": 1000},
				Operations: map[string]*results.Operation{"write": {Count: 10000, PercentilesMs: map[string]float64{"99.000000": p99, "50": 1}, MeanMs: 1.1}}}})
	}
	rep, err := Build(recs, testStats)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Config("host")
	if got := c.Metrics["p99_ms"].Median; got != 2.1 {
		t.Errorf("p99_ms %v, want the median 2.1", got)
	}
	if got := c.Operations["write"]["p50_ms"].Median; got != 1 {
		t.Errorf("write p50_ms %v, want 1", got)
	}
	if _, ok := c.Metrics["iops"]; !ok {
		t.Error("tool metric iops not passed through")
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "iops") {
		t.Error("table lacks the tool's own metric")
	}
}

// A metric the workload declared (the command workload's figure, named
// by the plan) gets its verdict from the declaration, not from its name,
// and shows its unit; runs that disagree leave it neutral with a warning.
func TestDeclaredMetricsDecideVerdicts(t *testing.T) {
	mk := func(config string, i int, tps, wall float64, better string) results.RunRecord {
		return results.RunRecord{Plan: "cmd", Config: config, Index: i, Status: results.StatusOK, Workload: "command",
			Knobs: map[string]any{"runtime": map[bool]string{true: "host", false: "docker"}[config == "host"]},
			Result: &results.Measurement{DurationS: 1, Metrics: map[string]float64{"tps": tps, "wall_median_s": wall},
				Declared: map[string]results.MetricInfo{"tps": {Better: better, Unit: "tx/s"}, "wall_median_s": {Better: "lower", Unit: "s"}}}}
	}
	var recs []results.RunRecord
	for i := range 3 {
		recs = append(recs, mk("host", 2*i, 100+float64(i), 1+float64(i)/100, "higher"), mk("docker", 2*i+1, 80+float64(i), 1.5+float64(i)/100, "higher"))
	}
	rep, err := Build(recs, testStats, WithBaseline("host"))
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Config("docker")
	if v := d.VsBaseline["tps"].Verdict; v != "worse" {
		t.Errorf("tps 80 vs 100, declared higher is better: verdict %q, want worse", v)
	}
	if v := d.VsBaseline["wall_median_s"].Verdict; v != "worse" {
		t.Errorf("wall 1.5 s vs 1 s, declared lower is better: verdict %q, want worse", v)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "tps (tx/s)") {
		t.Errorf("the table does not show the figure's unit:\n%s", buf.String())
	}

	recs[1].Result.Declared["tps"] = results.MetricInfo{Better: "lower", Unit: "tx/s"}
	rep, err = Build(recs, testStats, WithBaseline("host"))
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Config("docker").VsBaseline["tps"].Verdict; v != "lower" {
		t.Errorf("conflicting declarations: verdict %q, want the neutral lower", v)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w Warning) bool { return strings.Contains(w.Message, "declare metric tps differently") }) {
		t.Errorf("no warning of the conflict: %+v", rep.Warnings)
	}
}

// TestEmptyHistogramsRenderAsJSON: runs whose requests all failed carry
// empty histograms; the report must have no latency rather than NaN (which
// JSON cannot encode).
func TestEmptyHistogramsRenderAsJSON(t *testing.T) {
	empty, err := results.EncodeHistogram(results.NewHistogram())
	if err != nil {
		t.Fatal(err)
	}
	var recs []results.RunRecord
	for i := 0; i < 3; i++ {
		recs = append(recs, results.RunRecord{Plan: "p", Config: "host", Index: i, Status: results.StatusOK,
			Result: &results.Measurement{DurationS: 10, Operations: map[string]*results.Operation{
				"get": {Count: 100, Errors: map[string]int64{"refused": 100}, Histogram: empty}}}})
	}
	rep, err := Build(recs, testStats)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range Formats {
		if err := Render(&bytes.Buffer{}, rep, format); err != nil {
			t.Errorf("%s: %v", format, err)
		}
	}
	if _, has := rep.Config("host").Metrics["p99_ms"]; has {
		t.Error("p99_ms reported without any latency sample")
	}
	if got := rep.Config("host").Metrics[results.MetricErrorRate].Median; got != 1 {
		t.Errorf("error_rate %v, want 1", got)
	}
}

// TestLoadWarnsOfConcurrentRuns: --allow-concurrent, recorded in env.json,
// is a warning in the report.
func TestLoadWarnsOfConcurrentRuns(t *testing.T) {
	for _, tc := range []struct {
		desc, env, want string
	}{
		{"beside another session", `{"concurrency":{"allow_concurrent":true,"beside":["pid 7 (ctrperf bench run x), output out/A"]}}`, "beside another bench run (pid 7"},
		{"allowed but alone at start", `{"concurrency":{"allow_concurrent":true}}`, "no other bench run was running"},
		{"not allowed", `{"machine":{}}`, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			writeFixture(t, dir, onlyConfigs(genRecords(t), "host", "docker-published"), "")
			if err := os.WriteFile(filepath.Join(dir, results.EnvFileName), []byte(tc.env), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Load(dir, testStats)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, w := range rep.Warnings {
				if strings.Contains(w.Message, "--allow-concurrent") {
					found = tc.want != "" && strings.Contains(w.Message, tc.want)
					if !found {
						t.Errorf("warning %q, want one containing %q", w.Message, tc.want)
					}
				}
			}
			if tc.want != "" && !found {
				t.Errorf("no --allow-concurrent warning in %+v", rep.Warnings)
			}
		})
	}
}

// TestEmulatedShownApart: a configuration whose records say emulated (a
// VM guest on an emulated CPU) gets no ratio to the baseline, in any
// section, and every view says why.
func TestEmulatedShownApart(t *testing.T) {
	recs := onlyConfigs(genRecords(t), "host", "docker-host-net")
	for i := range recs {
		if recs[i].Config == "docker-host-net" {
			recs[i].Emulated = true
		}
	}
	rep, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Config("docker-host-net")
	if !c.Emulated || c.VsBaseline != nil || c.OpVsBaseline != nil || !c.OK() {
		t.Errorf("emulated config: emulated %v, vs baseline %v, ops %v, ok %v", c.Emulated, c.VsBaseline, c.OpVsBaseline, c.OK())
	}
	if h := strings.Join(rep.Headline, "\n"); !strings.Contains(h, "docker-host-net: "+EmulatedNote+" (ran: ") || strings.Contains(h, "×") {
		t.Errorf("headline:\n%s", h)
	}
	var b bytes.Buffer
	if err := Render(&b, rep, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), EmulatedNote) {
		t.Errorf("text report without %q:\n%s", EmulatedNote, b.String())
	}
	// The HTML report's table itself: the emulated row after the others,
	// under the note, not only in the headline above it.
	b.Reset()
	if err := Render(&b, rep, "html"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	start := strings.Index(page, `<table class="summary">`)
	end := start + strings.Index(page[max(start, 0):], "</table>")
	if start < 0 || end < start {
		t.Fatalf("no summary table in the HTML report")
	}
	table := page[start:end]
	note, row, host := strings.Index(table, `class="apart"`), strings.Index(table, "<b>docker-host-net</b>"), strings.Index(table, "<b>host</b>")
	if note < 0 || row < note || host > note || !strings.Contains(table[note:], EmulatedNote) {
		t.Errorf("the summary table does not show the emulated row apart under %q (note at %d, row at %d, baseline at %d):\n%s", EmulatedNote, note, row, host, table)
	}
}

// TestDefaultBaselineIsNotAGuest: without a named baseline the first
// configuration on bare metal is taken, never a VM guest's (whose
// services are processes too, of another kernel), emulated or not.
func TestDefaultBaselineIsNotAGuest(t *testing.T) {
	recs := onlyConfigs(genRecords(t), "host", "docker-host-net")
	var out []results.RunRecord
	for _, r := range recs {
		if r.Config == "docker-host-net" {
			r.Config, r.Knobs = "a-guest", map[string]any{"runtime": "vm"}
			r.Index -= 1000 // the plan's first configuration
			out = append(out, r)
		} else {
			out = append(out, r)
		}
	}
	rep, err := Build(out, testStats)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline != "host" {
		t.Errorf("baseline %q, want host (bare metal), not the guest", rep.Baseline)
	}
}

// TestContainerInVMLabelled: a configuration whose records say its
// services ran in a Docker engine inside a VM guest (runtime vm with
// vm.docker) is labelled "(container in VM)" in the headline and the
// tables; the others are not.
func TestContainerInVMLabelled(t *testing.T) {
	recs := onlyConfigs(genRecords(t), "host", "docker-host-net")
	for i := range recs {
		if recs[i].Config == "docker-host-net" {
			recs[i].Emulated = true
			recs[i].Engine = &results.EngineInfo{Runtime: "vm", VM: &results.VMInfo{Accel: "tcg", Emulated: true, Docker: true}}
		}
	}
	rep, err := Build(recs, WithBaseline("host"), testStats)
	if err != nil {
		t.Fatal(err)
	}
	if c, h := rep.Config("docker-host-net"), rep.Config("host"); !c.ContainerInVM || h.ContainerInVM {
		t.Errorf("container in VM: %v for the guest, %v for the host", c.ContainerInVM, h.ContainerInVM)
	}
	label := "docker-host-net (container in VM)"
	if h := strings.Join(rep.Headline, "\n"); !strings.Contains(h, label+": "+EmulatedNote) {
		t.Errorf("headline:\n%s", h)
	}
	for _, format := range []string{"table", "html"} {
		var b bytes.Buffer
		if err := Render(&b, rep, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), label) {
			t.Errorf("%s report without %q:\n%s", format, label, b.String())
		}
	}
}

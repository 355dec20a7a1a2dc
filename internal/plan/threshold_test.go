package plan

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestThresholdsParse(t *testing.T) {
	p := load(t, "thresholds.yaml", Options{Schema: testSchema{}})
	got := map[string]Threshold{}
	for _, th := range p.Thresholds {
		got[th.Config+"/"+th.Metric] = th
	}
	want := map[string]struct {
		op    string
		limit float64
		line  int
	}{
		"/p99_ms":           {"<", 1.10, 13},
		"/throughput_per_s": {">", 0.95, 14},
		"published/p99_ms":  {"<=", 1.5, 16},
	}
	if len(got) != len(want) {
		t.Fatalf("thresholds = %+v, want %d", p.Thresholds, len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.Op != w.op || g.Limit < w.limit-1e-9 || g.Limit > w.limit+1e-9 || g.Line != w.line {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
	// published has its own p99 rule, which replaces the plan-wide one.
	for _, th := range ThresholdsFor(p.Thresholds, "published") {
		if th.Metric == "p99_ms" && th.Limit != 1.5 {
			t.Errorf("published gets the plan-wide p99 rule %+v", th)
		}
	}
	if n := len(ThresholdsFor(p.Thresholds, "container-ip")); n != 2 {
		t.Errorf("container-ip has %d rules, want the 2 plan-wide ones", n)
	}
}

func TestThresholdsBadLines(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "bad", "thresholds.yaml"), Options{Schema: testSchema{}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		`thresholds.yaml:10: thresholds.p99_ms: "1.10 x baseline": expected a comparison with the baseline`,
		`thresholds.yaml:11: thresholds.P99: "P99": expected a metric name`,
		`thresholds.yaml:12: thresholds.throughput_per_s: "10%": a percentage is a change, written with its sign`,
		`thresholds.yaml:13: thresholds.mean_ms: "1.1 x baselin": expected "baseline" after x`,
		`thresholds.yaml:15: thresholds.publishd: "publishd" names no configuration; did you mean "published"?`,
		`thresholds.yaml:17: thresholds.bare: "bare" is the baseline`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
		}
	}
}

func TestThresholdsCanonicalAndHash(t *testing.T) {
	p := load(t, "thresholds.yaml", Options{Schema: testSchema{}})
	canon, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"thresholds:", `p99_ms: < 1.1 x baseline`, `throughput_per_s: '> 0.95 x baseline'`, "  published:\n    p99_ms: <= 1.5 x baseline"} {
		if !bytes.Contains(canon, []byte(w)) {
			t.Errorf("canonical form lacks %q:\n%s", w, canon)
		}
	}
	again, err := Parse("canon.yaml", canon, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
	}
	canon2, _ := again.Canonical()
	if !bytes.Equal(canon, canon2) {
		t.Errorf("canonical form not stable:\n%s\n---\n%s", canon, canon2)
	}
	// A gate is not part of what runs: changing it keeps --resume working.
	h1, _ := p.Hash()
	p.Thresholds = nil
	h2, _ := p.Hash()
	if h1 != h2 {
		t.Error("thresholds change the plan hash")
	}
	// --only without the configuration a rule names: the rule is dropped
	// from the canonical form, which still parses.
	only := load(t, "thresholds.yaml", Options{Schema: testSchema{}, Only: []string{"container-ip"}})
	c, _ := only.Canonical()
	if bytes.Contains(c, []byte("published:")) {
		t.Errorf("canonical form keeps a rule about a configuration not run:\n%s", c)
	}
	if _, err := Parse("only.yaml", c, Options{Schema: testSchema{}}); err != nil {
		t.Errorf("canonical form of --only does not parse: %v", err)
	}
}

func TestThresholdBroken(t *testing.T) {
	below := Threshold{Metric: "p99_ms", Op: "<", Limit: 1.10}
	above := Threshold{Metric: "throughput_per_s", Op: ">", Limit: 0.95}
	for _, tt := range []struct {
		th     Threshold
		lo, hi float64
		want   bool
	}{
		{below, 1.12, 1.30, true},  // whole interval beyond
		{below, 1.05, 1.30, false}, // straddles the limit: not evidence
		{below, 0.90, 1.09, false},
		{below, 1.10, 1.20, true}, // "<" excludes the limit itself
		{above, 0.80, 0.94, true},
		{above, 0.90, 1.00, false},
		{Threshold{Op: "<=", Limit: 1.1}, 1.10, 1.2, false},
		{Threshold{Op: ">=", Limit: 0.9}, 0.8, 0.9, false},
	} {
		if got := tt.th.Broken(tt.lo, tt.hi); got != tt.want {
			t.Errorf("%s %v [%v, %v]: broken = %v, want %v", tt.th.Op, tt.th.Limit, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestParseFailOn(t *testing.T) {
	for _, tt := range []struct {
		in     string
		config string
		metric string
		op     string
		limit  float64
		err    string
	}{
		{in: "p99_ms>+10%", metric: "p99_ms", op: "<=", limit: 1.10},
		{in: " throughput_per_s < -5% ", metric: "throughput_per_s", op: ">=", limit: 0.95},
		{in: "docker-published:p99_ms>1.2x", config: "docker-published", metric: "p99_ms", op: "<=", limit: 1.2},
		{in: "p99_ms>=1.5", metric: "p99_ms", op: "<", limit: 1.5},
		{in: "p99_ms>10%", err: "written with its sign"},
		{in: "p99_ms", err: "expected METRIC>CHANGE"},
		{in: "p99_ms>-100%", err: "cannot fall by 100%"},
		{in: "p99_ms>0x", err: "positive ratio"},
	} {
		th, err := ParseFailOn(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseFailOn(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFailOn(%q): %v", tt.in, err)
			continue
		}
		if th.Config != tt.config || th.Metric != tt.metric || th.Op != tt.op || th.Limit < tt.limit-1e-9 || th.Limit > tt.limit+1e-9 {
			t.Errorf("ParseFailOn(%q) = %+v", tt.in, th)
		}
	}
}

package bench

import (
	"strings"
	"testing"
	"time"

	"ctrperf/internal/plan"
	"ctrperf/internal/workload"
)

// A plan's isolate knob is decoded onto isolate.Params, whose ranges are
// the only ones: each problem is reported at its key's line, all at once,
// and an explicit zero is refused rather than taken for the default.
func TestIsolateKnobErrorsAtTheirLines(t *testing.T) {
	head := "name: iso\nworkload: noisy\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: docker\n    network: container-ip\n"
	tests := []struct {
		desc string
		body string
		want []string
	}{
		{"policy typo", "    isolate:\n      policy: strikt\n",
			[]string{`iso.yaml:9: configurations[0].isolate.policy: "strikt" is not valid; did you mean "strict"?`}},
		{"unknown key", "    isolate:\n      policy: paper\n      hot_afer: 2\n",
			[]string{`iso.yaml:10: configurations[0].isolate.hot_afer: unknown key; did you mean "hot_after"?`}},
		{"interval too short", "    isolate: {policy: paper, interval: 1ms}\n",
			[]string{`iso.yaml:8: configurations[0] (a).isolate.interval: 1ms: expected a sampling interval between 10ms and 1m`}},
		{"cool above hot threshold", "    isolate:\n      policy: paper\n      hot_threshold: 0.5\n      cool_threshold: 0.7\n",
			[]string{`iso.yaml:11: configurations[0] (a).isolate.cool_threshold: cool threshold 0.70 must be below hot threshold 0.50`}},
		{"threshold out of range", "    isolate: {policy: paper, hot_threshold: 2}\n",
			[]string{`iso.yaml:8: configurations[0] (a).isolate.hot_threshold: 2: expected a fraction`}},
		{"zero hot_after", "    isolate: {policy: strict, hot_after: 0}\n",
			[]string{`iso.yaml:8: configurations[0] (a).isolate.hot_after: 0: expected a number of saturated samples between 1 and 1000`}},
		{"not a number", "    isolate:\n      policy: strict\n      cool_after: lots\n",
			[]string{`iso.yaml:10: configurations[0] (a).isolate.cool_after: lots: expected an integer`}},
		{"several at once, each at its line", "    isolate:\n      policy: strict\n      stall_threshold: 2\n      irq_pattern: \"(\"\n      stall_after: 0\n",
			[]string{`iso.yaml:10: configurations[0] (a).isolate.stall_threshold: 2: expected a fraction of the interval`,
				`iso.yaml:11: configurations[0] (a).isolate.irq_pattern: "(": error parsing regexp`,
				`iso.yaml:12: configurations[0] (a).isolate.stall_after: 0: expected a number of stalled samples between 1 and 1000`}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := ParsePlan("iso.yaml", []byte(head+tt.body), plan.Options{})
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
				}
			}
		})
	}
}

// A plan read with the Schema carries every configuration's knobs decoded
// once, as its workload's typed values, and a workload knob's error points
// at the line that set it.
func TestSchemaDecodesOnce(t *testing.T) {
	src := `name: s
workload: kv
baseline: a
configurations:
  - name: a
    runtime: docker
    network: container-ip
    app: {threads: 2}
  - name: b
    runtime: docker
    network: container-ip
    load:
      concurrency: 8
`
	p, err := ParsePlan("s.yaml", []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Config("a")
	app, appOK := a.Decoded.App.(workload.KVApp)
	ld, loadOK := a.Decoded.Load.(workload.KVLoad)
	if !appOK || !loadOK || app.Threads != 2 || ld.Concurrency != workload.DefaultKVLoad.Concurrency {
		t.Fatalf("a decoded as %#v", a.Decoded)
	}
	bad := strings.Replace(src, "concurrency: 8", "concurrency: 0", 1)
	_, err = ParsePlan("s.yaml", []byte(bad), plan.Options{})
	if err == nil || !strings.Contains(err.Error(), "s.yaml:13: configurations[1] (b): configuration \"b\": workload kv: load.concurrency = 0: out of range") {
		t.Fatalf("error = %v, want one at line 13 naming load.concurrency", err)
	}
	if _, err := plan.Parse("s.yaml", []byte(src), plan.Options{}); err != nil {
		t.Fatalf("the plan's own schema (no workloads) refuses a good plan: %v", err)
	}
}

// A capacity search's errors point at the nested key that is wrong, a
// search beside a plan-level rate at the search, and bench validate shows
// the search and what it may cost.
func TestCapacitySearchPlan(t *testing.T) {
	src := `name: s
workload: web
repetitions: 2
warmup: 1s
duration: 4s
baseline: a
load:
  search:
    slo:
      p99_ms: 50
    from: 20
    to: 400
    max_steps: 10
configurations:
  - name: a
    runtime: host
  - name: b
    runtime: host
    load:
      rate: 30
`
	_, err := ParsePlan("s.yaml", []byte(src), plan.Options{})
	if err == nil || !strings.Contains(err.Error(), `s.yaml:8: configurations[1] (b): configuration "b": workload web: load.search with load.rate = 30`) {
		t.Fatalf("error = %v, want one at the search's line 8", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"p99_ms: 50", "p99_ms: -1", `s.yaml:10: configurations[0] (a): configuration "a": workload web: load.search.slo.p99_ms = -1: out of range`},
		{"p99_ms: 50", "p98_ms: 50", `s.yaml:10: configurations[0] (a): configuration "a": workload web: load.search.slo.p98_ms: unknown knob`},
		{"to: 400", "to: 20", `s.yaml:12: configurations[0] (a): configuration "a": workload web: load.search.to = 20 is not above from = 20`},
	} {
		bad := strings.Replace(strings.Replace(src, "      rate: 30\n", "      poisson: true\n", 1), tc.from, tc.to, 1)
		if _, err := ParsePlan("s.yaml", []byte(bad), plan.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.to, err, tc.want)
		}
	}

	good := strings.Replace(src, "      rate: 30\n", "      poisson: true\n", 1)
	p, err := ParsePlan("s.yaml", []byte(good), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Config("a")
	s, ok := a.Search()
	if !ok || s.MaxSteps != 10 {
		t.Fatalf("search %+v %v", s, ok)
	}
	// Budget: ten windows of 5 s, each with the session timeout's drain.
	if got, want := s.MaxDrive(5*time.Second), 10*(5*time.Second+s.StepSlack); got != want {
		t.Errorf("MaxDrive %s, want %s", got, want)
	}
	var out strings.Builder
	if err := p.Describe(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"load={search:{from:20,max_steps:10,slo:{p99_ms:50},to:400}}",
		"capacity search:\n  every configuration: highest rate with p99_ms ≤ 50, error_rate ≤ 0.01 (default); 20/s → 400/s ×2 until a step fails, then bisect to 5%; at most 10 steps and 30m0s\n",
		"measuring time at least 20s, at most 3m20s: capacity searches measure 1 to 10 windows per run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench validate lacks %q:\n%s", want, out.String())
		}
	}
}

// The command workload's knobs are refused at the line that wrote them,
// each with what to write instead, and all at once.
func TestCommandKnobErrorsAtTheirLines(t *testing.T) {
	src := `name: c
workload: command
app:
  command: [sysbench, cpu, run]
load:
  runs: 0
  figure: events
  figure_regex: "events per second: (?P<value>[0-9.]+"
configurations:
  - name: host
    runtime: host
    app:
      env: {9X: y}
`
	_, err := ParsePlan("c.yaml", []byte(src), plan.Options{})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"c.yaml:6: configurations[0] (host): configuration \"host\": workload command: load.runs = 0: out of range [1, 100000]",
		"c.yaml:7: configurations[0] (host): configuration \"host\": workload command: load.figure = events: its name does not say which way is better",
		"c.yaml:8: configurations[0] (host): configuration \"host\": workload command: load.figure_regex = events per second: (?P<value>[0-9.]+: error parsing regexp",
		"c.yaml:13: configurations[0] (host): configuration \"host\": workload command: app.env = map[9X:y]: \"9X\" is not a variable name",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nwant a line containing\n%s", err, want)
		}
	}
}

// On Kubernetes the weights are kubelet's: a plan asking for a weight
// demotion there is refused at the key's line.
func TestIsolateWeightDemotionNotOnKubernetes(t *testing.T) {
	src := "name: iso\nworkload: noisy\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: kubernetes\n    isolate: {policy: shield, demote_class: weight}\n  - name: b\n    runtime: docker\n    network: container-ip\n    isolate: {policy: shield, demote_class: weight}\n"
	_, err := ParsePlan("iso.yaml", []byte(src), plan.Options{})
	want := `iso.yaml:7: configurations[0] (a).isolate.demote_class: weight is not for runtime kubernetes`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error\n%v\ndoes not contain\n%s", err, want)
	}
	if strings.Contains(err.Error(), "configurations[1]") {
		t.Errorf("the Docker configuration's weight demotion was refused too:\n%v", err)
	}
}

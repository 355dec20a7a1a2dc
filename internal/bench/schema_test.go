package bench

import (
	"slices"
	"strings"
	"testing"

	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
	"ctrperf/internal/workload"
)

// The plan names the controller's policies without importing it; they must
// stay the controller's.
func TestPlanNamesTheControllersPolicies(t *testing.T) {
	var want []string
	for _, p := range isolate.Policies {
		want = append(want, string(p))
	}
	got := []string{plan.IsolateShield, plan.IsolatePaper, plan.IsolateStrict}
	if !slices.Equal(got, want) {
		t.Fatalf("plan knows policies %v, the controller %v", got, want)
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

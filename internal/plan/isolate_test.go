package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const isolatePlan = `name: iso
workload: testweb
baseline: off
configurations:
  - name: off
    runtime: docker
    isolate: {policy: "off"}
  - name: strict
    runtime: docker
    isolate:
      policy: strict
      interval: 500ms
      hot_after: 2
      hot_threshold: 0.6
matrix:
  base: {runtime: docker, isolate: {interval: 2s}}
  isolate.policy: [paper, strict]
  name: "m-{isolate.policy}"
`

func TestIsolateKnob(t *testing.T) {
	p, err := Parse("iso.yaml", []byte(isolatePlan), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		config string
		want   IsolateSpec
		on     bool
	}{
		{"off", IsolateSpec{Policy: "off"}, false},
		{"strict", IsolateSpec{Policy: "strict", Interval: 500 * time.Millisecond, HotAfter: 2, HotThreshold: 0.6}, true},
		{"m-paper", IsolateSpec{Policy: "paper", Interval: 2 * time.Second}, true},
		{"m-strict", IsolateSpec{Policy: "strict", Interval: 2 * time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			c, ok := p.Config(tt.config)
			if !ok {
				t.Fatalf("no configuration %s in %v", tt.config, p.Names())
			}
			if c.Isolate != tt.want || c.Isolate.On() != tt.on {
				t.Errorf("isolate = %+v (on %v), want %+v (on %v)", c.Isolate, c.Isolate.On(), tt.want, tt.on)
			}
		})
	}
	// The canonical form (OUT/plan.yaml) keeps the knob.
	b, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse("plan.yaml", b, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, b)
	}
	for i := range p.Configurations {
		if a, b := p.Configurations[i], q.Configurations[i]; a.Isolate != b.Isolate || !reflect.DeepEqual(a.KnobMap(), b.KnobMap()) {
			t.Errorf("%s: %+v != %+v after round trip", a.Name, a.Isolate, b.Isolate)
		}
	}
	c, _ := p.Config("strict")
	if got := c.KnobMap()["isolate"]; !reflect.DeepEqual(got, map[string]any{"policy": "strict", "interval": "500ms", "hot_after": 2, "hot_threshold": 0.6}) {
		t.Errorf("knob map isolate = %v", got)
	}
}

func TestIsolateKnobErrors(t *testing.T) {
	head := "name: iso\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n"
	tests := []struct {
		desc string
		body string
		want string
	}{
		{"host runtime refused", "    runtime: host\n    isolate: {policy: strict}\n",
			`iso.yaml:7: configurations[0] (a).isolate.policy: "strict" needs runtime docker`},
		{"policy typo", "    runtime: docker\n    isolate:\n      policy: strikt\n",
			`iso.yaml:8: configurations[0].isolate.policy: "strikt" is not valid; did you mean "strict"?`},
		{"unknown key", "    runtime: docker\n    isolate:\n      policy: paper\n      hot_afer: 2\n",
			`iso.yaml:9: configurations[0].isolate.hot_afer: unknown key; did you mean "hot_after"?`},
		{"interval too short", "    runtime: docker\n    isolate: {policy: paper, interval: 1ms}\n",
			`iso.yaml:7: configurations[0].isolate.interval: 1ms: expected a sampling interval between 10ms and 1m`},
		{"tuning without a policy", "    runtime: docker\n    isolate:\n      hot_after: 3\n",
			`iso.yaml:8: configurations[0] (a).isolate.hot_after: has no effect without a controller`},
		{"cool above hot threshold", "    runtime: docker\n    isolate:\n      policy: paper\n      hot_threshold: 0.5\n      cool_threshold: 0.7\n",
			`iso.yaml:10: configurations[0] (a).isolate: cool threshold 0.70 must be below hot threshold 0.50`},
		{"threshold out of range", "    runtime: docker\n    isolate: {policy: paper, hot_threshold: 2}\n",
			`iso.yaml:7: configurations[0].isolate.hot_threshold: 2: expected a fraction`},
		{"zero hot_after", "    runtime: docker\n    isolate: {policy: strict, hot_after: 0}\n",
			`iso.yaml:7: configurations[0].isolate.hot_after: 0: expected a number of saturated samples between 1 and 1000`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Parse("iso.yaml", []byte(head+tt.body), Options{Schema: testSchema{}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

package plan

import (
	"reflect"
	"strings"
	"testing"
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
		want   map[string]any
		on     bool
	}{
		{"off", map[string]any{"policy": "off"}, false},
		{"strict", map[string]any{"policy": "strict", "interval": "500ms", "hot_after": 2, "hot_threshold": 0.6}, true},
		{"m-paper", map[string]any{"policy": "paper", "interval": "2s"}, true},
		{"m-strict", map[string]any{"policy": "strict", "interval": "2s"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			c, ok := p.Config(tt.config)
			if !ok {
				t.Fatalf("no configuration %s in %v", tt.config, p.Names())
			}
			if !reflect.DeepEqual(c.Isolate.Raw, tt.want) || c.Isolate.On() != tt.on {
				t.Errorf("isolate = %v (on %v), want %v (on %v)", c.Isolate.Raw, c.Isolate.On(), tt.want, tt.on)
			}
			// The Schema decoded the knob of a controller that is on, only.
			if got := c.Isolate.Params != nil; got != tt.on {
				t.Errorf("decoded params present %v, want %v", got, tt.on)
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
		if a, b := p.Configurations[i], q.Configurations[i]; !reflect.DeepEqual(a.Isolate.Raw, b.Isolate.Raw) || !reflect.DeepEqual(a.KnobMap(), b.KnobMap()) {
			t.Errorf("%s: %v != %v after round trip", a.Name, a.Isolate.Raw, b.Isolate.Raw)
		}
	}
	c, _ := p.Config("strict")
	if got := c.KnobMap()["isolate"]; !reflect.DeepEqual(got, map[string]any{"policy": "strict", "interval": "500ms", "hot_after": 2, "hot_threshold": 0.6}) {
		t.Errorf("knob map isolate = %v", got)
	}
	// A matrix entry's knob is its own: setting one does not change another's.
	m, _ := p.Config("m-paper")
	m.Isolate.Raw["hot_after"] = 9
	if n, _ := p.Config("m-strict"); n.Isolate.Raw["hot_after"] != nil {
		t.Errorf("matrix entries share their isolate knob: %v", n.Isolate.Raw)
	}
}

// The plan's own rules about the isolate knob, and the Schema's errors at
// the line of their key (the ranges themselves are isolate.Params', tested
// in internal/bench with the real Schema).
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
		{"unknown key on a matrix axis", "    runtime: docker\nmatrix:\n  base: {runtime: docker}\n  isolate.hot_afer: [1, 2]\n",
			`isolate.hot_afer`},
		{"tuning without a policy", "    runtime: docker\n    isolate:\n      hot_after: 3\n",
			`iso.yaml:8: configurations[0] (a).isolate.hot_after: has no effect without a controller`},
		{"the Schema's error at its key's line", "    runtime: docker\n    isolate:\n      policy: paper\n      hot_threshold: 0.5\n      cool_threshold: 0.7\n",
			`iso.yaml:10: configurations[0] (a).isolate.cool_threshold: cool threshold 0.70 must be below hot threshold 0.50`},
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

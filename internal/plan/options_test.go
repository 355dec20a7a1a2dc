package plan

import (
	"strings"
	"testing"
)

// privileged and instances: configuration knobs, checked at the line that
// wrote them, usable as matrix axes, and spelled in the canonical form only
// when they differ from their defaults.
func TestPrivilegedAndInstancesKnobs(t *testing.T) {
	const head = "name: x\nworkload: testweb\nbaseline: a\nconfigurations:\n  - name: a\n"
	tests := []struct {
		desc, body string
		want       string // substring of the error; "" for none
	}{
		{"privileged on docker", "    runtime: docker\n    privileged: true\n", ""},
		{"privileged on the host", "    runtime: host\n    privileged: true\n",
			"p.yaml:7: configurations[0] (a).privileged: needs runtime docker: --privileged is a container option"},
		{"privileged false on the host is harmless", "    runtime: host\n    privileged: false\n", ""},
		{"privileged not a boolean", "    runtime: docker\n    privileged: yes please\n",
			"p.yaml:7: configurations[0].privileged: expected true or false"},
		{"instances", "    runtime: docker\n    instances: 4\n", ""},
		{"instances on the host", "    runtime: host\n    instances: 2\n", ""},
		{"zero instances", "    runtime: docker\n    instances: 0\n",
			"p.yaml:7: configurations[0].instances: 0: expected a number of identical deployments between 1 and 64"},
		{"too many instances", "    runtime: docker\n    instances: 65\n", "p.yaml:7: configurations[0].instances: 65"},
		{"instances not a number", "    runtime: docker\n    instances: many\n", "p.yaml:7: configurations[0].instances: expected an integer"},
		{"instances with the isolate controller", "    runtime: docker\n    isolate: {policy: shield}\n    instances: 2\n",
			"p.yaml:8: configurations[0] (a).instances: 2 instances with isolate.policy \"shield\": the isolate controller watches one deployment per run"},
		{"typo suggests the knob", "    runtime: docker\n    privileged_: true\n", `did you mean "privileged"?`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(head+tt.body), Options{Schema: testSchema{}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

func TestPrivilegedAndInstancesCanonical(t *testing.T) {
	src := `name: x
workload: testweb
baseline: one
configurations:
  - name: one
    runtime: docker
    instances: 1
    privileged: false
matrix:
  runtime: [docker]
  privileged: [true]
  instances: [1, 3]
  name: "p-{instances}"
`
	p, err := Parse("p.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := p.Config("one")
	three, _ := p.Config("p-3")
	p1, _ := p.Config("p-1")
	if one.Instances != 1 || one.Privileged || three.Instances != 3 || !three.Privileged || p1.Instances != 1 {
		t.Fatalf("knobs: one %+v, p-3 %+v, p-1 %+v", one.Knobs, three.Knobs, p1.Knobs)
	}
	if _, ok := one.KnobMap()["instances"]; ok {
		t.Errorf("instances: 1 is the default and must not change the knobs of plans that do not use it: %v", one.KnobMap())
	}
	if _, ok := one.KnobMap()["privileged"]; ok {
		t.Errorf("privileged: false is the default: %v", one.KnobMap())
	}
	if k := three.KnobMap(); k["instances"] != 3 || k["privileged"] != true {
		t.Errorf("p-3 knobs = %v, want instances 3 and privileged true", k)
	}
	if d := three.describeKnobs(); !strings.Contains(d, "privileged") || !strings.Contains(d, "instances=3") {
		t.Errorf("describe = %q", d)
	}
	b1, _ := p.Canonical()
	q, err := Parse("plan.yaml", b1, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, b1)
	}
	b2, _ := q.Canonical()
	if string(b1) != string(b2) || !strings.Contains(string(b1), "instances: 3") || !strings.Contains(string(b1), "privileged: true") {
		t.Fatalf("canonical form:\n%s\n---\n%s", b1, b2)
	}
}

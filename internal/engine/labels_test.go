package engine

import (
	"reflect"
	"testing"
)

// A service's own labels reach its container, but never replace the run's
// ctrperf.* labels that teardown and `ctrperf clean` select by.
func TestServiceLabels(t *testing.T) {
	tests := []struct {
		desc   string
		labels map[string]string
		want   map[string]string
	}{
		{"none", nil, map[string]string{LabelManaged: "true", LabelRun: "r1", LabelService: "app"}},
		{"opt in to isolate", map[string]string{"ctrperf.isolate": "true"},
			map[string]string{LabelManaged: "true", LabelRun: "r1", LabelService: "app", "ctrperf.isolate": "true"}},
		{"run labels win", map[string]string{LabelRun: "other", LabelService: "x", "k": "v"},
			map[string]string{LabelManaged: "true", LabelRun: "r1", LabelService: "app", "k": "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := validSpec()
			s.Services[0].Labels = tc.labels
			b := Bindings{}
			for _, sv := range s.Services {
				b[sv.Name] = ServiceBinding{Host: ObjectName(s.RunID, sv.Name), PortsIdentity: true, DataDir: sv.DataDir}
			}
			cfg, _, _, err := containerConfigs(s, 0, b, "/b", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Labels, tc.want) {
				t.Errorf("labels = %v, want %v", cfg.Labels, tc.want)
			}
		})
	}
}

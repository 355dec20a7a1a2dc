package report

import (
	"strings"
	"testing"

	"ctrperf/internal/results"
)

// An engine line names the runtime the engine reported (Podman's service
// is no Docker engine); a record without one is Docker's.
func TestEngineLineNamesItsRuntime(t *testing.T) {
	for _, tc := range []struct{ runtime, want string }{
		{"podman", "Podman engine ctrperf-podman-s1: version 4.3.1"},
		{"docker", "Docker engine default: version 4.3.1"},
		{"", "Docker engine default: version 4.3.1"},
	} {
		name := "default"
		if tc.runtime == "podman" {
			name = "ctrperf-podman-s1"
		}
		l := engineLine(EngineUse{EngineInfo: results.EngineInfo{Runtime: tc.runtime, Name: name, Version: "4.3.1"}})
		if !strings.HasPrefix(l, tc.want) {
			t.Errorf("runtime %q: %q, want it to begin %q", tc.runtime, l, tc.want)
		}
	}
}

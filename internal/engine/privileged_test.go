package engine

import (
	"strings"
	"testing"
)

// privileged reaches the container's HostConfig (docker run --privileged)
// of the service that asks for it, and the host engine refuses it.
func TestPrivilegedService(t *testing.T) {
	for _, priv := range []bool{false, true} {
		s := validSpec()
		s.Services[0].Privileged = priv
		b := Bindings{}
		for _, sv := range s.Services {
			b[sv.Name] = ServiceBinding{Host: ObjectName(s.RunID, sv.Name), PortsIdentity: true, DataDir: sv.DataDir}
		}
		_, hc, _, err := containerConfigs(s, 0, b, "/b", nil)
		if err != nil {
			t.Fatal(err)
		}
		if hc.Privileged != priv {
			t.Errorf("service privileged %v: HostConfig.Privileged %v", priv, hc.Privileged)
		}
		if err := ValidateSpec(RuntimeDocker, s); err != nil {
			t.Errorf("docker refuses privileged %v: %v", priv, err)
		}
	}
	s := validSpec()
	s.Network = NetworkHost
	for i := range s.Services {
		s.Services[i].HostCommand = []string{"true"}
	}
	s.Services[0].Privileged = true
	err := ValidateSpec(RuntimeHost, s)
	if err == nil || !strings.Contains(err.Error(), "privileged needs runtime docker") {
		t.Errorf("host engine: %v, want a refusal of privileged", err)
	}
}

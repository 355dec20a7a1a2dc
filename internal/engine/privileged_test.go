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

// TestHostFilesBound: a service's host files (a VM guest's ctrperf) are
// bound read-only at their own paths into its container, and only into
// its own.
func TestHostFilesBound(t *testing.T) {
	s := validSpec()
	s.Services[0].HostFiles = []string{"/usr/local/bin/ctrperf"}
	s.Services = append(s.Services, Service{Name: "db", Image: "img", Command: []string{"y"}})
	b := Bindings{}
	for _, sv := range s.Services {
		b[sv.Name] = ServiceBinding{Host: ObjectName(s.RunID, sv.Name), PortsIdentity: true, DataDir: sv.DataDir}
	}
	for i, want := range []int{1, 0} {
		_, hc, _, err := containerConfigs(s, i, b, "/b", nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range hc.Mounts {
			if m.Source == "/usr/local/bin/ctrperf" {
				n++
				if m.Target != m.Source || !m.ReadOnly || m.Type != "bind" {
					t.Errorf("service %d: mount %+v, want a read-only bind at the same path", i, m)
				}
			}
		}
		if n != want {
			t.Errorf("service %d: %d binds of the host file, want %d", i, n, want)
		}
	}
}

package engine

import "testing"

// A data root (the run's data filesystem) replaces the bind root as the
// source of the bind-mounted data directory; without one the engine's
// bind root stays.
func TestBindSourceUnderDataRoot(t *testing.T) {
	for _, tc := range []struct{ dataRoot, want string }{
		{"", "/b/r1/app"},
		{"/var/lib/ctrperf/mnt/ctrperf-fs-r1", "/var/lib/ctrperf/mnt/ctrperf-fs-r1/r1/app"},
	} {
		s := validSpec()
		s.Data, s.DataRoot = DataBind, tc.dataRoot
		s.Services[0].DataDir = "/data"
		b := Bindings{}
		for _, sv := range s.Services {
			b[sv.Name] = ServiceBinding{Host: ObjectName(s.RunID, sv.Name), PortsIdentity: true, DataDir: sv.DataDir}
		}
		_, hc, _, err := containerConfigs(s, 0, b, "/b", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hc.Mounts) != 1 || hc.Mounts[0].Source != tc.want {
			t.Errorf("data root %q: mounts %+v, want source %s", tc.dataRoot, hc.Mounts, tc.want)
		}
	}
}

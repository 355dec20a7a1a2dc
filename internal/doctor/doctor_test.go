package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine/kube"
	"ctrperf/internal/kernel"
)

// fakeDocker answers Probe with a fixed engine or an error.
type fakeDocker struct {
	d   Docker
	err error
}

func (f fakeDocker) Probe(context.Context) (Docker, error) { return f.d, f.err }

// lookIn finds only the named tools, at /usr/bin.
func lookIn(names ...string) func(string) (string, error) {
	return func(n string) (string, error) {
		for _, x := range names {
			if x == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", exec.ErrNotFound
	}
}

func boolp(b bool) *bool { return &b }

func gatherFixture(t *testing.T, root string, docker DockerProber, tools ...string) *Facts {
	t.Helper()
	f, err := Gather(context.Background(), WithKernel(kernel.NewFS(kernel.Roots{Proc: root + "/proc", Sys: root + "/sys", Cgroup: root + "/sys/fs/cgroup"})), WithDevRoot(root+"/dev"),
		WithLookPath(lookIn(tools...)), WithDocker(docker),
		WithKube(func(context.Context) ([]kube.Report, []error) { return nil, nil }), // no cluster of this machine's in a fixture
		WithClock(func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func hasWarning(f *Facts, sub string) bool {
	for _, w := range f.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestGatherHere(t *testing.T) {
	engine := Docker{Answers: true, Host: "unix:///var/run/docker.sock", Version: "20.10.24", StorageDriver: "overlay2",
		BackingFS: "extfs", CgroupDriver: "cgroupfs", UserlandProxy: boolp(true), IPTables: boolp(true)}
	allTools := []string{"iptables-save", "losetup"}
	for _, t := range wantedTools() {
		allTools = append(allTools, t.Name)
	}
	f := gatherFixture(t, "testdata/here", fakeDocker{d: engine}, allTools...)
	if len(f.Errors) > 0 {
		t.Fatalf("collector errors on a complete fixture: %v", f.Errors)
	}
	checks := []struct {
		desc      string
		got, want any
	}{
		{"kernel", f.Kernel, "6.18.44-fc-v595"},
		{"cgroup version", f.Cgroups.Version, "hybrid"},
		{"v1 controllers on a hierarchy", f.Cgroups.Controllers, []string{"blkio", "cpu", "cpuacct", "cpuset", "memory"}},
		{"v2 mount", f.Cgroups.V2Mount, "/sys/fs/cgroup/unified"},
		{"cpus", f.CPU.Count, 2},
		{"numa", f.CPU.NUMANodes, 1},
		{"threads per core", f.CPU.ThreadsPerCore, 1},
		{"no governor", f.CPU.Governor, ""},
		{"irqbalance", f.Irqbalance, false},
		{"docker passes through", f.Docker.StorageDriver, "overlay2"},
		{"loop devices", f.LoopDevices.Usable, true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.desc, c.got, c.want)
		}
	}
	drivers := map[string][]string{}
	for _, d := range f.StorageDrivers {
		drivers[d.Driver] = d.DataRoots
	}
	if !reflect.DeepEqual(drivers["btrfs"], []string{"loop-btrfs"}) || len(drivers["overlay2"]) != 4 || drivers["devicemapper"] != nil {
		t.Errorf("storage drivers = %v", drivers)
	}
	for _, w := range []string{"irqbalance not running: fine for ctrperf isolate", "devicemapper unavailable: kernel has no device-mapper (no dm_mod); use overlay2 or btrfs"} {
		if !hasWarning(f, w) {
			t.Errorf("missing warning %q in %v", w, f.Warnings)
		}
	}
	if len(f.Warnings) != 2 {
		t.Errorf("want exactly the irqbalance and devicemapper warnings, got %v", f.Warnings)
	}
	// The same document round-trips through JSON (it becomes env.json).
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Facts
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, f) {
		t.Errorf("JSON round trip changed the facts: %v", err)
	}
	var txt bytes.Buffer
	if err := f.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hybrid", "btrfs           usable on data_root: loop-btrfs", "userland proxy  on", "warning: devicemapper unavailable"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("text output lacks %q:\n%s", s, txt.String())
		}
	}
}

func TestGatherBusy(t *testing.T) {
	f := gatherFixture(t, "testdata/busy", fakeDocker{d: Docker{Host: "unix:///var/run/docker.sock", Error: "connection refused"}}, "dockerd")
	checks := []struct {
		desc      string
		got, want any
	}{
		{"cgroup v2 only", f.Cgroups.Version, "v2"},
		{"v2 controllers", f.Cgroups.Controllers, []string{"cpuset", "cpu", "io", "memory", "pids"}},
		{"cpus", f.CPU.Count, 8},
		{"numa", f.CPU.NUMANodes, 2},
		{"smt", f.CPU.ThreadsPerCore, 2},
		{"governor", f.CPU.Governor, "powersave"},
		{"irqbalance", f.Irqbalance, true},
		{"no loop devices", f.LoopDevices.Usable, false},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.desc, c.got, c.want)
		}
	}
	for _, w := range []string{
		"irqbalance is running", "no Docker engine answers at unix:///var/run/docker.sock: ctrperf will start a private one",
		"governor is powersave", "SMT is on (2 threads per core)", "2 NUMA nodes", "cgroup v2 only",
		"tools not found: iptables (iptables), debootstrap (debootstrap), fio (fio),", "loop data roots unavailable",
		"btrfs unavailable: kernel has no btrfs",
	} {
		if !hasWarning(f, w) {
			t.Errorf("missing warning %q in:\n%s", w, strings.Join(f.Warnings, "\n"))
		}
	}
	if hasWarning(f, "devicemapper") {
		t.Errorf("this fixture has device-mapper; no devicemapper warning expected: %v", f.Warnings)
	}
}

func TestGatherPartialFailure(t *testing.T) {
	tests := []struct {
		desc      string
		root      string
		docker    fakeDocker
		wantError string
		stillHas  func(*Facts) bool
	}{
		{"docker probe fails, the rest reports", "testdata/here", fakeDocker{err: errors.New("info: permission denied")}, "docker: info: permission denied",
			func(f *Facts) bool { return f.Kernel != "" && f.CPU.Count == 2 }},
		{"no proc or sys at all", "testdata/absent", fakeDocker{}, "kernel:",
			func(f *Facts) bool { return len(f.Tools) > 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := gatherFixture(t, tt.root, tt.docker, "dockerd")
			found := false
			for _, e := range f.Errors {
				found = found || strings.Contains(e, tt.wantError)
			}
			if !found {
				t.Errorf("errors %v lack %q", f.Errors, tt.wantError)
			}
			if !tt.stillHas(f) {
				t.Errorf("other collectors did not report: %+v", f)
			}
		})
	}
}

func TestGatherDocker(t *testing.T) {
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("needs docker")
	}
	f, err := Gather(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("docker: %+v", f.Docker)
}

// TestToolWarnings: missing packages are one warning, however many; the
// plans' lines say which needs what.
func TestToolWarnings(t *testing.T) {
	fio := Tool{Name: "fio", Package: "fio", For: "fileio workload on bare metal"}
	wrk := Tool{Name: "wrk", Package: "wrk", For: "comparison"}
	found := Tool{Name: "dockerd", Package: "docker.io", Path: "/usr/sbin/dockerd"}
	tests := []struct {
		desc  string
		tools []Tool
		want  []string
	}{
		{"all found", []Tool{found}, nil},
		{"one missing", []Tool{found, fio}, []string{"fio not found: install Debian package fio (needed for fileio workload on bare metal)"}},
		{"several missing: one warning", []Tool{fio, found, wrk},
			[]string{"2 tools not found: fio (fio), wrk (wrk); each plan below says which it needs, make bootstrap installs them all"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := &Facts{Tools: tc.tools, CPU: CPU{Count: 2, NUMANodes: 1, ThreadsPerCore: 1}, Cgroups: Cgroups{Version: "hybrid"},
				LoopDevices: Capability{Usable: true}}
			var got []string
			for _, w := range Warnings(f) {
				if strings.Contains(w, "not found") {
					got = append(got, w)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

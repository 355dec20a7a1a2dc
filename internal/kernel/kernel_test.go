package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		desc, file string
		want       map[string]string
	}{
		{"v1 cgroupfs driver: one line per controller, a named hierarchy, an empty unified line", "v1-docker",
			map[string]string{"pids": "/docker/abc", "name=systemd": "/docker/abc", "memory": "/docker/abc",
				"cpuset": "/docker/abc", "cpuacct": "/docker/abc", "cpu": "/docker/abc", "": "/"}},
		{"v1 co-mounted cpu,cpuacct gives both controllers the path", "v1-systemd-comounted",
			map[string]string{"cpu": "/system.slice/docker-abc.scope", "cpuacct": "/system.slice/docker-abc.scope",
				"cpuset": "/system.slice/docker-abc.scope", "": "/"}},
		{"hybrid: v1 controllers and the unified path of the same group", "hybrid",
			map[string]string{"misc": "/", "rdma": "/", "cpu": "/docker/abc", "cpuacct": "/docker/abc", "cpuset": "/docker/abc",
				"memory": "/docker/abc", "blkio": "/docker/abc", "name=systemd": "/docker/abc", "": "/docker/abc"}},
		{"pure v2: the unified path only", "v2", map[string]string{"": "/system.slice/docker-abc.scope"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseProcCgroup(open(t, filepath.Join("testdata", "proc-cgroup", tc.file)))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseProcCgroup = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestProcCgroupPath(t *testing.T) {
	tests := []struct {
		desc, file, want, wantErr string
	}{
		{"v1 cgroupfs driver: the cpu controller's path", "v1-docker", "/docker/abc", ""},
		{"v1 systemd driver, cpu co-mounted with cpuacct", "v1-systemd-comounted", "/system.slice/docker-abc.scope", ""},
		{"hybrid: the v1 cpu path, not the unified one", "hybrid", "/docker/abc", ""},
		{"pure v2: the unified path", "v2", "/system.slice/docker-abc.scope", ""},
		{"no cpu, cpuset or unified line", "no-cpu", "", "no cpu, cpuset or unified cgroup line"},
		{"no such process", "", "", "cgroup of pid 42"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			proc := t.TempDir()
			if tc.file != "" {
				b, err := os.ReadFile(filepath.Join("testdata", "proc-cgroup", tc.file))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(proc, "42"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(proc, "42", "cgroup"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ProcCgroupPath(proc, 42)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ProcCgroupPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestDetectCgroups(t *testing.T) {
	root := func(name string) string { return filepath.Join("testdata", "cgroupfs", name) }
	tests := []struct {
		desc, root  string
		mode        Mode
		unified     string
		controllers map[string]bool
		cpuV1       bool
	}{
		{"v1: one hierarchy per controller, no unified mount", root("v1"), V1, "", map[string]bool{}, true},
		{"hybrid: v1 controllers and an empty cgroup2 mount at unified", root("hybrid"), Hybrid, root("hybrid") + "/unified", map[string]bool{}, true},
		{"v2: cgroup.controllers at the root", root("v2"), V2, root("v2"),
			map[string]bool{"cpuset": true, "cpu": true, "io": true, "memory": true, "pids": true}, false},
		{"nothing mounted counts as v1 without hierarchies", root("none"), V1, "", map[string]bool{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l := DetectCgroups(tc.root)
			if l.Mode != tc.mode || l.Unified != tc.unified || !reflect.DeepEqual(l.V2Controllers, tc.controllers) {
				t.Errorf("DetectCgroups = %+v; want mode %s, unified %q, controllers %v", l, tc.mode, tc.unified, tc.controllers)
			}
			if got := l.HasV1("cpu"); got != tc.cpuV1 {
				t.Errorf("HasV1(cpu) = %v, want %v", got, tc.cpuV1)
			}
		})
	}
}

func TestLayoutDir(t *testing.T) {
	root := func(name string) string { return filepath.Join("testdata", "cgroupfs", name) }
	v1Paths := map[string]string{"cpu": "/docker/abc", "cpuacct": "/docker/abc", "": "/docker/abc"}
	tests := []struct {
		desc, root, ctl string
		paths           map[string]string
		want            string
		ok              bool
	}{
		{"v1 controller below its hierarchy", root("v1"), "cpu", v1Paths, root("v1") + "/cpu/docker/abc", true},
		{"v1 has no pressure without a unified mount", root("v1"), "pressure", v1Paths, "", false},
		{"hybrid pressure lives in the unified mount", root("hybrid"), "pressure", v1Paths, root("hybrid") + "/unified/docker/abc", true},
		{"hybrid cpu stays v1", root("hybrid"), "cpu", v1Paths, root("hybrid") + "/cpu/docker/abc", true},
		{"v2 every controller in the unified directory", root("v2"), "cpuset", map[string]string{"": "/system.slice/docker-abc.scope"},
			root("v2") + "/system.slice/docker-abc.scope", true},
		{"a process without the controller", root("v1"), "cpuset", map[string]string{"cpu": "/x"}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := DetectCgroups(tc.root).Dir(tc.paths, tc.ctl)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Dir = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestLayoutPath(t *testing.T) {
	root := func(name string) string { return filepath.Join("testdata", "cgroupfs", name) }
	tests := []struct {
		desc, root, ctl, rel, want string
	}{
		{"v1: below the controller's hierarchy", root("v1"), "cpuacct", "/docker/abc", root("v1") + "/cpuacct/docker/abc"},
		{"hybrid: v1 hierarchies still hold the accounting", root("hybrid"), "cpu", "/docker/abc", root("hybrid") + "/cpu/docker/abc"},
		{"v2: below the unified root whatever the controller", root("v2"), "cpuacct", "/system.slice/docker-abc.scope", root("v2") + "/system.slice/docker-abc.scope"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := DetectCgroups(tc.root).Path(tc.ctl, tc.rel); got != tc.want {
				t.Errorf("Path = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCPUUsage(t *testing.T) {
	dir := func(p ...string) string { return filepath.Join(append([]string{"testdata", "cgroupfs"}, p...)...) }
	tests := []struct {
		desc, dir string
		want      time.Duration
		wantErr   string
		notExist  bool
	}{
		{"v1 cpuacct.usage in nanoseconds", dir("v1", "cpuacct", "docker", "abc"), 123456789 * time.Nanosecond, "", false},
		{"v2 cpu.stat usage_usec", dir("v2", "system.slice", "docker-abc.scope"), 2500 * time.Millisecond, "", false},
		{"v2 cpu.stat without usage_usec", dir("v2-no-usage"), 0, "has no usage_usec", false},
		{"v2 usage_usec not a number", dir("v2-bad-usage"), 0, `usage_usec "lots"`, false},
		{"v1 cpuacct.usage not a number", dir("v1-bad-usage"), 0, `"many" is not a whole number`, false},
		{"a cgroup that is gone stays os.ErrNotExist", dir("gone"), 0, "neither cpuacct.usage nor cpu.stat", true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := CPUUsage(tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.notExist && !errors.Is(err, os.ErrNotExist) {
					t.Errorf("err = %v, want it to match os.ErrNotExist", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("CPUUsage = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParsePressure(t *testing.T) {
	tests := []struct {
		desc, file string
		want       PSI
		wantErr    string
	}{
		{"cgroup file with some and full", "cgroup", PSI{
			Some:    Pressure{Avg10: 12.5, Avg60: 20.68, Avg300: 14.68, Total: 68149532 * time.Microsecond},
			HasFull: true}, ""},
		{"some only (older system-wide cpu)", "some-only", PSI{
			Some: Pressure{Avg10: 0.31, Avg60: 0.12, Avg300: 0.05, Total: 123456 * time.Microsecond}}, ""},
		{"no some line", "no-some", PSI{}, `no "some" line`},
		{"an average that is no number", "bad-avg", PSI{}, `pressure avg10 "x"`},
		{"a field without =", "no-equals", PSI{}, `pressure field "total": want key=value`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParsePressure(open(t, filepath.Join("testdata", "pressure", tc.file)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParsePressure = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCPUPressure(t *testing.T) {
	tests := []struct {
		desc, dir string
		total     time.Duration
		wantErr   string
	}{
		{"v2 cgroup", filepath.Join("testdata", "cgroupfs", "v2", "system.slice", "docker-abc.scope"), 68149532 * time.Microsecond, ""},
		{"hybrid unified directory", filepath.Join("testdata", "cgroupfs", "hybrid", "unified", "docker", "abc"), 68149532 * time.Microsecond, ""},
		{"no cpu.pressure names the directory", filepath.Join("testdata", "cgroupfs", "v1"), 0, "read cpu.pressure in testdata/cgroupfs/v1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := CPUPressure(tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || p.Some.Total != tc.total {
				t.Errorf("CPUPressure = %+v, %v; want some total %v", p, err, tc.total)
			}
		})
	}
}

func TestParseInterrupts(t *testing.T) {
	type line struct {
		irq, name string
		counts    []uint64
		num       bool
	}
	tests := []struct {
		desc, file string
		n          int    // lines
		check      []line // some of them
		wantErr    string
	}{
		{"virtio VM, 2 CPUs: numbered and named lines", "virtio-2cpu", 0, []line{
			{"24", "ACPI:Ged", []uint64{1, 0}, true},
			{"38", "virtio2-input.0", []uint64{0, 9495}, true},
			{"LOC", "interrupts", []uint64{184985, 173054}, false},
		}, ""},
		{"server, 4 CPUs", "pci-4cpu", 0, []line{
			{"0", "timer", []uint64{22, 0, 0, 0}, true},
			{"16", "enp5s0", []uint64{310, 0, 0, 0}, true},
		}, ""},
		{"a numbered line without chip or device", "short-numbered", 1, []line{{"5", "", []uint64{1, 2}, true}}, ""},
		{"a count that is no number", "bad-count", 0, nil, "IRQ 5: 1 counts for 2 CPUs"},
		{"an empty file", "empty", 0, nil, "empty file"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseInterrupts(open(t, filepath.Join("testdata", "interrupts", tc.file)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.n > 0 && len(got) != tc.n {
				t.Errorf("%d lines, want %d", len(got), tc.n)
			}
			by := map[string]Interrupt{}
			for _, irq := range got {
				by[irq.IRQ] = irq
			}
			for _, w := range tc.check {
				irq, ok := by[w.irq]
				if !ok {
					t.Errorf("no IRQ %s in %v", w.irq, got)
					continue
				}
				_, num := irq.Number()
				if irq.Name() != w.name || !reflect.DeepEqual(irq.Counts, w.counts) || num != w.num {
					t.Errorf("IRQ %s = name %q counts %v numbered %v; want %q %v %v", w.irq, irq.Name(), irq.Counts, num, w.name, w.counts, w.num)
				}
			}
		})
	}
}

func TestParseInterruptsFields(t *testing.T) {
	in := "           CPU0       CPU1\n" +
		" 38:          0       9495 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n" +
		"LOC:     184985     173054   Local timer interrupts\n" +
		"ERR:          0\n"
	got, err := ParseInterrupts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interrupt{
		{IRQ: "38", Counts: []uint64{0, 9495}, Info: "PCI-MSIX-0000:00:03.0", Devices: "1-edge virtio2-input.0"},
		{IRQ: "LOC", Counts: []uint64{184985, 173054}, Info: "Local timer interrupts"},
		{IRQ: "ERR", Counts: []uint64{0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseInterrupts =\n%+v\nwant\n%+v", got, want)
	}
}

func TestInterruptsNamesTheFile(t *testing.T) {
	_, err := Interrupts(filepath.Join("testdata", "no-proc"))
	if err == nil || !strings.Contains(err.Error(), "interrupts in testdata/no-proc") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want it to name the root and match os.ErrNotExist", err)
	}
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		desc    string
		setup   func(dir string) // creates what the kernel would
		file    string
		value   string
		wantErr string
		errno   error
	}{
		{"an existing control file is replaced", func(dir string) { os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte("1024\n"), 0o644) },
			"cpu.shares", "2", "", nil},
		{"a missing file is not created and the error names value, file and dir", func(string) {},
			"cpu.idle", "1", `failed to write "1" to cpu.idle in `, syscall.ENOENT},
		{"a directory in the way", func(dir string) { os.Mkdir(filepath.Join(dir, "cgroup.procs"), 0o755) },
			"cgroup.procs", "42", `failed to write "42" to cgroup.procs in `, syscall.EISDIR},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			err := WriteFile(dir, tc.file, tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr+dir) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr+dir)
				}
				if !errors.Is(err, tc.errno) {
					t.Errorf("err = %v, want it to wrap %v", err, tc.errno)
				}
				if strings.Count(err.Error(), dir) != 1 {
					t.Errorf("err = %v names the directory more than once", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, tc.file)); string(b) != tc.value {
				t.Errorf("%s = %q, want %q", tc.file, b, tc.value)
			}
		})
	}
}

func TestRoots(t *testing.T) {
	got := Roots{Proc: "p"}.WithDefaults()
	if want := (Roots{Proc: "p", Sys: SysMount, Cgroup: CgroupMount}); got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	paths := []struct{ desc, got, want string }{
		{"class/net below sys", ClassNetDir("s"), "s/class/net"},
		{"own mountinfo below proc", SelfMountinfo("p"), "p/self/mountinfo"},
		{"own threads below proc", SelfTaskDir("p"), "p/self/task"},
	}
	for _, p := range paths {
		if p.got != p.want {
			t.Errorf("%s: %q, want %q", p.desc, p.got, p.want)
		}
	}
}

func TestProcAlive(t *testing.T) {
	tests := []struct {
		desc, stat string
		pid        int
		want       bool
	}{
		{"running", "42 (sleep) S 1 42 42 0", 42, true},
		{"a command name with spaces and a parenthesis", "42 (a) b) R 1", 42, true},
		{"zombie", "42 (sh) Z 1 42", 42, false},
		{"dead", "42 (sh) X 1 42", 42, false},
		{"unreadable stat counts as alive", "garbage", 42, true},
		{"no such process", "", 42, false},
		{"pid 0 is never a process", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			proc := t.TempDir()
			if tc.stat != "" {
				os.MkdirAll(filepath.Join(proc, "42"), 0o755)
				if err := os.WriteFile(filepath.Join(proc, "42", "stat"), []byte(tc.stat), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := ProcAlive(proc, tc.pid); got != tc.want {
				t.Errorf("ProcAlive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	mounts, err := ParseMountinfo(open(t, filepath.Join("testdata", "mountinfo", "engines")))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, point, fstype string
		mountPoint          bool
	}{
		{"the root", "/", "ext4", true},
		{"an escaped space is unescaped", "/srv/with space", "tmpfs", true},
		{"a directory inside a mount is no mount point", "/var/lib/ctrperf/engines/x", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := IsMountPoint(mounts, tc.point); got != tc.mountPoint {
				t.Errorf("IsMountPoint(%q) = %v, want %v", tc.point, got, tc.mountPoint)
			}
			for _, m := range mounts {
				if m.Point == tc.point && m.FSType != tc.fstype {
					t.Errorf("%s: fstype %q, want %q", tc.point, m.FSType, tc.fstype)
				}
			}
		})
	}
	for _, m := range mounts {
		if m.Point == "/" && (!reflect.DeepEqual(m.Options, []string{"rw", "relatime"}) || !reflect.DeepEqual(m.SuperOptions, []string{"rw"})) {
			t.Errorf("/: options %q super options %q", m.Options, m.SuperOptions)
		}
	}
	if _, err := ParseMountinfo(open(t, filepath.Join("testdata", "mountinfo", "malformed"))); err == nil || !strings.Contains(err.Error(), "line 1: malformed") {
		t.Errorf("malformed line: err = %v", err)
	}
}

func TestMountsUnder(t *testing.T) {
	mounts := []Mount{{Point: "/"}, {Point: "/run/x"}, {Point: "/run/x/a/b"}, {Point: "/run/xy"}, {Point: "/run/x/a"}}
	tests := []struct {
		desc string
		dirs []string
		want []string
	}{
		{"at or below, deepest first, not a sibling with the same prefix", []string{"/run/x"}, []string{"/run/x/a/b", "/run/x/a", "/run/x"}},
		{"several directories, each mount once", []string{"/run/x/a", "/run/x/a/b", ""}, []string{"/run/x/a/b", "/run/x/a"}},
		{"nothing below", []string{"/srv"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := MountsUnder(mounts, tc.dirs...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MountsUnder = %v, want %v", got, tc.want)
			}
		})
	}
}

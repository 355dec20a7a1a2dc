package kernel

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFSPaths(t *testing.T) {
	f := NewFS(Roots{Proc: "p", Sys: "s", Cgroup: "c"})
	real := FS{}
	tests := []struct{ desc, got, want string }{
		{"a proc file below the proc root", f.Proc("42", "stat"), "p/42/stat"},
		{"the proc root itself", f.Proc(), "p"},
		{"a sys file below the sys root", f.Sys("class", "net"), "s/class/net"},
		{"a cgroup below the cgroup root", f.Cgroup("cpu", "ctrperf"), "c/cpu/ctrperf"},
		{"the zero FS reads the real /proc", real.Proc("self"), "/proc/self"},
		{"the zero FS reads the real /sys", real.Sys(), SysMount},
		{"the zero FS reads the real cgroup mount", real.Cgroup(), CgroupMount},
		{"an empty root is the real one", NewFS(Roots{Proc: "p"}).Cgroup(), CgroupMount},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, tc.got, tc.want)
		}
	}
	if got, want := NewFS(Roots{Sys: "s"}).Roots(), (Roots{Proc: ProcMount, Sys: "s", Cgroup: CgroupMount}); got != want {
		t.Errorf("Roots = %+v, want %+v", got, want)
	}
}

// TestFSCgroupsDetectedOnce: an FS keeps the layout it saw first, and so
// do its copies; the zero FS has nowhere to keep it and looks again.
func TestFSCgroupsDetectedOnce(t *testing.T) {
	root := t.TempDir()
	f := NewFS(Roots{Cgroup: root})
	if got := f.Cgroups().Mode; got != V1 {
		t.Fatalf("empty root: mode %s, want v1", got)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copied := f
	tests := []struct {
		desc string
		fs   FS
		want Mode
	}{
		{"the FS keeps its first detection", f, V1},
		{"a copy shares it", copied, V1},
		{"a new FS over the same root detects v2", NewFS(Roots{Cgroup: root}), V2},
		{"an FS without a cache detects every time", FS{roots: Roots{Cgroup: root}}, V2},
	}
	for _, tc := range tests {
		if got := tc.fs.Cgroups().Mode; got != tc.want {
			t.Errorf("%s: mode %s, want %s", tc.desc, got, tc.want)
		}
	}
}

func TestFSProcesses(t *testing.T) {
	proc := t.TempDir()
	files := map[string]string{
		"1/cmdline":   "/sbin/init\x00splash\x00",
		"1/comm":      "systemd\n",
		"42/cmdline":  "dockerd\x00-H\x00unix:///run/x.sock\x00",
		"42/comm":     "dockerd\n",
		"7/cmdline":   "", // a kernel thread
		"self/comm":   "ctrperf\n",
		"sys/kernel":  "",
		"interrupts":  "",
		"10x/cmdline": "not a process",
	}
	for name, body := range files {
		p := filepath.Join(proc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFS(Roots{Proc: proc})
	pids, err := f.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 42, 7}; !reflect.DeepEqual(pids, want) {
		t.Errorf("PIDs = %v, want %v (numeric entries only, in the directory's order)", pids, want)
	}
	argv := []struct {
		desc string
		pid  int
		want []string
	}{
		{"arguments split at the NULs, the last one trimmed", 42, []string{"dockerd", "-H", "unix:///run/x.sock"}},
		{"a kernel thread has one empty argument", 7, []string{""}},
	}
	for _, tc := range argv {
		if got, err := f.Cmdline(tc.pid); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Cmdline(%d) = %q, %v; want %q", tc.desc, tc.pid, got, err, tc.want)
		}
	}
	if _, err := f.Cmdline(99); !os.IsNotExist(err) {
		t.Errorf("Cmdline of a gone process: %v, want not-exist", err)
	}
	if got, err := f.Comm(42); err != nil || got != "dockerd" {
		t.Errorf("Comm(42) = %q, %v; want dockerd", got, err)
	}
	if _, err := NewFS(Roots{Proc: filepath.Join(proc, "missing")}).PIDs(); err == nil {
		t.Error("PIDs of a missing proc root: no error")
	}
}

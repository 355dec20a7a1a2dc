package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/kernel"
)

// fakeCgroupFS stands in for the kernel on a fixture tree: a new group gets
// its control files, and removing a group removes them too.
type fakeCgroupFS struct {
	files []string // control files of a new group
	err   error    // returned by Mkdir
}

func (f fakeCgroupFS) Mkdir(dir string) error {
	if f.err != nil {
		return f.err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, n := range f.files {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (fakeCgroupFS) Rmdir(dir string) error { return os.RemoveAll(dir) }

var (
	v1Group = []string{"cgroup.procs", "tasks", "cpu.shares"}
	v2Group = []string{"cgroup.procs", "cgroup.controllers", "cgroup.subtree_control", "cpu.weight"}
)

// hybridTree is this machine's layout: v1 controllers, and a unified mount
// without controllers.
var hybridTree = map[string]string{
	"cpu/cpu.shares": "1024", "cpu/cgroup.procs": "", "cpuacct/cgroup.procs": "",
	"unified/cgroup.controllers": "", "unified/cgroup.procs": "",
}

const fakePid = 4242

func TestProtectGenerator(t *testing.T) {
	tests := []struct {
		desc      string
		tree      map[string]string // files under the cgroup root
		procFile  string            // testdata/cgroup fixture for /proc/<pid>/cgroup; "" for none
		fs        fakeCgroupFS
		want      string            // Protection.String() relative to the root
		wantFiles map[string]string // while protected, relative to the root
		back      string            // cgroup.procs the process is moved back into
		wantErr   string
	}{
		{
			desc: "hybrid: cpu.shares in the v1 cpu hierarchy", tree: hybridTree, procFile: "proc-hybrid",
			fs:        fakeCgroupFS{files: v1Group},
			want:      "cpu/ctrperf/generator-4242 cpu.shares=10240",
			wantFiles: map[string]string{"cpu/ctrperf/generator-4242/cpu.shares": "10240", "cpu/ctrperf/generator-4242/cgroup.procs": "4242"},
			back:      "cpu/cgroup.procs",
		},
		{
			desc: "v1 with cpu and cpuacct co-mounted, back into a nested group",
			tree: map[string]string{"cpu/cpu.shares": "1024", "cpu/user.slice/cgroup.procs": "1\n"}, procFile: "proc-v1-nested",
			fs:        fakeCgroupFS{files: v1Group},
			want:      "cpu/ctrperf/generator-4242 cpu.shares=10240",
			wantFiles: map[string]string{"cpu/ctrperf/generator-4242/cgroup.procs": "4242"},
			back:      "cpu/user.slice/cgroup.procs",
		},
		{
			desc: "v2: cpu.weight, the controller delegated at each level",
			tree: map[string]string{
				"cgroup.controllers": "cpuset cpu io memory pids", "cgroup.subtree_control": "",
				"system.slice/ctrperf.service/cgroup.procs": "",
			},
			procFile: "proc-v2",
			fs:       fakeCgroupFS{files: v2Group},
			want:     "ctrperf/generator-4242 cpu.weight=1000",
			wantFiles: map[string]string{
				"cgroup.subtree_control": "+cpu", "ctrperf/cgroup.subtree_control": "+cpu",
				"ctrperf/generator-4242/cpu.weight": "1000", "ctrperf/generator-4242/cgroup.procs": "4242",
			},
			back: "system.slice/ctrperf.service/cgroup.procs",
		},
		{
			desc: "v2 without the cpu controller",
			tree: map[string]string{"cgroup.controllers": "memory pids"}, procFile: "proc-v2",
			wantErr: `does not offer the cpu controller (cgroup.controllers: "memory pids")`,
		},
		{
			desc: "no cgroup mount", tree: map[string]string{"README": ""}, procFile: "proc-hybrid",
			wantErr: "no cpu controller under",
		},
		{
			desc: "no cgroup file for the process", tree: hybridTree,
			wantErr: "find the generator's cgroup: cgroup of pid 4242",
		},
		{
			desc: "the process's group is not in the cpu hierarchy",
			tree: map[string]string{"cpu/cpu.shares": "1024"}, procFile: "proc-v1-nested",
			wantErr: "user.slice (from ",
		},
		{
			desc: "group not created", tree: hybridTree, procFile: "proc-hybrid",
			fs:      fakeCgroupFS{err: os.ErrPermission},
			wantErr: "create cgroup ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			root, proc := t.TempDir(), t.TempDir()
			for name, content := range tc.tree {
				writeFixture(t, filepath.Join(root, name), content)
			}
			if tc.procFile != "" {
				b, err := os.ReadFile(filepath.Join("testdata", "cgroup", tc.procFile))
				if err != nil {
					t.Fatal(err)
				}
				writeFixture(t, filepath.Join(proc, "4242", "cgroup"), string(b))
			}
			p := protector{kernel: kernel.NewFS(kernel.Roots{Proc: proc, Cgroup: root}), pid: fakePid, dirs: tc.fs}
			got, restore, err := p.protect()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, statErr := os.Stat(filepath.Join(root, "cpu", "ctrperf", "generator-4242")); statErr == nil {
					t.Error("a failed protection left its group behind")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.want); got.String() != want {
				t.Errorf("protection %q, want %q", got, want)
			}
			for name, want := range tc.wantFiles {
				if b := readFixture(t, filepath.Join(root, name)); b != want {
					t.Errorf("%s = %q, want %q", name, b, want)
				}
			}
			if err := restore(); err != nil {
				t.Fatal(err)
			}
			if b := readFixture(t, filepath.Join(root, tc.back)); b != "4242" {
				t.Errorf("%s = %q after restore, want the pid", tc.back, b)
			}
			if _, err := os.Stat(got.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("group %s still there after restore: %v", got.Dir, err)
			}
		})
	}
}

// A refused weight removes the new group again and leaves the process where
// it was; the error names the file, the directory and the value.
func TestProtectGeneratorWriteErrorNamesPathAndValue(t *testing.T) {
	root, proc := t.TempDir(), t.TempDir()
	for name, content := range hybridTree {
		writeFixture(t, filepath.Join(root, name), content)
	}
	writeFixture(t, filepath.Join(proc, "4242", "cgroup"), "1:cpu:/\n")
	_, _, err := protector{kernel: kernel.NewFS(kernel.Roots{Proc: proc, Cgroup: root}), pid: fakePid, dirs: fakeCgroupFS{files: []string{"cgroup.procs"}}}.protect()
	want := `failed to write "10240" to cpu.shares in ` + filepath.Join(root, "cpu", "ctrperf", "generator-4242") + ": "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v; want it to start with %q and wrap ENOENT", err, want)
	}
	if b := readFixture(t, filepath.Join(root, "cpu", "cgroup.procs")); b != "" {
		t.Errorf("the process was moved (%q) although its group failed", b)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu", "ctrperf", "generator-4242")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed group is still there: %v", err)
	}
}

func writeFixture(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
)

func TestMountArgs(t *testing.T) {
	// Every data filesystem is nosuid,nodev (issue 24): a plan's options
	// add to that and never clear it.
	const safe = unix.MS_NOSUID | unix.MS_NODEV
	tests := []struct {
		desc  string
		opts  []string
		flags uintptr
		data  string
	}{
		{"no options: nosuid,nodev all the same", nil, safe, ""},
		{"a VFS flag", []string{"noatime"}, safe | unix.MS_NOATIME, ""},
		// Seed 004's ext4 line: mount -o data=writeback,noatime,discard,barrier=0
		{"seed 004's ext4 line", []string{"data=writeback", "noatime", "discard", "barrier=0"}, safe | unix.MS_NOATIME, "data=writeback,discard,barrier=0"},
		{"flags and an xfs option", []string{"relatime", "lazytime", "logbufs=8"}, safe | unix.MS_RELATIME | unix.MS_LAZYTIME, "logbufs=8"},
		{"every sync and atime flag", []string{"sync", "dirsync", "nodiratime", "strictatime"}, safe | unix.MS_SYNCHRONOUS | unix.MS_DIRSYNC | unix.MS_NODIRATIME | unix.MS_STRICTATIME, ""},
		{"nosuid, nodev and noexec are flags, not the filesystem's", []string{"nosuid", "nodev", "noexec"}, safe | unix.MS_NOEXEC, ""},
	}
	for _, tc := range tests {
		flags, data := MountArgs(tc.opts)
		if flags != tc.flags || data != tc.data {
			t.Errorf("%s: MountArgs(%q) = %#x %q, want %#x %q", tc.desc, tc.opts, flags, data, tc.flags, tc.data)
		}
	}
}

func TestDataFSName(t *testing.T) {
	if got := DataFSName("storage-fs-0a1b2c3d-004"); got != "ctrperf-fs-storage-fs-0a1b2c3d-004" {
		t.Errorf("name %q", got)
	}
	// Long run ids are shortened as engine names are, and stay distinct.
	a, b := DataFSName(strings.Repeat("x", 40)+"-001"), DataFSName(strings.Repeat("x", 40)+"-002")
	if a == b || len(a) > 40 {
		t.Errorf("long names %q %q", a, b)
	}
}

// A data filesystem whose state says it was never attached or mounted (a
// run killed right after writing its state) is removed by CleanDataFS from
// the state alone; one kept by its owner stays; a run id filter applies.
func TestCleanDataFSFromState(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "self", "mountinfo"), []byte("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithRunDir(filepath.Join(dir, "run")), WithLibDir(filepath.Join(dir, "lib")), WithKernel(kernel.NewFS(kernel.Roots{Proc: proc, Sys: filepath.Join(dir, "sys")}))}
	o := buildOptions(opts)
	for _, id := range []string{"dead-1", "live-1", "other-1"} {
		f := &DataFS{Name: DataFSName(id), RunID: id, FS: "xfs", Image: filepath.Join(o.loopDir(), DataFSName(id)+".img"), Mount: filepath.Join(o.mntDir(), DataFSName(id))}
		if err := writeDataFS(o, f); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Dir(f.Image), f.Mount} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(f.Image, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done, err := CleanDataFS(context.Background(), "other-1", nil, opts...)
	if err != nil || len(done) != 1 || !strings.Contains(done[0], DataFSName("other-1")) {
		t.Fatalf("clean --run other-1 removed %q, %v", done, err)
	}
	keep := func(f DataFS) bool { return f.RunID == "live-1" }
	done, err = CleanDataFS(context.Background(), "", keep, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !strings.Contains(done[0], DataFSName("dead-1")) {
		t.Errorf("removed %q", done)
	}
	left, err := ListDataFS(opts...)
	if err != nil || len(left) != 1 || left[0].RunID != "live-1" {
		t.Fatalf("left %+v, %v", left, err)
	}
	if _, err := os.Stat(left[0].Image); err != nil {
		t.Errorf("the live run's image is gone: %v", err)
	}
	for _, id := range []string{"dead-1", "other-1"} {
		if _, err := os.Stat(filepath.Join(o.loopDir(), DataFSName(id)+".img")); !os.IsNotExist(err) {
			t.Errorf("image of %s still there: %v", id, err)
		}
	}
}

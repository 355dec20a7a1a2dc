package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

func requireDataFSTools(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "loop devices and mounts")
	for _, tool := range []string{"mkfs.ext4", "mkfs.xfs", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFailRoot(t, "needs %s (make bootstrap installs e2fsprogs, xfsprogs)", tool)
		}
	}
}

// assertDataFSGone checks that nothing of f is left: no mount, no loop
// device on its image, no image, no state.
func assertDataFSGone(t *testing.T, f *DataFS) {
	t.Helper()
	o := buildOptions(nil)
	mnts, err := kernel.Mounts(o.Kernel.Proc())
	if err != nil {
		t.Fatal(err)
	}
	if left := kernel.MountsUnder(mnts, f.Mount); len(left) > 0 {
		t.Errorf("%s: mounts left: %v", f.Name, left)
	}
	if devs := loopDevicesOf(o.Kernel, f.Image); len(devs) > 0 {
		t.Errorf("%s: loop devices left: %v", f.Name, devs)
	}
	for _, p := range []string{f.Image, f.Mount, dataFSStatePath(o, f.Name)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %s left (%v)", f.Name, p, err)
		}
	}
}

// TestDataFSMountOptionsRoot mounts ext4 and xfs loop filesystems with
// options, checks what mountinfo shows, writes through them, and removes
// them; an option the kernel refuses is named, and leaves nothing.
func TestDataFSMountOptionsRoot(t *testing.T) {
	requireDataFSTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	runID := testRunID(t)
	tests := []struct {
		fs      string
		options []string
		want    []string // in mountinfo's mount or super options
	}{
		{"ext4", []string{"noatime", "data=writeback", "discard", "barrier=0"}, []string{"noatime", "data=writeback", "discard", "nobarrier"}},
		{"xfs", []string{"noatime", "logbufs=4", "discard"}, []string{"noatime", "logbufs=4", "discard"}},
		{"ext4", nil, []string{"relatime", "rw"}},
	}
	for i, tc := range tests {
		id := runID + "-" + string(rune('a'+i))
		f, err := MountDataFS(ctx, id, tc.fs, tc.options, 512<<20)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.fs, tc.options, err)
		}
		mnts, _ := kernel.Mounts(buildOptions(nil).Kernel.Proc())
		var got []string
		for _, m := range mnts {
			if m.Point == f.Mount {
				if m.FSType != tc.fs {
					t.Errorf("%s mounted as %s", tc.fs, m.FSType)
				}
				got = append(append(got, m.Options...), m.SuperOptions...)
			}
		}
		for _, w := range append([]string{"nosuid", "nodev"}, tc.want...) {
			if !contains(got, w) {
				t.Errorf("%s %q: mountinfo shows %q, lacks %q", tc.fs, tc.options, got, w)
			}
		}
		if fi, err := os.Stat(f.Mount); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mount root %v %v, want mode 0700 (closed to other users)", tc.fs, fi.Mode(), err)
		}
		if strings.Join(f.Applied, ",") != strings.Join(got, ",") {
			t.Errorf("recorded applied options %q, mountinfo %q", f.Applied, got)
		}
		// A tiny workload: fsync'd writes through the mount.
		p := filepath.Join(f.Mount, "w")
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		for j := 0; j < 64; j++ {
			if _, err := w.Write(buf); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		if err := RemoveDataFS(ctx, f); err != nil {
			t.Fatal(err)
		}
		if err := RemoveDataFS(ctx, f); err != nil {
			t.Errorf("second remove: %v", err)
		}
		assertDataFSGone(t, f)
	}

	// An option that would clear nosuid or nodev is refused before
	// anything exists.
	for _, opt := range []string{"suid", "dev"} {
		id := runID + "-" + opt
		if _, err := MountDataFS(ctx, id, "ext4", []string{"noatime", opt}, 512<<20); err == nil || !strings.Contains(err.Error(), "nosuid,nodev") {
			t.Errorf("mount option %s: %v, want refused", opt, err)
		}
		o := buildOptions(nil)
		assertDataFSGone(t, &DataFS{Name: DataFSName(id), Image: filepath.Join(o.loopDir(), DataFSName(id)+".img"), Mount: filepath.Join(o.mntDir(), DataFSName(id))})
	}

	// xfs lost nobarrier in Linux 4.19: the kernel refuses it, the error
	// names it and wraps ErrDataFSUnsupported, and nothing is left.
	id := runID + "-nb"
	_, err := MountDataFS(ctx, id, "xfs", []string{"noatime", "nobarrier"}, 512<<20)
	if !errors.Is(err, ErrDataFSUnsupported) || !strings.Contains(err.Error(), "refuses mount option nobarrier on xfs") {
		t.Errorf("xfs nobarrier: %v", err)
	}
	o := buildOptions(nil)
	assertDataFSGone(t, &DataFS{Name: DataFSName(id), Image: filepath.Join(o.loopDir(), DataFSName(id)+".img"), Mount: filepath.Join(o.mntDir(), DataFSName(id))})

	// A run killed with its filesystem mounted: the engine sweep of that
	// run leaves it alone (its state knows it), CleanDataFS removes it.
	id = runID + "-kill"
	f, err := MountDataFS(ctx, id, "xfs", nil, 512<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CleanEngines(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if mnts, _ := kernel.Mounts(o.Kernel.Proc()); !kernel.IsMountPoint(mnts, f.Mount) {
		t.Fatalf("the engine sweep unmounted a data filesystem it does not own")
	}
	done, err := CleanDataFS(ctx, id, nil)
	if err != nil || len(done) != 1 {
		t.Fatalf("CleanDataFS: %q %v", done, err)
	}
	assertDataFSGone(t, f)
}

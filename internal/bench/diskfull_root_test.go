package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// mountTmpfs mounts a tmpfs with the given options on a fresh directory,
// unmounted when the test ends.
func mountTmpfs(t *testing.T, flags uintptr, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Fatalf("mount tmpfs (%s) on %s: %v", opts, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// The output directory on a real tmpfs of 64 KiB: the plan fills it, stops
// with one error naming results.jsonl and ENOSPC, leaves only whole lines,
// tears every deployment down; once there is room, --resume finishes it. A
// read-only output directory stops the plan before anything is deployed.
func TestRunOutputOnAFullTmpfsRoot(t *testing.T) {
	testenv.RequireRoot(t, "mount a tmpfs")
	src := strings.Replace(planYAML, "repetitions: 2", "repetitions: 10", 1)
	p := parsePlan(t, src, plan.Options{Only: []string{"published"}})
	// Records of about 6 KiB: a dozen fill the disk.
	wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		m := measurement(100)
		m.Notes = []string{strings.Repeat("n", 6000)}
		return m, nil
	}}
	resolve := func(string) (workload.Workload, error) { return wl, nil }

	t.Run("fills up mid-plan", func(t *testing.T) {
		out := mountTmpfs(t, 0, "size=64k")
		prov := &fakeProvider{}
		opts := Options{Out: out, Engines: prov, Workload: resolve}
		sum, err := Run(context.Background(), p, opts)
		want := "out of space writing " + filepath.Join(out, results.FileName) + ": append: no space left on device (ENOSPC)"
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		recs := readRecords(t, out) // every line whole
		t.Logf("stopped after %d records: %v", len(recs), err)
		if len(recs) == 0 || len(recs) >= 20 || len(recs) != len(sum.Records) {
			t.Fatalf("%d records on disk, %d in the summary, of 20", len(recs), len(sum.Records))
		}
		if len(prov.deployed) != len(recs)+1 || strings.Join(prov.deployed, ",") != strings.Join(prov.tornDown, ",") || prov.closed != 1 {
			t.Errorf("deployed %v\ntorn down %v\nengines closed %d", prov.deployed, prov.tornDown, prov.closed)
		}

		if err := unix.Mount("", out, "", unix.MS_REMOUNT, "size=1m"); err != nil {
			t.Fatal(err)
		}
		opts.Resume = true
		sum, err = Run(context.Background(), p, opts)
		if err != nil || sum.Skipped != len(recs) || len(readRecords(t, out)) != 20 {
			t.Fatalf("resume with room: %v (skipped %d)", err, sum.Skipped)
		}
	})

	t.Run("read-only from the start", func(t *testing.T) {
		out := mountTmpfs(t, unix.MS_RDONLY, "size=64k")
		prov := &fakeProvider{}
		_, err := Run(context.Background(), p, Options{Out: out, Engines: prov, Workload: resolve})
		// The first file a session writes is its lock, OUT/.lock.
		want := "read-only file system writing " + filepath.Join(out, LockFile)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, syscall.EROFS) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		if len(prov.deployed) != 0 {
			t.Errorf("deployed %v on a read-only output directory", prov.deployed)
		}
		if _, err := os.Stat(filepath.Join(out, results.FileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("results.jsonl: %v", err)
		}
	})
}

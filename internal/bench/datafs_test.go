package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// fakeDataFS mounts nothing: it hands out a root per run, refuses xfs as
// this kernel would refuse an option, and records removals.
type fakeDataFS struct {
	mu      sync.Mutex
	mounted []string
	removed []string
}

func (f *fakeDataFS) mount(_ context.Context, runID string, spec plan.FilesystemSpec) (*DataFS, error) {
	if spec.Type == "xfs" {
		return nil, fmt.Errorf("%w: the kernel (Linux 6.18) refuses mount option logbufs=8 on xfs: invalid argument", daemon.ErrDataFSUnsupported)
	}
	root := "/fake/mnt/" + daemon.DataFSName(runID)
	f.mu.Lock()
	f.mounted = append(f.mounted, runID)
	f.mu.Unlock()
	return &DataFS{Root: root, Info: &results.DataFSInfo{FS: spec.Type, Options: spec.Options, Device: "/dev/loop7", Mount: root},
		Remove: func(context.Context) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.removed = append(f.removed, runID)
			return nil
		}}, nil
}

// The runner mounts a configuration's data filesystem before the
// deployment, deploys under it, records it, and removes it after the
// teardown; a filesystem the machine refuses makes the configuration
// not_run with the kernel's reason, and is not tried again.
func TestRunMountsDataFilesystem(t *testing.T) {
	p := parsePlan(t, `
name: unitfs
workload: benchfake
repetitions: 2
warmup: 0s
duration: 1ms
baseline: ext4
configurations:
  - {name: ext4, runtime: host, filesystem: {type: ext4, options: [noatime]}}
  - {name: xfs, runtime: host, filesystem: {type: xfs, options: [logbufs=8]}}
  - {name: plain, runtime: host}
`, plan.Options{})
	prov := &fakeProvider{}
	fs := &fakeDataFS{}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), p, Options{
		Out: out, Engines: prov, DataFS: fs.mount,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 4 || sum.NotRun != 2 {
		t.Fatalf("ok %d not_run %d, want 4 and 2", sum.OK, sum.NotRun)
	}
	for _, rec := range readRecords(t, out) {
		switch rec.Config {
		case "ext4":
			if rec.Status != results.StatusOK || rec.DataFS == nil || rec.DataFS.FS != "ext4" || rec.DataFS.Device != "/dev/loop7" {
				t.Errorf("ext4 record: %s %+v", rec.Status, rec.DataFS)
			}
		case "xfs":
			if rec.Status != results.StatusNotRun || !strings.Contains(rec.Error, "data filesystem xfs(logbufs=8) unavailable") || !strings.Contains(rec.Error, "refuses mount option logbufs=8") {
				t.Errorf("xfs record: %s %q", rec.Status, rec.Error)
			}
		case "plain":
			if rec.DataFS != nil {
				t.Errorf("plain record has a data filesystem: %+v", rec.DataFS)
			}
		}
	}
	if len(fs.mounted) != 2 || strings.Join(fs.mounted, ",") != strings.Join(fs.removed, ",") {
		t.Errorf("mounted %v, removed %v", fs.mounted, fs.removed)
	}
	var under int
	for i, id := range prov.deployed {
		if prov.dataRoots[i] != "" {
			under++
			if prov.dataRoots[i] != "/fake/mnt/"+daemon.DataFSName(id) {
				t.Errorf("run %s deployed under %q", id, prov.dataRoots[i])
			}
		}
	}
	if under != 2 || len(prov.deployed) != 4 {
		t.Errorf("deploys %v with data roots %q", prov.deployed, prov.dataRoots)
	}
}

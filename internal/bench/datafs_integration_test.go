package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"

	"github.com/moby/moby/client"
)

// fsTinyWorkload is tinyWorkload with a data directory, so that the
// placement (and the data filesystem under it) applies.
type fsTinyWorkload struct{ *tinyWorkload }

func (w fsTinyWorkload) Services(c workload.Config) ([]engine.Service, error) {
	s, err := w.tinyWorkload.Services(c)
	if err == nil {
		s[0].DataDir = "/data"
	}
	return s, err
}

// TestBenchDataFilesystemDocker runs a plan with the filesystem knob (ext4
// with seed 004's options, xfs; host and docker) through the real engines:
// during each drive the run's data filesystem is mounted with the options,
// fsync'd writes go through it, a container's data is bind-mounted from it;
// afterwards no mount, loop device, image or state of any run is left.
func TestBenchDataFilesystemDocker(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "loop devices and mounts")
	requireTools(t, "mkfs.ext4", "mkfs.xfs", "losetup")
	wl := fsTinyWorkload{newTinyWorkload(t, ctx, cli)}

	p, err := ParsePlan("fs.yaml", []byte(`
name: fstest
workload: benchtiny
repetitions: 1
warmup: 100ms
duration: 300ms
baseline: host-ext4
configurations:
  - name: host-ext4
    runtime: host
    filesystem: {type: ext4, options: [noatime, data=writeback, discard, barrier=0], size: 512m}
  - name: host-xfs
    runtime: host
    filesystem: {type: xfs, options: [noatime, logbufs=4], size: 512m}
  - name: docker-xfs
    runtime: docker
    network: host
    data: bind
    filesystem: {type: xfs, size: 512m}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"host-ext4":  {"ext4", "noatime", "data=writeback", "discard", "nobarrier"},
		"host-xfs":   {"xfs", "noatime", "logbufs=4"},
		"docker-xfs": {"xfs", "relatime"},
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	wl.onDrive = func(env workload.Env) {
		name := daemon.DataFSName(env.Target.RunID)
		mnts, err := kernel.Mounts("/proc")
		if err != nil {
			t.Error(err)
			return
		}
		var m *kernel.Mount
		for i := range mnts {
			if filepath.Base(mnts[i].Point) == name {
				m = &mnts[i]
			}
		}
		if m == nil {
			t.Errorf("run %s: no data filesystem %s mounted during the drive", env.Target.RunID, name)
			return
		}
		cfg := string(env.Target.Runtime) + "-" + m.FSType // the configuration's name
		got := append(append([]string{m.FSType}, m.Options...), m.SuperOptions...)
		for _, w := range want[cfg] {
			if !contains(got, w) {
				t.Errorf("%s: mountinfo %q lacks %q", cfg, got, w)
			}
		}
		dir := filepath.Join(m.Point, env.Target.RunID, "app")
		f, err := os.Create(filepath.Join(dir, "probe"))
		if err != nil {
			t.Errorf("%s: the service's data directory is not on the data filesystem: %v", cfg, err)
			return
		}
		for i := 0; i < 16; i++ {
			f.Write(make([]byte, 4096))
			if err := f.Sync(); err != nil {
				t.Errorf("%s: fsync: %v", cfg, err)
			}
		}
		f.Close()
		if env.Target.Runtime == engine.RuntimeDocker {
			for _, c := range env.Target.Containers {
				res, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
				ins := res.Container
				if err != nil {
					t.Error(err)
					continue
				}
				bound := false
				for _, mp := range ins.Mounts {
					bound = bound || (mp.Destination == "/data" && mp.Source == dir)
				}
				if !bound {
					t.Errorf("%s: container %s does not bind %s at /data: %+v", cfg, c.Name, dir, ins.Mounts)
				}
			}
		}
		mu.Lock()
		seen[cfg] = true
		mu.Unlock()
	}

	out := filepath.Join(t.TempDir(), "out")
	var log bytes.Buffer
	sum, err := Run(ctx, p, Options{
		Out: out, Engines: &Engines{RunID: "benchtest"},
		Workload: func(string) (workload.Workload, error) { return wl, nil },
		Progress: &Lines{W: &log},
	})
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.OK != 3 || len(seen) != 3 {
		t.Fatalf("%d ok runs of 3, drives checked %v; records %+v", sum.OK, seen, sum.Records)
	}
	mnts, _ := kernel.Mounts("/proc")
	for _, rec := range readRecords(t, out) {
		if rec.DataFS == nil || rec.DataFS.FS != want[rec.Config][0] || !strings.HasPrefix(rec.DataFS.Device, "/dev/loop") {
			t.Errorf("%s: record's data filesystem %+v", rec.Config, rec.DataFS)
		}
		name := daemon.DataFSName(rec.RunID)
		for _, m := range mnts {
			if strings.Contains(m.Point, name) {
				t.Errorf("%s: mount left: %s", rec.Config, m.Point)
			}
		}
		if fss, _ := daemon.ListDataFS(); len(fss) > 0 {
			for _, f := range fss {
				if f.RunID == rec.RunID {
					t.Errorf("%s: data filesystem state left: %+v", rec.Config, f)
				}
			}
		}
	}
	if devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file"); len(devs) > 0 {
		for _, d := range devs {
			b, _ := os.ReadFile(d)
			if strings.Contains(string(b), "ctrperf-fs-"+"fstest") {
				t.Errorf("loop device left: %s → %s", d, b)
			}
		}
	}
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFailRoot(t, "needs %s (make bootstrap installs it)", tool)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

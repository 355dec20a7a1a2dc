package bench

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// TestDriveNotRunnableIsNotRun: a drive that finds a tool missing where it
// runs (a client command's program in its container) makes its
// configuration not_run, with the reason, and its later repetitions are
// not tried again; the other configurations run.
func TestDriveNotRunnableIsNotRun(t *testing.T) {
	p := parsePlan(t, `
name: unit
workload: benchfake
repetitions: 2
warmup: 0s
duration: 1ms
seed: 3
baseline: bare
configurations:
  - name: bare
    runtime: host
  - name: published
    runtime: docker
`, plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	var publishedDrives atomic.Int32
	wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		if env.Config.Network == engine.NetworkPublished {
			publishedDrives.Add(1)
			return nil, &workload.ToolMissingError{Program: "redis-benchmark", Where: "in the client container"}
		}
		return measurement(100), nil
	}}
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: &fakeProvider{},
		Workload: func(string) (workload.Workload, error) { return wl, nil }, Progress: &Lines{W: &strings.Builder{}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.OK != 2 || sum.NotRun != 2 || sum.Failed != 0 {
		t.Fatalf("ok %d not_run %d failed %d, want 2 2 0", sum.OK, sum.NotRun, sum.Failed)
	}
	if n := publishedDrives.Load(); n != 1 {
		t.Errorf("the configuration without its tool was driven %d times, want once", n)
	}
	for _, rec := range readRecords(t, out) {
		if rec.Config == "published" && (rec.Status != results.StatusNotRun || !strings.Contains(rec.Error, "Debian package redis-tools")) {
			t.Errorf("record %+v", rec)
		}
	}
}

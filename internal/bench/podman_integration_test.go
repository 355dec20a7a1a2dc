package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// TestBenchPodmanDocker runs runtime podman beside Docker through the real
// engines and observers: the session's podman service starts on first
// use, the image built on Docker is loaded into podman's store, each
// podman run is measured with its container's cgroup sampled and
// recorded as runtime podman with no userland proxy, and when the plan
// ends, or is interrupted (as SIGINT does) in a podman run, the service
// is stopped with nothing of its runs left.
func TestBenchPodmanDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "rootful podman")
	testenv.Podman(t)
	wl := newTinyWorkload(t, ctx, cli)
	p, err := ParsePlan("tiny.yaml", []byte(`
name: tiny
workload: benchtiny
repetitions: 1
warmup: 100ms
duration: 300ms  # the pipeline, not a figure, is under test
baseline: docker
configurations:
  - name: docker
    runtime: docker
    network: published
  - name: podman-published
    runtime: podman
    network: published
  - name: podman-container-ip
    runtime: podman
    network: container-ip
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	session := "podmanbench-" + testRunIDSuffix(t)
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: session}, Observers: SystemObservers(),
		Workload: func(string) (workload.Workload, error) { return wl, nil }})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.OK != 3 {
		t.Fatalf("%d ok runs of 3; records: %+v", sum.OK, sum.Records)
	}
	for _, rec := range readRecords(t, out) {
		if !strings.HasPrefix(rec.Config, "podman") {
			continue
		}
		if e := rec.Engine; e == nil || e.Runtime != string(engine.RuntimePodman) || e.UserlandProxy == nil || *e.UserlandProxy || !strings.HasPrefix(e.Version, "4.") {
			t.Errorf("run %s: engine %+v, want podman 4.x without a userland proxy", rec.Config, rec.Engine)
		}
		if rec.Result.Metrics["throughput_per_s"] <= 0 {
			t.Errorf("run %s measured nothing: %+v", rec.Config, rec.Result)
		}
		sampled := rec.System != nil && slices.ContainsFunc(rec.System.Samples, func(s results.Sample) bool { _, ok := s.Containers["app"]; return ok })
		if !sampled {
			t.Errorf("run %s: no sample of the container's cgroup", rec.Config)
		}
	}
	if left := podmanLeftovers(t, ctx, session); len(left) > 0 {
		t.Errorf("the session left: %v", left)
	}

	// Interrupted in its first podman run.
	session2 := "podmanbench-" + testRunIDSuffix(t)
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	interrupted := ""
	wl.onDrive = func(env workload.Env) {
		if env.Target.Runtime == engine.RuntimePodman && interrupted == "" {
			interrupted = env.Target.RunID
			icancel()
		}
	}
	_, err = Run(ictx, p, Options{Out: filepath.Join(t.TempDir(), "out"), Engines: &Engines{RunID: session2},
		Workload: func(string) (workload.Workload, error) { return wl, nil }})
	if !errors.Is(err, ErrInterrupted) || interrupted == "" {
		t.Fatalf("interrupted Run: %v (interrupted %q)", err, interrupted)
	}
	if left := podmanLeftovers(t, ctx, session2); len(left) > 0 {
		t.Errorf("the interrupted session left: %v", left)
	}
}

// testRunIDSuffix is 8 random hex digits: a session of the test's own.
func testRunIDSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// podmanLeftovers is what a session of runtime podman left: its service's
// process, socket or state, and any object of its runs in podman's store
// (seen through a service of the test's own once the session's is gone).
func podmanLeftovers(t *testing.T, ctx context.Context, session string) []string {
	t.Helper()
	var left []string
	listed, err := daemon.ListPodman()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if l.RunID == session {
			left = append(left, "podman service "+l.Name)
		}
	}
	sock := filepath.Join("/run/ctrperf", "podman-"+session+".sock")
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		left = append(left, "socket "+sock)
	}
	for _, pid := range processesWith(sock) {
		left = append(left, "process "+cmdline(pid))
	}
	check, err := daemon.StartPodman(ctx, session+"-check")
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close(ctx)
	rest, err := engine.CleanEngineObjects(ctx, check.Client(), func(run string) bool { return strings.HasPrefix(run, session+"-") }, engine.CleanDryRun())
	if err != nil {
		t.Fatal(err)
	}
	return append(left, rest...)
}

// TestBenchPodmanKilledDocker: the session's podman service killed in the
// middle of a run (its container lives on under conmon) fails that run as
// an engine fault; the service is started again for the next run, which
// is measured on it, and the first run's container is torn down there;
// nothing of the session is left.
func TestBenchPodmanKilledDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "rootful podman")
	testenv.Podman(t)
	wl := newTinyWorkload(t, ctx, cli)
	p, err := ParsePlan("fault.yaml", []byte(`
name: fault
workload: benchtiny
repetitions: 2
warmup: 300ms
duration: 3s
baseline: podman
configurations:
  - name: podman
    runtime: podman
    network: published
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	session := "podmanfault-" + testRunIDSuffix(t)
	var killed int
	var name string
	wl.onDrive = func(env workload.Env) {
		if killed != 0 {
			return
		}
		listed, _ := daemon.ListPodman()
		for _, l := range listed {
			if l.RunID == session && l.Alive {
				killed, name = l.PID, l.Name
			}
		}
		if killed == 0 {
			t.Errorf("no podman service of session %s: %+v", session, listed)
			return
		}
		go func() {
			time.Sleep(time.Second) // mid-drive
			if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
				t.Errorf("kill podman service %d: %v", killed, err)
			}
		}()
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: session}, EngineCheck: 200 * time.Millisecond,
		Workload: func(string) (workload.Workload, error) { return wl, nil }}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	recs := readRecords(t, out)
	if killed == 0 || len(recs) != 2 {
		t.Fatalf("killed %d, %d records: %+v", killed, len(recs), recs)
	}
	if want := "engine " + name + " stopped answering during drive: "; recs[0].Status != results.StatusFailed || !strings.HasPrefix(recs[0].Error, want) {
		t.Errorf("first run: status %s error %q, want failed with %q", recs[0].Status, recs[0].Error, want)
	}
	if r := recs[1]; r.Status != results.StatusOK || r.Result.Metrics[results.MetricThroughput] <= 0 {
		t.Errorf("second run on the restarted service: status %s error %q", r.Status, r.Error)
	}
	if left := podmanLeftovers(t, ctx, session); len(left) > 0 {
		t.Errorf("the session left: %v", left)
	}
}

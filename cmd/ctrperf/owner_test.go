package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/owner"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

// besidePlan is plans/smoke.yaml cut to what the two-terminal scenario
// needs (host processes, a published container, the user's engine) and
// to one round of 1 s + 1 s: clean runs beside it within half a second of
// its first objects (the test polls for them), while the session lives
// (about 4 s: both runs' deploy, warm-up, window and teardown), so a
// second round or a longer window only made the test wait longer for the
// same checks.
const besidePlan = `name: beside
workload: web
load: {rate: 20, poisson: true}
app: {db: sqlite}
repetitions: 1
warmup: 1s
duration: 1s
seed: 20150420
baseline: bare-metal
configurations:
  - name: bare-metal
    runtime: host
  - name: docker-published
    runtime: docker
    network: published
`

// TestCleanBesideALiveRunDocker is the two-terminal scenario: `bench run`
// of a short smoke plan in one, `ctrperf clean` in the other while the
// first is deploying and measuring. clean must call the live run's
// objects live and remove none of them; a second bench run must refuse,
// naming the first; the live run must record no errors and no sampler
// warning; and once it ends, clean must have nothing to do.
func TestCleanBesideALiveRunDocker(t *testing.T) {
	testenv.RequireRoot(t, "bench runs and cleans up as root")
	cli := testenv.Docker(t)

	dir := t.TempDir()
	// The package's one static build (testenv.Ctrperf, shared with every
	// package's tests): the images it carries are not rebuilt for it.
	bin := testenv.Ctrperf(t)
	run := func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(out), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// What was orphaned before the test is not the test's business.
	beforeDry, err := run(ctx, "clean", "--dry-run")
	if err != nil {
		t.Fatalf("clean --dry-run before: %v\n%s", err, beforeDry)
	}
	before := ctrperfObjects(t, cli, bin)

	planFile := filepath.Join(dir, "beside.yaml")
	if err := os.WriteFile(planFile, []byte(besidePlan), 0o644); err != nil {
		t.Fatal(err)
	}
	outA := filepath.Join(dir, "A")
	bench := exec.CommandContext(ctx, bin, "bench", "run", planFile, "--out", outA)
	stdout, err := bench.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	bench.Stderr = &stderr
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	var benchOut strings.Builder
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			benchOut.WriteString(sc.Text() + "\n")
		}
	}()
	exited := make(chan error, 1)
	go func() { <-drained; exited <- bench.Wait() }()

	// Its owner record, then its first Docker objects.
	var me owner.Status
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the bench run never deployed anything of Docker; stderr:\n%s", stderr.String())
		}
		if me.Session == "" {
			live, _ := owner.Dir{}.Live(owner.KindBench)
			for _, s := range live {
				if s.PID == bench.Process.Pid {
					me = s
				}
			}
		}
		if me.Session != "" && strings.Contains(strings.Join(newObjects(before, ctrperfObjects(t, cli, bin)), "\n"), me.Session) {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("bench run ended early: %v\n%s\n%s", err, benchOut.String(), stderr.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Logf("live session %s: %s", me.Session, me.Record)

	// A second bench run refuses, naming the first.
	second, err := run(ctx, "bench", "run", planFile, "--out", filepath.Join(dir, "B"))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(second, "another bench run is running") || !strings.Contains(second, outA) {
		t.Errorf("second bench run: %v, output:\n%s\nwant exit 1 naming the live run and %s", err, second, outA)
	}
	if _, err := os.Stat(filepath.Join(dir, "B", results.FileName)); err == nil {
		t.Error("the refused bench run wrote results")
	}

	dry, err := run(ctx, "clean", "--dry-run")
	if err != nil {
		t.Fatalf("clean --dry-run: %v\n%s", err, dry)
	}
	t.Logf("clean --dry-run beside the live run:\n%s", dry)
	liveLines := 0
	for _, l := range strings.Split(dry, "\n") {
		if strings.Contains(l, me.Session) || strings.Contains(l, "pid "+strconv.Itoa(me.PID)+" ") {
			if !strings.HasPrefix(l, "live ") {
				t.Errorf("an object of the live run is not live: %s", l)
			}
			liveLines++
		}
	}
	if liveLines == 0 {
		t.Errorf("clean --dry-run lists no object of the live session %s", me.Session)
	}

	cleaned, err := run(ctx, "clean")
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, cleaned)
	}
	t.Logf("clean beside the live run:\n%s", cleaned)
	kept := 0
	for _, l := range strings.Split(cleaned, "\n") {
		if strings.HasPrefix(l, "removed ") && strings.Contains(l, me.Session) {
			t.Errorf("clean removed an object of the live run: %s", l)
		}
		if strings.HasPrefix(l, "kept live ") {
			kept++
		}
	}
	if kept == 0 {
		t.Error("clean kept nothing live")
	}

	select {
	case err = <-exited:
	case <-ctx.Done():
		_ = bench.Process.Kill()
		t.Fatalf("bench run did not finish; stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("bench run: %v\n%s\n%s", err, benchOut.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), "sampler") {
		t.Errorf("the live run warned about a sampler:\n%s", stderr.String())
	}
	recs, err := results.ReadDir(outA)
	if err != nil || len(recs) == 0 {
		t.Fatalf("results of the live run: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Status != results.StatusOK {
			t.Errorf("run %s (%s): %s %s", r.RunID, r.Config, r.Status, r.Error)
			continue
		}
		for name, op := range r.Result.Operations {
			if n := op.ErrorCount(); n > 0 {
				t.Errorf("run %s (%s): %d errors in %s", r.RunID, r.Config, n, name)
			}
		}
		if r.System != nil && len(r.System.Unavailable) > 0 {
			t.Errorf("run %s (%s): samplers unavailable: %v", r.RunID, r.Config, r.System.Unavailable)
		}
	}
	if live, _ := (owner.Dir{}).Live(owner.KindBench); len(live) > 0 {
		t.Errorf("owner records left after the run: %+v", live)
	}

	after, err := run(ctx, "clean", "--dry-run")
	if err != nil {
		t.Fatalf("clean --dry-run after: %v\n%s", err, after)
	}
	for _, l := range strings.Split(strings.TrimSpace(after), "\n") {
		if l != "nothing to clean" && !strings.Contains(beforeDry, l) {
			t.Errorf("after the live run ended, clean still has something to do: %s", l)
		}
	}
	if left := newObjects(before, ctrperfObjects(t, cli, bin)); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

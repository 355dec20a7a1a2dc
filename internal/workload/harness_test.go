package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/results"
)

// deployAndDrive validates c, deploys w's services on eng, drives a short
// window (testWindow) and tears the target down at the end of the test. It
// fails the test on any error and checks that the window's start was
// signalled.
func deployAndDrive(ctx context.Context, t *testing.T, eng engine.Engine, w Workload, c Config, runID string) *results.Measurement {
	t.Helper()
	return driveWith(ctx, t, eng, w, deployWith(ctx, t, eng, w, c, runID), c)
}

// deployTarget deploys the web workload; see deployWith.
func deployTarget(ctx context.Context, t *testing.T, eng engine.Engine, c Config, runID string) *engine.Target {
	t.Helper()
	return deployWith(ctx, t, eng, Web{}, c, runID)
}

// driveWindow drives the web workload; see driveWith.
func driveWindow(ctx context.Context, t *testing.T, eng engine.Engine, target *engine.Target, c Config) *results.Measurement {
	t.Helper()
	return driveWith(ctx, t, eng, Web{}, target, c)
}

// deployWith validates c and deploys w's services, with the teardown
// registered for the end of the test (a second teardown of a target that is
// already gone is harmless).
func deployWith(ctx context.Context, t *testing.T, eng engine.Engine, w Workload, c Config, runID string) *engine.Target {
	t.Helper()
	c = decoded(t, w, c)
	svcs, err := w.Services(c)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	target, err := eng.Deploy(ctx, engine.DeploySpec{RunID: runID, Network: c.Network, Data: c.Data, Services: svcs})
	t.Cleanup(func() {
		tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
		defer tcancel()
		tgt := target
		if tgt == nil {
			tgt = &engine.Target{RunID: runID, Runtime: c.Runtime, Network: c.Network}
		}
		t0 := time.Now()
		if err := eng.Teardown(tctx, tgt); err != nil {
			t.Errorf("teardown: %v", err)
		}
		t.Logf("%s: teardown took %v", runID, time.Since(t0).Round(time.Millisecond))
	})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	t.Logf("%s: deploy took %v", runID, time.Since(t0).Round(time.Millisecond))
	return target
}

// testWindow is the window driveWith drives: 1 s of warm-up, so the
// sysbench tools run their warm-up too (they skip one under their 1 s
// resolution), and 2 s measured. The checks on it are that figures are
// there and parsed, not their size, but a 1 s window was not enough: with
// nine tool cases at once beside the other lane, the closed-loop kv case
// once completed no operation in its measured second (CI, 2026-11-26), and
// lane A has the slack for the longer window. A test whose check counts
// what a window of a given length serves drives its own (driveWindowOf).
var testWindow = Window{Warmup: time.Second, Duration: 2 * time.Second}

// driveWith drives testWindow and checks that the window's start was
// signalled.
func driveWith(ctx context.Context, t *testing.T, eng engine.Engine, w Workload, target *engine.Target, c Config) *results.Measurement {
	t.Helper()
	return driveWindowOf(ctx, t, eng, w, target, c, testWindow)
}

// driveWindowOf drives win and checks that the window's start was signalled.
func driveWindowOf(ctx context.Context, t *testing.T, eng engine.Engine, w Workload, target *engine.Target, c Config, win Window) *results.Measurement {
	t.Helper()
	c = decoded(t, w, c)
	var started atomic.Bool // drivers may call Started from a timer goroutine
	t0 := time.Now()
	m, err := w.Drive(ctx, Env{Engine: eng, Target: target, Config: c,
		Window: win, Started: func() { started.Store(true) }})
	if err != nil {
		t.Fatalf("drive: %v", err)
	}
	if !started.Load() {
		t.Error("Started was not called")
	}
	t.Logf("%s: drive took %v", target.RunID, time.Since(t0).Round(time.Millisecond))
	return m
}

// subtest is a named subtest body for concurrently.
type subtest struct {
	name string
	run  func(t *testing.T)
}

// concurrently runs the subtests all at once: t.Run may be called from
// several goroutines, and these subtests spend their time waiting on
// containers and servers to start, on fixed windows and on teardowns, so
// they need not queue behind the -parallel limit (GOMAXPROCS, 2 here) as
// t.Parallel subtests would. Only for subtests whose checks do not depend
// on having the CPU to themselves and that share no state (each names its
// own run id).
func concurrently(t *testing.T, subs ...subtest) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(s.name, s.run)
		}()
	}
	wg.Wait()
}

// rawKnobs reads the app and load maps a test wrote into a Config, as a
// plan would give them to Decode; ok is false for a Config already decoded.
func rawKnobs(c Config) (k Knobs, ok bool) {
	app, appMap := c.App.(map[string]any)
	ld, loadMap := c.Load.(map[string]any)
	if (c.App != nil && !appMap) || (c.Load != nil && !loadMap) {
		return Knobs{}, false
	}
	return Knobs{Runtime: c.Runtime, Network: c.Network, Data: c.Data, Topology: c.Topology, App: app, Load: ld}, true
}

// validate is w's Decode of the maps in c: the plan's check of a configuration.
func validate(w Workload, c Config) error {
	k, _ := rawKnobs(c)
	_, _, err := w.Decode(k)
	return err
}

// decoded is c with the app and load maps a test wrote into it decoded by
// w, as the plan would decode them; a Config already decoded passes through.
func decoded(t testing.TB, w Workload, c Config) Config {
	t.Helper()
	k, ok := rawKnobs(c)
	if !ok {
		return c
	}
	out, err := Decoded(w, k, c.Resources)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

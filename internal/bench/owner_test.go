package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/owner"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// TestRunOwnsItsSession: a run holds an owner record naming its session
// and every run id before deploying it, releases it at the end, and a
// second session is refused while one is live unless it allows concurrency,
// which env.json records.
func TestRunOwnsItsSession(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	dir := owner.Dir{Path: t.TempDir()}
	var seen []owner.Status
	wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		if len(seen) == 0 {
			live, err := dir.Live(owner.KindBench)
			if err != nil {
				t.Error(err)
			}
			seen = live
		}
		return measurement(100), nil
	}}
	opts := func(out string, allow bool) Options {
		return Options{Out: out, Engines: &fakeProvider{}, Workload: func(string) (workload.Workload, error) { return wl, nil },
			Owners: &dir, AllowConcurrent: allow, Session: "smoke-0a0b0c"}
	}
	out := filepath.Join(t.TempDir(), "A")
	sum, err := Run(context.Background(), p, opts(out, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Session != "smoke-0a0b0c" || seen[0].Out != out || seen[0].PID != os.Getpid() {
		t.Fatalf("owner during the run = %+v, want this process's session writing to %s", seen, out)
	}
	if id := sum.Records[0].RunID; !seen[0].Owns(id) || !strings.HasPrefix(id, "smoke-0a0b0c-") {
		t.Errorf("run id %s is not the session's", id)
	}
	if len(seen[0].Objects) == 0 || !strings.HasPrefix(seen[0].Objects[0], "smoke-0a0b0c-") {
		t.Errorf("run ids recorded before deploy: %v", seen[0].Objects)
	}
	if all, _ := dir.List(); len(all) != 0 {
		t.Errorf("after the run: %+v, want the record released", all)
	}

	// A live session (this process holding another record) refuses the next.
	held, err := dir.Acquire(owner.Record{Kind: owner.KindBench, Session: "smoke-ffffff", Out: "out/first"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = Run(context.Background(), p, opts(filepath.Join(t.TempDir(), "B"), false))
	if !errors.Is(err, ErrConcurrent) || !strings.Contains(err.Error(), "out/first") || !strings.Contains(err.Error(), "--allow-concurrent") {
		t.Fatalf("second session: %v, want ErrConcurrent naming the first and the override", err)
	}
	outC := filepath.Join(t.TempDir(), "C")
	if _, err := Run(context.Background(), p, opts(outC, true)); err != nil {
		t.Fatalf("--allow-concurrent: %v", err)
	}
	conc, err := results.ReadConcurrency(outC)
	if err != nil || conc == nil || !conc.AllowConcurrent || len(conc.Beside) != 1 || !strings.Contains(conc.Beside[0], "out/first") {
		t.Errorf("env.json concurrency = %+v, %v; want allowed beside out/first", conc, err)
	}
	if conc, _ := results.ReadConcurrency(out); conc != nil {
		t.Errorf("a session alone records concurrency %+v", conc)
	}
}

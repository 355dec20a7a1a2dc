package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ctrperf/internal/owner"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// nobody owns what "another user" owns in these tests.
const nobody = 65534

// outCase is an output directory someone else could redirect: setup
// builds it (and may plant a target outside it) and returns the path the
// refusal must name.
type outCase struct {
	desc   string
	resume bool
	setup  func(t *testing.T, out, outside string) (refuse string)
}

// started is an output directory a plan was started in, to resume.
func started(t *testing.T, out string) {
	t.Helper()
	p := parsePlan(t, planYAML, plan.Options{})
	lock, err := openOut(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, _, err := prepareOut(out, p, false, Meta{Plan: p.Name}); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkRefused fails t unless err names refuse and nothing was written
// outside OUT.
func checkRefused(t *testing.T, err error, refuse, outside string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "refusing "+refuse+":") {
		t.Fatalf("error %v, want a refusal naming %s", err, refuse)
	}
	ents, _ := os.ReadDir(outside)
	for _, e := range ents {
		if e.Name() != "victim" {
			t.Errorf("%s was created outside OUT", filepath.Join(outside, e.Name()))
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "victim")); err == nil && string(b) != "victim\n" {
		t.Errorf("the victim file outside OUT was written: %q", b)
	}
}

func unsafeOutCases() []outCase {
	return []outCase{
		{desc: "results.jsonl links to a file not yet created (the issue's case)", setup: func(t *testing.T, out, outside string) string {
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.Symlink(filepath.Join(outside, "created"), filepath.Join(out, results.FileName)))
			return filepath.Join(out, results.FileName)
		}},
		{desc: "results.jsonl links to an existing file, resumed", resume: true, setup: func(t *testing.T, out, outside string) string {
			started(t, out)
			must(t, os.Remove(filepath.Join(out, results.FileName)))
			must(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(out, results.FileName)))
			return filepath.Join(out, results.FileName)
		}},
		{desc: "meta.json links elsewhere, resumed", resume: true, setup: func(t *testing.T, out, outside string) string {
			started(t, out)
			must(t, os.Remove(filepath.Join(out, MetaFile)))
			must(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(out, MetaFile)))
			return filepath.Join(out, MetaFile)
		}},
		{desc: "plan.yaml writable by anyone, resumed", resume: true, setup: func(t *testing.T, out, outside string) string {
			started(t, out)
			must(t, os.Chmod(filepath.Join(out, PlanFile), 0o666))
			return filepath.Join(out, PlanFile)
		}},
		{desc: "the lock file links elsewhere", setup: func(t *testing.T, out, outside string) string {
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(out, LockFile)))
			return filepath.Join(out, LockFile)
		}},
		{desc: "OUT itself is a symlink", setup: func(t *testing.T, out, outside string) string {
			must(t, os.Symlink(outside, out))
			return out
		}},
		{desc: "OUT is world-writable, not sticky", setup: func(t *testing.T, out, outside string) string {
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.Chmod(out, 0o777))
			return out
		}},
	}
}

func runOutCases(t *testing.T, tests []outCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			out, outside := filepath.Join(root, "out"), filepath.Join(root, "outside")
			must(t, os.Mkdir(outside, 0o755))
			must(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("victim\n"), 0o644))
			refuse := tt.setup(t, out, outside)
			lock, err := openOut(out, tt.resume)
			if err == nil {
				lock.Close()
			}
			checkRefused(t, err, refuse, outside)
		})
	}
}

// TestOpenOutRefusesUnsafe: an output directory that someone other than
// root or the invoking user could redirect is refused, naming the path,
// before anything is written.
func TestOpenOutRefusesUnsafe(t *testing.T) {
	runOutCases(t, unsafeOutCases())
}

// TestOpenOutRefusesOtherUsersRoot: directories and files of another user
// (uid 65534; only root can chown them there).
func TestOpenOutRefusesOtherUsersRoot(t *testing.T) {
	testenv.RequireRoot(t, "chown to another user")
	runOutCases(t, []outCase{
		{desc: "OUT sticky world-writable, owned by another user", setup: func(t *testing.T, out, outside string) string {
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.Chmod(out, 0o777|os.ModeSticky))
			must(t, os.Chown(out, nobody, nobody))
			return out
		}},
		{desc: "OUT owned by another user, 0755", setup: func(t *testing.T, out, outside string) string {
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.Chown(out, nobody, nobody))
			return out
		}},
		{desc: "plan.yaml owned by another user, resumed", resume: true, setup: func(t *testing.T, out, outside string) string {
			started(t, out)
			must(t, os.Chown(filepath.Join(out, PlanFile), nobody, nobody))
			return filepath.Join(out, PlanFile)
		}},
	})
}

// TestRunRefusesUnsafeOut: bench.Run itself refuses such a directory
// before any run is deployed, and writes nothing outside it.
func TestRunRefusesUnsafeOut(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	for _, tt := range unsafeOutCases() {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			out, outside := filepath.Join(root, "out"), filepath.Join(root, "outside")
			must(t, os.Mkdir(outside, 0o755))
			must(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("victim\n"), 0o644))
			refuse := tt.setup(t, out, outside)
			prov := &fakeProvider{}
			_, err := Run(context.Background(), p, Options{Out: out, Resume: tt.resume, Engines: prov,
				Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }})
			checkRefused(t, err, refuse, outside)
			if len(prov.deployed) != 0 {
				t.Errorf("deployed %v before refusing OUT", prov.deployed)
			}
		})
	}
}

// TestLoadOutPlanRefusesUnsafe: --resume without a plan file reads
// OUT/plan.yaml, whose host commands root runs: only from a safe OUT.
func TestLoadOutPlanRefusesUnsafe(t *testing.T) {
	tests := []struct {
		desc  string
		setup func(t *testing.T, out, outside string) (refuse string)
	}{
		{"plan.yaml links to another plan", func(t *testing.T, out, outside string) string {
			must(t, os.Rename(filepath.Join(out, PlanFile), filepath.Join(outside, PlanFile)))
			must(t, os.Symlink(filepath.Join(outside, PlanFile), filepath.Join(out, PlanFile)))
			return filepath.Join(out, PlanFile)
		}},
		{"plan.yaml writable by anyone", func(t *testing.T, out, outside string) string {
			must(t, os.Chmod(filepath.Join(out, PlanFile), 0o646))
			return filepath.Join(out, PlanFile)
		}},
		{"OUT writable by anyone", func(t *testing.T, out, outside string) string {
			must(t, os.Chmod(out, 0o777))
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			out, outside := filepath.Join(root, "out"), filepath.Join(root, "outside")
			must(t, os.Mkdir(outside, 0o755))
			started(t, out)
			if _, err := LoadOutPlan(out, plan.Options{}); err != nil {
				t.Fatalf("before: %v", err)
			}
			refuse := tt.setup(t, out, outside)
			_, err := LoadOutPlan(out, plan.Options{})
			if err == nil || !strings.Contains(err.Error(), "refusing "+refuse+":") {
				t.Fatalf("error %v, want a refusal naming %s", err, refuse)
			}
		})
	}
}

// TestRunLocksOut: a second session on the same OUT fails on OUT/.lock,
// naming OUT and the holder's pid, even with --allow-concurrent (which
// only lets sessions share the machine, not a directory); the first
// session's records are intact.
func TestRunLocksOut(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{})
	owners := owner.Dir{Path: t.TempDir()}
	out := filepath.Join(t.TempDir(), "out")
	inDrive, release := make(chan struct{}), make(chan struct{})
	first := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		select {
		case inDrive <- struct{}{}:
			<-release
		default:
		}
		return measurement(100), nil
	}}
	opts := func(wl workload.Workload, resume bool) Options {
		return Options{Out: out, Resume: resume, Engines: &fakeProvider{}, Owners: &owners, AllowConcurrent: true,
			Workload: func(string) (workload.Workload, error) { return wl, nil }}
	}
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), p, opts(first, false))
		done <- err
	}()
	<-inDrive // the first session is inside its first run
	for _, resume := range []bool{false, true} {
		second := &fakeWorkload{drive: func(context.Context, workload.Env) (*results.Measurement, error) {
			t.Error("the second session ran")
			return measurement(1), nil
		}}
		_, err := Run(context.Background(), p, opts(second, resume))
		want := []string{"output directory " + out + " is in use", "pid " + strconv.Itoa(os.Getpid()), filepath.Join(out, LockFile)}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("second session (resume %v): %v, want it to say %q", resume, err, w)
			}
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("first session: %v", err)
	}
	recs := readRecords(t, out)
	if len(recs) != len(p.Runs()) {
		t.Errorf("%d records, want the first session's %d", len(recs), len(p.Runs()))
	}
	seen := map[int]bool{}
	for _, r := range recs {
		if seen[r.Index] {
			t.Errorf("run index %d recorded twice", r.Index)
		}
		seen[r.Index] = true
	}
	// Released at the end: the next session on OUT may resume it.
	if _, err := Run(context.Background(), p, opts(first, true)); err != nil {
		t.Errorf("resume after the first session ended: %v", err)
	}
	lock, err := openOut(out, true)
	if err != nil {
		t.Fatalf("lock left held: %v", err)
	}
	lock.Close()
}

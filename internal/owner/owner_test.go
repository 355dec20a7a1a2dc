package owner

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/kernel"
)

// TestMain lets a test start this binary as a child that takes ownership
// and dies without releasing it.
func TestMain(m *testing.M) {
	if dir := os.Getenv("OWNER_TEST_CHILD_DIR"); dir != "" {
		if _, err := (Dir{Path: dir}).Acquire(Record{Kind: KindBench, Session: "smoke-dead00", Out: "A"}); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		os.Exit(0) // no Release: a kill
	}
	os.Exit(m.Run())
}

func TestLiveOwnerInThisProcess(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	o, err := d.Acquire(Record{Kind: KindBench, Session: "smoke-abc123", Out: "out/A"})
	if err != nil {
		t.Fatal(err)
	}
	rec := o.Record()
	if rec.PID != os.Getpid() || rec.StartTime == 0 || rec.Host == "" || len(rec.Command) == 0 || rec.Started.IsZero() {
		t.Errorf("record not filled in: %+v", rec)
	}
	if err := o.Add("smoke-abc123-000", "ctrperf-engine-x"); err != nil {
		t.Fatal(err)
	}
	live, err := d.Live(KindBench)
	if err != nil || len(live) != 1 {
		t.Fatalf("Live = %v, %v; want the one owner", live, err)
	}
	if err := d.Reap(live[0]); err != nil {
		t.Fatal(err)
	}
	if again, _ := d.Live(KindBench); len(again) != 1 {
		t.Fatalf("Reap removed a live record")
	}
	if live[0].Reason != "its lock is held" || live[0].Out != "out/A" || len(live[0].Objects) != 2 {
		t.Errorf("live owner = %+v", live[0])
	}
	// A second process (or this one again) cannot take the same session.
	_, err = d.Acquire(Record{Kind: KindBench, Session: "smoke-abc123"})
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.PID != os.Getpid() {
		t.Fatalf("second Acquire: %v, want a HeldError naming this process", err)
	}
	if !strings.Contains(err.Error(), "output out/A") {
		t.Errorf("HeldError %q does not name the output directory", err)
	}

	ow := Owners(live)
	for _, tc := range []struct {
		desc, runID string
		owned, live bool
	}{
		{"a run of the session", "smoke-abc123-002", true, true},
		{"the session (its private engines)", "smoke-abc123", true, true},
		{"a listed object", "ctrperf-engine-x", true, true},
		{"another session with a common prefix", "smoke-abc1234-000", false, false},
		{"no run id", "", false, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, ok := ow.Of(tc.runID)
			if ok != tc.owned || (ok && s.Live != tc.live) {
				t.Errorf("Of(%q) = %v live %v, want owned %v live %v", tc.runID, ok, s.Live, tc.owned, tc.live)
			}
		})
	}
	if ids := ow.LiveRunIDs(); len(ids) != 2 {
		t.Errorf("LiveRunIDs = %v", ids)
	}

	if err := o.Release(); err != nil {
		t.Fatal(err)
	}
	if err := o.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	all, err := d.List()
	if err != nil || len(all) != 0 {
		t.Errorf("after Release: %v, %v; want no record", all, err)
	}
	if ents, _ := os.ReadDir(d.Path); len(ents) != 0 {
		t.Errorf("after Release the directory holds %v", ents)
	}
}

func TestDeadOwnerFromAChild(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OWNER_TEST_CHILD_DIR="+d.Path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	all, err := d.List()
	if err != nil || len(all) != 1 {
		t.Fatalf("List = %v, %v; want the dead child's record", all, err)
	}
	s := all[0]
	if s.Live || s.PID != cmd.Process.Pid || !strings.Contains(s.Reason, "lock is free") {
		t.Errorf("dead child's record = %+v, want orphaned by a free lock", s)
	}
	if live, who := Owners(all).Describe("smoke-dead00-001"); live || !strings.Contains(who, "lock is free") {
		t.Errorf("Describe = %v %q", live, who)
	}
	if err := d.Reap(s); err != nil {
		t.Fatal(err)
	}
	if all, _ := d.List(); len(all) != 0 {
		t.Errorf("after Reap: %+v", all)
	}
	// Its session can be taken again.
	o, err := d.Acquire(Record{Kind: KindBench, Session: "smoke-dead00"})
	if err != nil {
		t.Fatalf("Acquire over a dead owner: %v", err)
	}
	o.Release()
}

// Without a lock file the pid and its start time decide: a reused pid has
// another start time.
func TestNoLockFileFallsBackOnPidAndStartTime(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	self, err := kernel.ProcStartTime(kernel.ProcMount, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		pid    int
		start  uint64
		live   bool
		reason string
	}{
		{"this process", os.Getpid(), self, true, "pid and start time match"},
		{"pid reused by another process", os.Getpid(), self + 1, false, "another process now"},
		{"pid gone", 1 << 30, 1, false, "is gone"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o, err := d.Acquire(Record{Kind: KindBench, Session: "s", PID: tc.pid, StartTime: tc.start})
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(d.Path, "bench-s.lock"))
			all, err := d.List()
			if err != nil || len(all) != 1 {
				t.Fatalf("List = %v, %v", all, err)
			}
			if all[0].Live != tc.live || !strings.Contains(all[0].Reason, tc.reason) {
				t.Errorf("live %v (%s), want %v (%s)", all[0].Live, all[0].Reason, tc.live, tc.reason)
			}
			o.Release()
		})
	}
}

func TestAcquireRefusesBadNames(t *testing.T) {
	for _, rec := range []Record{{Kind: KindBench}, {Session: "x"}, {Kind: KindBench, Session: "a/b"}} {
		if _, err := (Dir{Path: t.TempDir()}).Acquire(rec); err == nil {
			t.Errorf("Acquire(%+v): no error", rec)
		}
	}
}

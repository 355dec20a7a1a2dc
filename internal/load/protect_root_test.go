package load

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

// TestProtectGeneratorRoot moves this test process into its own cgroup on
// the real cgroup mount and back.
func TestProtectGeneratorRoot(t *testing.T) {
	testenv.RequireRoot(t, "to move a process between cgroups")
	if _, err := cpuHierarchyOf(kernel.DefaultFS().Cgroups()); err != nil {
		testenv.SkipOrFailRoot(t, "%v", err)
	}
	pid := os.Getpid()
	tasks := kernel.SelfTaskDir(kernel.ProcMount)
	// every thread's cgroup in the cpu hierarchy must be want
	allThreadsIn := func(want string) {
		t.Helper()
		ents, err := os.ReadDir(tasks)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			got, err := kernel.ProcCgroupPath(tasks, tid)
			if err != nil {
				continue // the thread exited meanwhile
			}
			if got != want {
				t.Errorf("thread %d is in %s, want %s", tid, got, want)
			}
		}
	}
	before, err := kernel.ProcCgroupPath(kernel.ProcMount, pid)
	if err != nil {
		t.Fatal(err)
	}

	p, restore, err := ProtectGenerator(kernel.DefaultFS())
	if err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = restore()
		}
	})
	t.Logf("protected: %s (came from %s)", p, before)
	want := "/" + filepath.Join(engine.NamePrefix, engine.GeneratorCgroupPrefix+strconv.Itoa(pid))
	if got, err := kernel.ProcCgroupPath(kernel.ProcMount, pid); err != nil || got != want {
		t.Errorf("/proc/self/cgroup says %q (%v), want %q", got, err, want)
	}
	allThreadsIn(want)
	b, err := os.ReadFile(filepath.Join(p.Dir, p.File))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strconv.Itoa(p.Value)+"\n" || (p.Value != GeneratorShares && p.Value != GeneratorWeight) {
		t.Errorf("%s reads %q, want %d", p.File, got, p.Value)
	}

	restored = true
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got, err := kernel.ProcCgroupPath(kernel.ProcMount, pid); err != nil || got != before {
		t.Errorf("after restore /proc/self/cgroup says %q (%v), want %q", got, err, before)
	}
	allThreadsIn(before)
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after restore (%v)", p.Dir, err)
	}
}

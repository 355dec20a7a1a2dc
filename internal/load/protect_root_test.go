package load

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"ctrperf/internal/engine"
)

// requireRoot skips a test that needs root, or fails it under
// CTRPERF_REQUIRE_DOCKER=1 or CTRPERF_REQUIRE_ROOT=1 (CI).
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CTRPERF_REQUIRE_DOCKER") == "1" || os.Getenv("CTRPERF_REQUIRE_ROOT") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// TestProtectGeneratorRoot moves this test process into its own cgroup on
// the real cgroup mount and back.
func TestProtectGeneratorRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		requireRoot(t, "needs root to move a process between cgroups")
	}
	if _, err := detectCPUHierarchy(DefaultCgroupRoot); err != nil {
		requireRoot(t, err.Error())
	}
	pid := os.Getpid()
	tasks := filepath.Join(DefaultProcRoot, "self", "task")
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
			got, err := engine.CgroupPath(tasks, tid)
			if err != nil {
				continue // the thread exited meanwhile
			}
			if got != want {
				t.Errorf("thread %d is in %s, want %s", tid, got, want)
			}
		}
	}
	before, err := engine.CgroupPath(DefaultProcRoot, pid)
	if err != nil {
		t.Fatal(err)
	}

	p, restore, err := ProtectGenerator(DefaultCgroupRoot, DefaultProcRoot)
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
	if got, err := engine.CgroupPath(DefaultProcRoot, pid); err != nil || got != want {
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
	if got, err := engine.CgroupPath(DefaultProcRoot, pid); err != nil || got != before {
		t.Errorf("after restore /proc/self/cgroup says %q (%v), want %q", got, err, before)
	}
	allThreadsIn(before)
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after restore (%v)", p.Dir, err)
	}
}

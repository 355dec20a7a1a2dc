package load

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

// DefaultTaskDir lists the threads of this process.
var DefaultTaskDir = kernel.SelfTaskDir(kernel.ProcMount)

// PinCPUs confines the generator to the CPUs of list (cpuset syntax, "1" or
// "0-1"). Scope: the whole ctrperf process, because Go schedules goroutines
// on any of its threads. Every thread listed in taskDir gets the affinity
// (sched_setaffinity per thread id), and threads the runtime creates later
// inherit it from the thread that creates them. GOMAXPROCS is set to the
// number of CPUs so that the runtime does not run more threads than it may
// use. The returned function restores every thread's previous affinity and
// GOMAXPROCS.
func PinCPUs(taskDir, list string) (restore func() error, err error) {
	set, err := cpuset.Parse(list)
	if err != nil {
		return nil, fmt.Errorf("generator cpuset %q: %w", list, err)
	}
	if set.IsEmpty() {
		return nil, fmt.Errorf("generator cpuset %q is empty", list)
	}
	var mask unix.CPUSet
	mask.Zero()
	for _, c := range set.List() {
		mask.Set(c)
	}
	tids, err := threadIDs(taskDir)
	if err != nil {
		return nil, err
	}
	// Threads created while pinned inherit the pin; on restore they get
	// the affinity the calling thread had before.
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, fmt.Errorf("read generator affinity: %w", err)
	}
	old := make(map[int]unix.CPUSet, len(tids))
	undo := func() error {
		var first error
		now, err := threadIDs(taskDir)
		if err != nil {
			now = nil
		}
		for _, tid := range now {
			if _, ok := old[tid]; !ok {
				old[tid] = orig
			}
		}
		for tid, m := range old {
			m := m
			if err := unix.SchedSetaffinity(tid, &m); err != nil && first == nil && err != unix.ESRCH {
				first = fmt.Errorf("restore affinity of thread %d: %w", tid, err)
			}
		}
		return first
	}
	for _, tid := range tids {
		var prev unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &prev); err != nil {
			if err == unix.ESRCH { // the thread exited meanwhile
				continue
			}
			_ = undo()
			return nil, fmt.Errorf("read affinity of thread %d: %w", tid, err)
		}
		if err := unix.SchedSetaffinity(tid, &mask); err != nil {
			if err == unix.ESRCH {
				continue
			}
			_ = undo()
			return nil, fmt.Errorf("pin thread %d to CPUs %s: %w", tid, set, err)
		}
		old[tid] = prev
	}
	procs := runtime.GOMAXPROCS(set.Size())
	return func() error {
		runtime.GOMAXPROCS(procs)
		return undo()
	}, nil
}

func threadIDs(taskDir string) ([]int, error) {
	ents, err := os.ReadDir(taskDir)
	if err != nil {
		return nil, fmt.Errorf("list generator threads: %w", err)
	}
	var tids []int
	for _, e := range ents {
		tid, err := strconv.Atoi(filepath.Base(e.Name()))
		if err != nil {
			continue
		}
		tids = append(tids, tid)
	}
	if len(tids) == 0 {
		return nil, fmt.Errorf("list generator threads: no thread ids in %s", taskDir)
	}
	return tids, nil
}

// processCPU is the user+system CPU time this process used so far
// (getrusage RUSAGE_SELF: all threads, so the generator's share only when the
// process does little else during the window).
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

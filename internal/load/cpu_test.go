package load

import (
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinCPUsRejectsBadInput(t *testing.T) {
	tests := []struct {
		desc, taskDir, list, wantErr string
	}{
		{"not a cpu list", DefaultTaskDir, "one", "cpuset"},
		{"empty list", DefaultTaskDir, "", "empty"},
		{"no task directory", "testdata/no-such-dir", "0", "list generator threads"},
		{"a task directory without thread ids", "testdata", "0", "no thread ids"},
	}
	for _, tc := range tests {
		if _, err := PinCPUs(tc.taskDir, tc.list); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.desc, err, tc.wantErr)
		}
	}
}

func TestPinCPUsPinsAndRestores(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Skip("sched_getaffinity unavailable:", err)
	}
	first := -1
	for c := 0; c < 1024; c++ {
		if before.IsSet(c) {
			first = c
			break
		}
	}
	procs := runtime.GOMAXPROCS(0)
	restore, err := PinCPUs(DefaultTaskDir, itoa(int64(first)))
	if err != nil {
		t.Fatal(err)
	}
	var during unix.CPUSet
	_ = unix.SchedGetaffinity(0, &during)
	if during.Count() != 1 || !during.IsSet(first) || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("while pinned: %d CPUs, GOMAXPROCS %d; want only CPU %d and 1", during.Count(), runtime.GOMAXPROCS(0), first)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	var after unix.CPUSet
	_ = unix.SchedGetaffinity(0, &after)
	if after != before || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("not restored: %d CPUs (was %d), GOMAXPROCS %d (was %d)", after.Count(), before.Count(), runtime.GOMAXPROCS(0), procs)
	}
}

package kernel

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseStatStartTime(t *testing.T) {
	const tail = " S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	tests := []struct {
		desc, stat string
		want       uint64
		err        string
	}{
		{"plain command", "42 (sleep)" + tail, 987654, ""},
		{"a command name with spaces and a parenthesis", "42 (a) b c)" + tail, 987654, ""},
		{"too few fields", "42 (sleep) S 1 42", 0, "fields after the command name"},
		{"not a number", "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 soon 1000", 0, `starttime "soon"`},
		{"no command name", "garbage", 0, "no command name"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseStatStartTime(strings.NewReader(tc.stat))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseStatStartTime = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestProcStartTime(t *testing.T) {
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "42"), 0o755)
	if err := os.WriteFile(filepath.Join(proc, "42", "stat"), []byte("42 (x) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 1 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ProcStartTime(proc, 42); err != nil || got != 555 {
		t.Errorf("ProcStartTime(42) = %d, %v; want 555", got, err)
	}
	if _, err := ProcStartTime(proc, 43); err == nil {
		t.Error("ProcStartTime of a missing process: no error")
	}
	if _, err := ProcStartTime(ProcMount, os.Getpid()); err != nil {
		t.Errorf("ProcStartTime of this process: %v", err)
	}
}

func TestParseStatusCtxSwitches(t *testing.T) {
	in := "Name:\tsh\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n"
	c, err := ParseStatusCtxSwitches(strings.NewReader(in))
	if err != nil || c.Voluntary != 1234 || c.Involuntary != 56 {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []string{"Name:\tsh\n", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n"} {
		if _, err := ParseStatusCtxSwitches(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestCgroupThreadsV2AndV1(t *testing.T) {
	v2, v1 := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.threads"), []byte("10\n11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v1, "tasks"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := CgroupThreads(v2); err != nil || len(got) != 2 || got[1] != 11 {
		t.Errorf("v2: %v, %v", got, err)
	}
	if got, err := CgroupThreads(v1); err != nil || len(got) != 1 || got[0] != 7 {
		t.Errorf("v1: %v, %v", got, err)
	}
	if _, err := CgroupThreads(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tasks") {
		t.Errorf("empty dir: %v", err)
	}
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "11"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "11", "status"), []byte("voluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := TaskCtxSwitches(proc, 11); err != nil || c.Voluntary != 3 || c.Involuntary != 4 {
		t.Errorf("task 11: %+v, %v", c, err)
	}
	if _, err := TaskCtxSwitches(proc, 12); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone task: %v, want ErrNotExist", err)
	}
}

type esrchReader struct{}

func (esrchReader) Read([]byte) (int, error) { return 0, syscall.ESRCH }

func TestTaskCtxSwitchesExitedBetweenOpenAndRead(t *testing.T) {
	_, err := taskCtxSwitches("/proc/42/status", esrchReader{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/proc/42/status: task exited") {
		t.Fatalf("err = %v, want a gone task", err)
	}
}

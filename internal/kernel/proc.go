package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ProcAlive says whether process pid exists under procRoot and is not a
// zombie (or dead) waiting to be reaped: the state in <pid>/stat, the field
// after the parenthesised command name, which may hold spaces and ')'.
func ProcAlive(procRoot string, pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	return parseStatAlive(b)
}

// parseStatAlive reads the state of a /proc/PID/stat line; a line it
// cannot read counts as alive.
func parseStatAlive(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// ProcStartTime is when process pid started, in clock ticks after boot
// (field 22 of <procRoot>/<pid>/stat). With the pid it names one process
// for the life of the machine: a reused pid has another start time.
func ProcStartTime(procRoot string, pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("start time of pid %d: not a process id", pid)
	}
	p := filepath.Join(procRoot, strconv.Itoa(pid), "stat")
	f, err := os.Open(p)
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d: %w", pid, err)
	}
	defer f.Close()
	t, err := parseStatStartTime(f)
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d from %s: %w", pid, p, err)
	}
	return t, nil
}

// parseStatStartTime reads the starttime field of a /proc/PID/stat line:
// the 20th field after the parenthesised command name, which may itself
// hold spaces and ')'.
func parseStatStartTime(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(f) <= idx {
		return 0, fmt.Errorf("%d fields after the command name, want at least %d", len(f), idx+1)
	}
	t, err := strconv.ParseUint(f[idx], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("starttime %q: %w", f[idx], err)
	}
	return t, nil
}

// CtxSwitches are a task's context switches since it started, from the
// voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines of
// /proc/<tid>/status.
type CtxSwitches struct {
	Voluntary, Involuntary uint64
}

// ParseStatusCtxSwitches reads the context switch counters of a status file.
func ParseStatusCtxSwitches(r io.Reader) (CtxSwitches, error) {
	var c CtxSwitches
	var haveV, haveI bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "voluntary_ctxt_switches":
			dst, haveV = &c.Voluntary, true
		case "nonvoluntary_ctxt_switches":
			dst, haveI = &c.Involuntary, true
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s: %q is not a count", k, strings.TrimSpace(v))
		}
		*dst = n
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if !haveV || !haveI {
		return c, errors.New("no voluntary_ctxt_switches / nonvoluntary_ctxt_switches lines")
	}
	return c, nil
}

// TaskCtxSwitches reads <procRoot>/<tid>/status of one task (a thread ID:
// /proc/<tid> answers for threads too, and its status counts that thread
// alone). A task that is gone, before the open or between open and read
// (ESRCH), is an error wrapping fs.ErrNotExist.
func TaskCtxSwitches(procRoot string, tid int) (CtxSwitches, error) {
	p := filepath.Join(procRoot, strconv.Itoa(tid), "status")
	f, err := os.Open(p)
	if err != nil {
		return CtxSwitches{}, err
	}
	defer f.Close()
	return taskCtxSwitches(p, f)
}

// taskCtxSwitches parses the status file p read from r.
func taskCtxSwitches(p string, r io.Reader) (CtxSwitches, error) {
	c, err := ParseStatusCtxSwitches(r)
	if errors.Is(err, syscall.ESRCH) {
		// The task exited between open and read: gone, like a missing file.
		return c, fmt.Errorf("read %s: task exited: %w", p, fs.ErrNotExist)
	}
	if err != nil {
		return c, fmt.Errorf("parse %s: %w", p, err)
	}
	return c, nil
}

// CgroupThreads lists the thread IDs of a cgroup directory: cgroup.threads
// on v2, tasks on v1 (both list every thread of the cgroup itself, not of
// its children).
func CgroupThreads(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.threads"))
	if errors.Is(err, os.ErrNotExist) {
		b, err = os.ReadFile(filepath.Join(dir, "tasks"))
	}
	if err != nil {
		return nil, fmt.Errorf("threads of cgroup %s: %w", dir, err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("threads of cgroup %s: %q is not a thread ID", dir, f)
		}
		out = append(out, n)
	}
	return out, nil
}

package daemon

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctrperf/internal/kernel"
)

// procCmdline is a process's argv joined by spaces, "" if it is gone.
func procCmdline(fs kernel.FS, pid int) string {
	argv, err := fs.Cmdline(pid)
	if err != nil {
		return ""
	}
	return strings.Join(argv, " ")
}

// procAlive: exists and is not a zombie waiting to be reaped.
func procAlive(fs kernel.FS, pid int) bool { return kernel.ProcAlive(fs.Proc(), pid) }

// ownedPID returns pid if it is alive and its command line contains mark
// (our socket or exec-root), so a recycled PID is never signalled.
func ownedPID(fs kernel.FS, pid int, mark string) bool {
	return procAlive(fs, pid) && strings.Contains(procCmdline(fs, pid), mark)
}

// pidsMatching lists live processes whose command line contains mark.
func pidsMatching(fs kernel.FS, mark string) []int {
	pids, _ := fs.PIDs()
	var out []int
	for _, pid := range pids {
		if pid != os.Getpid() && ownedPID(fs, pid, mark) {
			out = append(out, pid)
		}
	}
	return out
}

// stopPID sends SIGTERM, waits up to wait for the process to go, then
// SIGKILLs it. It reports whether the process had to be killed.
func stopPID(fs kernel.FS, pid int, wait time.Duration) (killed bool) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(fs, pid, wait) {
		return false
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(fs, pid, 5*time.Second)
	return true
}

func waitGone(fs kernel.FS, pid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if !procAlive(fs, pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !procAlive(fs, pid)
}

func readPIDFile(p string) int {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

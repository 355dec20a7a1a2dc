package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctrperf/internal/kernel"
)

// procCmdline is a process's argv joined by spaces, "" if it is gone.
func procCmdline(procRoot string, pid int) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
}

// procAlive: exists and is not a zombie waiting to be reaped.
func procAlive(procRoot string, pid int) bool { return kernel.ProcAlive(procRoot, pid) }

// ownedPID returns pid if it is alive and its command line contains mark
// (our socket or exec-root), so a recycled PID is never signalled.
func ownedPID(procRoot string, pid int, mark string) bool {
	return procAlive(procRoot, pid) && strings.Contains(procCmdline(procRoot, pid), mark)
}

// pidsMatching lists live processes whose command line contains mark.
func pidsMatching(procRoot, mark string) []int {
	ents, _ := os.ReadDir(procRoot)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ownedPID(procRoot, pid, mark) {
			out = append(out, pid)
		}
	}
	return out
}

// stopPID sends SIGTERM, waits up to wait for the process to go, then
// SIGKILLs it. It reports whether the process had to be killed.
func stopPID(procRoot string, pid int, wait time.Duration) (killed bool) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(procRoot, pid, wait) {
		return false
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(procRoot, pid, 5*time.Second)
	return true
}

func waitGone(procRoot string, pid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if !procAlive(procRoot, pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !procAlive(procRoot, pid)
}

func readPIDFile(p string) int {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

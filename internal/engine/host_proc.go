package engine

// The host runtime's processes: which PIDs are still the run's (PID reuse
// guards), signalling process groups, and waiting for them to go.

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctrperf/internal/kernel"
)

// ownedProcess guards against PID reuse: a recorded PID is only signalled
// while it is still in the run's cgroup or still the joining shell.
func (h *BareMetal) ownedProcess(pid int, marker string) bool {
	paths, err := kernel.ProcCgroups(h.kernel.Proc(), pid)
	if err != nil {
		return false
	}
	for _, p := range paths {
		if strings.Contains(p, marker) {
			return true
		}
	}
	argv, err := h.kernel.Cmdline(pid)
	return err == nil && strings.Contains(strings.Join(argv, "\x00"), joinArg0)
}

func (h *BareMetal) livePids(st hostState, marker string) []int {
	var pids []int
	for _, s := range st.Services {
		for _, g := range s.Cgroups {
			pids = append(pids, readPids(filepath.Join(g, "cgroup.procs"))...)
		}
		if s.PID > 0 && h.ownedProcess(s.PID, marker) && !isZombie(h.kernel, s.PID) {
			pids = append(pids, s.PID)
		}
	}
	return dedupe(pids)
}

func (h *BareMetal) waitGone(ctx context.Context, st hostState, done map[string]chan struct{}, marker string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		reaped := true
		for _, ch := range done {
			select {
			case <-ch:
			default:
				reaped = false
			}
		}
		if reaped && len(h.livePids(st, marker)) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func signalAll(services []hostServiceS, pids []int, sig syscall.Signal) {
	for _, s := range services {
		if s.PID > 0 && slicesContains(pids, s.PID) {
			_ = syscall.Kill(-s.PID, sig) // the whole process group
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func readPids(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parsePids(f)
}

func parsePids(r io.Reader) []int {
	var out []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && p > 0 {
			out = append(out, p)
		}
	}
	return out
}

func dedupe(p []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range p {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// isZombie: gone, or a zombie waiting to be reaped, counts as not alive.
func isZombie(fs kernel.FS, pid int) bool { return !kernel.ProcAlive(fs.Proc(), pid) }

func isMountPoint(fs kernel.FS, dir string) bool {
	mounts, err := kernel.Mounts(fs.Proc())
	return err == nil && kernel.IsMountPoint(mounts, dir)
}

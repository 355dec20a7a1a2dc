package engine

// The host runtime's state file, written before anything it names is
// created, and the undoing of a run from it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"ctrperf/internal/fsutil"
)

// hostState is what a host run leaves on disk so that `ctrperf clean` can
// undo it after SIGKILL.
type hostState struct {
	RunID    string         `json:"run_id"`
	DataDir  string         `json:"data_dir"` // <dataRoot>/<run>, removed whole
	Cgroups  []string       `json:"cgroups"`  // directories, removed deepest first
	Services []hostServiceS `json:"services"`
}

type hostServiceS struct {
	Name    string   `json:"name"`
	PID     int      `json:"pid,omitempty"`
	Cgroups []string `json:"cgroups"`         // the service's own groups (cgroup.procs is read from each)
	Mount   string   `json:"mount,omitempty"` // tmpfs mount point
}

// hostRun is the host runtime's bookkeeping in Target.Private.
type hostRun struct {
	mu    sync.Mutex
	state hostState
	env   map[string][]string // per service: environment of the process
	dirs  map[string]string   // per service: data directory
	cgs   map[string][]string // per service: cgroup.procs files
	done  map[string]chan struct{}
	admit bool // an admit chain was (being) installed: teardown removes it
}

func (h *BareMetal) statePath(runID string) string { return filepath.Join(h.stateDir, runID+".json") }

func (h *BareMetal) saveState(r *hostRun) error {
	r.mu.Lock()
	b, err := json.MarshalIndent(r.state, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.stateDir, 0o755); err != nil {
		return fmt.Errorf("host state dir: %w", err)
	}
	if err := fsutil.WriteFileAtomic(h.statePath(r.state.RunID), b, 0o644); err != nil {
		return fmt.Errorf("write host state: %w", err)
	}
	return nil
}

func (h *BareMetal) loadState(path string) (hostState, error) {
	var st hostState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("host run state %s: %w", path, err)
	}
	if st.RunID == "" || !nameRe.MatchString(st.RunID) {
		return st, fmt.Errorf("host run state %s: bad run id %q", path, st.RunID)
	}
	return st, nil
}

// cleanStates undoes host runs from their state files (runID "" = all).
func (h *BareMetal) cleanStates(ctx context.Context, runID string, dry bool, own *Ownership) ([]string, error) {
	var paths []string
	if runID != "" {
		paths = []string{h.statePath(runID)}
	} else {
		ps, err := filepath.Glob(filepath.Join(h.stateDir, "*.json"))
		if err != nil {
			return nil, err
		}
		paths = ps
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		st, err := h.loadState(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if own.Keep("host run "+st.RunID+" (processes, cgroups, mounts, data)", st.RunID) {
			continue
		}
		r, err := h.destroy(ctx, st, dry, nil)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// destroy undoes one host run. done, when known, are the reapers of the
// processes this process started.
func (h *BareMetal) destroy(ctx context.Context, st hostState, dry bool, done map[string]chan struct{}) ([]string, error) {
	var removed []string
	var errs []error
	marker := "/" + filepath.Join(NamePrefix, st.RunID) + "/"
	var pids []int
	for _, s := range st.Services {
		for _, g := range s.Cgroups {
			pids = append(pids, readPids(filepath.Join(g, "cgroup.procs"))...)
		}
		if s.PID > 0 && h.ownedProcess(s.PID, marker) {
			pids = append(pids, s.PID)
		}
	}
	pids = dedupe(pids)
	if len(pids) > 0 {
		removed = append(removed, fmt.Sprintf("host processes %v of run %s", pids, st.RunID))
	}
	if !dry && len(pids) > 0 {
		signalAll(st.Services, pids, syscall.SIGTERM)
		if !h.waitGone(ctx, st, done, marker, stopGrace) {
			signalAll(st.Services, h.livePids(st, marker), syscall.SIGKILL)
			if !h.waitGone(ctx, st, done, marker, stopGrace) {
				errs = append(errs, fmt.Errorf("host run %s: processes %v survive SIGKILL", st.RunID, h.livePids(st, marker)))
			}
		}
	}
	for _, s := range st.Services {
		if s.Mount == "" || !isMountPoint(h.kernel, s.Mount) {
			continue
		}
		if !dry {
			if err := unix.Unmount(s.Mount, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount tmpfs %s: %w", s.Mount, err))
				continue
			}
		}
		removed = append(removed, "tmpfs "+s.Mount)
	}
	// Deepest first: service groups before the run's groups.
	cgs := append([]string(nil), st.Cgroups...)
	sortByDepthDesc(cgs)
	for _, g := range cgs {
		if _, err := os.Stat(g); err != nil {
			continue
		}
		if !dry {
			if err := os.Remove(g); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", g, err))
				continue
			}
		}
		removed = append(removed, "cgroup "+g)
	}
	if st.DataDir != "" {
		if _, err := os.Lstat(st.DataDir); err == nil {
			if !dry {
				if err := os.RemoveAll(st.DataDir); err != nil {
					errs = append(errs, fmt.Errorf("remove host data %s: %w", st.DataDir, err))
				}
			}
			removed = append(removed, "host data "+st.DataDir)
		}
	}
	if !dry && len(errs) == 0 {
		if err := os.Remove(h.statePath(st.RunID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove host state: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

func sortByDepthDesc(p []string) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && strings.Count(p[j], "/") > strings.Count(p[j-1], "/"); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// List is the guests recorded in runDir (one guest.json per directory).
func List(runDir string) ([]State, error) {
	dirs, err := filepath.Glob(filepath.Join(runDir, "ctrperf-vm-*"))
	if err != nil {
		return nil, err
	}
	var out []State
	var errs []error
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, stateFile))
		if errors.Is(err, os.ErrNotExist) {
			// A boot that died before it wrote its state: only its name.
			out = append(out, State{Name: filepath.Base(d), Dir: d})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var s State
		if err := json.Unmarshal(b, &s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(d, stateFile), err))
			continue
		}
		s.Dir = d // where it is now, whatever it says
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// Cleaner sweeps the guests a dead session left: QEMU killed by its pid
// file (only when that pid's command line names the guest), its tap,
// overlay, socket and run directory removed.
type Cleaner struct {
	RunDir, DataDir string
	// ProcRoot is where a pid's command line is read (/proc).
	ProcRoot string
	// Keep says whether a guest's owner lives (a live session's guest is
	// left alone); what describes the guest.
	Keep func(what string, s State) bool
	// DryRun lists what would go.
	DryRun bool
}

// Clean removes the guests of runID ("" for every run) that Keep does not
// keep, and the overlays no guest's state names.
func (c Cleaner) Clean(ctx context.Context, runID string) ([]string, error) {
	states, err := List(c.RunDir)
	errs := []error{err}
	var removed []string
	named := map[string]bool{}
	for _, s := range states {
		named[s.Name] = true
		if runID != "" && s.RunID != runID {
			continue
		}
		pid := qemuPID(s, c.ProcRoot)
		what := fmt.Sprintf("VM guest %s (run %s, QEMU pid %d, tap %s)", s.Name, s.RunID, pid, s.Tap)
		if pid == 0 {
			what = fmt.Sprintf("VM guest %s (run %s, QEMU gone, tap %s)", s.Name, s.RunID, s.Tap)
		}
		if c.Keep != nil && c.Keep(what, s) {
			continue
		}
		if !c.DryRun {
			if pid != 0 {
				if err := killWait(ctx, pid, c.ProcRoot); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", what, err))
					continue
				}
			}
			// virtiofsd ends with QEMU's connection; one whose QEMU never
			// connected does not.
			if vpid := virtiofsdPID(s, c.ProcRoot); vpid != 0 {
				if err := killWait(ctx, vpid, c.ProcRoot); err != nil {
					errs = append(errs, fmt.Errorf("%s: virtiofsd: %w", what, err))
					continue
				}
			}
			if s.DataDir == "" {
				s.DataDir = filepath.Join(c.DataDir, s.Name)
			}
			if err := removeGuest(s); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed = append(removed, what)
	}
	if runID == "" {
		// Overlays of guests whose state is gone (a clean cut short).
		dirs, _ := filepath.Glob(filepath.Join(c.DataDir, "ctrperf-vm-*"))
		for _, d := range dirs {
			if named[filepath.Base(d)] {
				continue
			}
			if !c.DryRun {
				if err := os.RemoveAll(d); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			removed = append(removed, "VM guest overlay "+d)
		}
	}
	return removed, errors.Join(errs...)
}

// killWait sends SIGKILL to pid and waits until it is gone (QEMU holds
// its tap and overlay until then, virtiofsd the shared directory).
func killWait(ctx context.Context, pid int, procRoot string) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
		// Gone, or a zombie its dead parent's reaper has not taken yet.
		if err != nil || zombie(string(b)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d still runs 10 s after SIGKILL", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// zombie says whether a /proc/PID/stat line is of a zombie.
func zombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(stat[i+1:]), "Z")
}

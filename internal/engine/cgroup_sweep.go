package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"ctrperf/internal/kernel"
)

// NestedCgroupPrefix starts the name of a nested engine's group below
// ctrperf's (ctrperf/ctrperf-nested-<driver>-<run>): it holds the outer
// container and every inner one.
const NestedCgroupPrefix = NamePrefix + "-nested-"

// cgroupDirs are the directories of group rel (a path like
// /ctrperf/x) in every v1 hierarchy and in the unified one, each once
// (co-mounted hierarchies are reached through symlinks too).
func cgroupDirs(kern kernel.FS, rel string) []string {
	rel = strings.TrimPrefix(rel, "/")
	var out []string
	seen := map[string]bool{}
	cands, _ := filepath.Glob(kern.Cgroup("*", rel))
	cands = append(cands, kern.Cgroup(rel))
	for _, d := range cands {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || seen[real] {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			continue
		}
		seen[real] = true
		out = append(out, d)
	}
	return out
}

// RemoveEmptyCgroups removes group rel and every group below it, in every
// hierarchy, deepest first, when no process is left in any of them (a
// group that still holds one is an error naming it, and it stays with its
// parents). It returns the groups removed.
func RemoveEmptyCgroups(kern kernel.FS, rel string) ([]string, error) {
	var removed []string
	var errs []error
	for _, top := range cgroupDirs(kern, rel) {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if pids := readPids(filepath.Join(d, "cgroup.procs")); len(pids) > 0 {
				errs = append(errs, fmt.Errorf("cgroup %s still holds processes %v", d, pids))
				break
			}
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			removed = append(removed, "cgroup "+d)
		}
	}
	return removed, errors.Join(errs...)
}

// holdsProcesses says whether group rel or any group below it, in any
// hierarchy, has a process.
func holdsProcesses(kern kernel.FS, rel string) bool {
	busy := false
	for _, top := range cgroupDirs(kern, rel) {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && len(readPids(filepath.Join(p, "cgroup.procs"))) > 0 {
				busy = true
				return filepath.SkipAll
			}
			return nil
		})
	}
	return busy
}

// cleanNestedCgroups removes the groups of nested engines that hold no
// process any more (the outer container is gone: a run killed before it
// could remove them). A group with processes is a live engine's, whatever
// run is cleaned; an empty one is no one's.
func cleanNestedCgroups(kern kernel.FS, dry bool) ([]string, error) {
	var names []string
	for _, pattern := range []string{
		kern.Cgroup("*", NamePrefix, NestedCgroupPrefix+"*"),
		kern.Cgroup(NamePrefix, NestedCgroupPrefix+"*"),
	} {
		m, _ := filepath.Glob(pattern)
		for _, d := range m {
			if n := filepath.Base(d); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	var removed []string
	var errs []error
	for _, n := range names {
		rel := "/" + NamePrefix + "/" + n
		if holdsProcesses(kern, rel) {
			continue
		}
		if dry {
			for _, d := range cgroupDirs(kern, rel) {
				removed = append(removed, "cgroup "+d)
			}
			continue
		}
		r, err := RemoveEmptyCgroups(kern, rel)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

package engine

// The host runtime's cgroups: one group per service and controller, made
// level by level, every write through kernel.WriteFile.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ctrperf/internal/kernel"
)

// v1Controllers are the cgroup v1 hierarchies a host service gets a group in.
var v1Controllers = []string{"cpu", "cpuacct", "memory", "cpuset", "blkio"}

// cgroups is the layout under the cgroup root, detected on first use.
func (h *BareMetal) cgroups() kernel.Layout { return h.kernel.Cgroups() }

// cgroupV2 reports whether the cgroup root is a unified (v2) hierarchy.
func (h *BareMetal) cgroupV2() bool { return h.cgroups().Mode == kernel.V2 }

// cgroupDirs lists a service's group directories (one per v1 controller
// that is mounted, or one unified), the run-level parents, and the path
// observers use (relative to a controller's root).
func (h *BareMetal) cgroupDirs(runID, svc string) (groups, runGroups []string, rel string, err error) {
	rel = "/" + filepath.Join(NamePrefix, runID, svc)
	if h.cgroupV2() {
		return []string{h.kernel.Cgroup(rel)}, []string{h.kernel.Cgroup(NamePrefix, runID)}, rel, nil
	}
	seen := map[string]bool{}
	for _, c := range v1Controllers {
		root := h.kernel.Cgroup(c)
		real, err := filepath.EvalSymlinks(root)
		if err != nil || seen[real] {
			continue // not mounted, or co-mounted with one already listed
		}
		seen[real] = true
		groups = append(groups, filepath.Join(root, rel))
		runGroups = append(runGroups, filepath.Join(root, NamePrefix, runID))
	}
	if len(groups) == 0 {
		return nil, nil, "", fmt.Errorf("no cgroup controllers under %s", h.kernel.Cgroup())
	}
	return groups, runGroups, rel, nil
}

// cgroupWrite is one file a cgroup gets written.
type cgroupWrite struct {
	File, Value string
}

// resourceWrites turns Resources into cgroup file writes for a hierarchy
// (v1 controller name, or "" for v2). Pure.
func resourceWrites(controller string, v2 bool, res Resources) []cgroupWrite {
	var w []cgroupWrite
	const period = 100000
	if v2 {
		if res.CPUSet != "" {
			w = append(w, cgroupWrite{"cpuset.cpus", res.CPUSet})
		}
		if res.CPUShares > 0 {
			// The same conversion runc uses from shares [2,262144] to weight [1,10000].
			weight := 1 + ((res.CPUShares-2)*9999)/262142
			w = append(w, cgroupWrite{"cpu.weight", strconv.FormatInt(weight, 10)})
		}
		if res.CPUs > 0 {
			w = append(w, cgroupWrite{"cpu.max", fmt.Sprintf("%d %d", int64(res.CPUs*period), period)})
		}
		if res.MemoryBytes > 0 {
			w = append(w, cgroupWrite{"memory.max", strconv.FormatInt(res.MemoryBytes, 10)})
		}
		return w
	}
	switch controller {
	case "cpuset":
		if res.CPUSet != "" {
			w = append(w, cgroupWrite{"cpuset.cpus", res.CPUSet})
		}
	case "cpu":
		if res.CPUShares > 0 {
			w = append(w, cgroupWrite{"cpu.shares", strconv.FormatInt(res.CPUShares, 10)})
		}
		if res.CPUs > 0 {
			w = append(w, cgroupWrite{"cpu.cfs_period_us", strconv.Itoa(period)}, cgroupWrite{"cpu.cfs_quota_us", strconv.FormatInt(int64(res.CPUs*period), 10)})
		}
	case "memory":
		if res.MemoryBytes > 0 {
			w = append(w, cgroupWrite{"memory.limit_in_bytes", strconv.FormatInt(res.MemoryBytes, 10)})
		}
	}
	return w
}

// makeCgroups creates the groups, makes cpuset usable at every level,
// applies the resources and returns the cgroup.procs files to join.
func (h *BareMetal) makeCgroups(groups, runGroups []string, res Resources) ([]string, error) {
	v2 := h.cgroupV2()
	var procs []string
	for _, g := range groups {
		controller := ""
		if !v2 {
			rel, err := filepath.Rel(h.kernel.Cgroup(), g)
			if err != nil {
				return nil, err
			}
			controller = strings.SplitN(rel, string(filepath.Separator), 2)[0]
		}
		// Create level by level: a new cpuset group starts with empty cpus
		// and mems and takes no task until they are set from its parent.
		top := h.kernel.Cgroup(controller)
		parts := strings.Split(strings.TrimPrefix(g, top+string(filepath.Separator)), string(filepath.Separator))
		cur := top
		for _, p := range parts {
			parent := cur
			cur = filepath.Join(cur, p)
			if v2 {
				if err := enableV2Controllers(parent); err != nil {
					return nil, err
				}
			}
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("create cgroup %s: %w", cur, err)
			}
			if controller == "cpuset" || v2 {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := inheritIfEmpty(parent, cur, f); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, w := range resourceWrites(controller, v2, res) {
			if err := kernel.WriteFile(g, w.File, w.Value); err != nil {
				return nil, err
			}
		}
		procs = append(procs, filepath.Join(g, "cgroup.procs"))
	}
	return procs, nil
}

// inheritIfEmpty copies a cpuset file from parent when child's is empty.
// A missing file (v2 without the cpuset controller) is not an error.
func inheritIfEmpty(parent, child, file string) error {
	cur, err := kernel.ReadFile(child, file)
	if err != nil || cur != "" {
		return nil
	}
	val, err := kernel.ReadFile(parent, file)
	if errors.Is(err, os.ErrNotExist) {
		val, err = kernel.ReadFile(parent, file+".effective")
	}
	if err != nil {
		return err
	}
	if val == "" {
		return nil
	}
	return kernel.WriteFile(child, file, val)
}

// enableV2Controllers delegates the controllers ctrperf uses to children.
func enableV2Controllers(dir string) error {
	avail, err := kernel.ReadFile(dir, "cgroup.controllers")
	if err != nil {
		return nil
	}
	var want []string
	for _, c := range strings.Fields(avail) {
		switch c {
		case "cpu", "cpuset", "memory", "io":
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	return kernel.WriteFile(dir, "cgroup.subtree_control", strings.Join(want, " "))
}

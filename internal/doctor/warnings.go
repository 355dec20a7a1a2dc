package doctor

import (
	"fmt"
	"strings"
)

// seedDrivers are the storage drivers the experiments compare; doctor warns
// when one of them cannot run here. Others (zfs, aufs, ...) are only listed.
var seedDrivers = map[string]bool{"overlay2": true, "btrfs": true, "devicemapper": true, "vfs": true}

// Warnings turns facts into advice. Pure: a function of Facts only.
func Warnings(f *Facts) []string {
	var w []string
	if f.Irqbalance {
		w = append(w, "irqbalance is running: it rewrites IRQ affinity behind ctrperf isolate's back; stop it (systemctl stop irqbalance) before ctrperf isolate, or run isolate without IRQ steering")
	} else {
		w = append(w, "irqbalance not running: fine for ctrperf isolate (it places IRQs itself); plain bench runs keep the kernel's default IRQ placement")
	}
	if !f.Docker.Answers {
		if f.Docker.Dockerd != "" {
			w = append(w, fmt.Sprintf("no Docker engine answers at %s: ctrperf will start a private one (%s)", f.Docker.Host, f.Docker.Dockerd))
		} else {
			w = append(w, fmt.Sprintf("no Docker engine answers at %s and dockerd is not installed: install Debian package docker.io (make bootstrap)", f.Docker.Host))
		}
	}
	for _, d := range f.StorageDrivers {
		if seedDrivers[d.Driver] && len(d.DataRoots) == 0 {
			w = append(w, d.Reason)
		}
	}
	if !f.LoopDevices.Usable && f.LoopDevices.Reason != "" {
		w = append(w, "loop data roots unavailable: "+f.LoopDevices.Reason)
	}
	if f.CPU.Governor != "" && f.CPU.Governor != "performance" {
		w = append(w, fmt.Sprintf("cpufreq governor is %s: frequency scaling adds noise; set performance (cpupower frequency-set -g performance)", f.CPU.Governor))
	}
	if f.CPU.ThreadsPerCore > 1 {
		w = append(w, fmt.Sprintf("SMT is on (%d threads per core): siblings share a core; give cpusets whole cores or results mix both", f.CPU.ThreadsPerCore))
	}
	if f.CPU.NUMANodes > 1 {
		w = append(w, fmt.Sprintf("%d NUMA nodes: keep a workload and its load generator on one node (cpuset) or memory placement adds variance", f.CPU.NUMANodes))
	}
	if f.CPU.Count > 0 && f.CPU.Count < 2 {
		w = append(w, "only 1 CPU online: ctrperf isolate needs at least 2 to keep a quiet container apart")
	}
	if f.Cgroups.Version == "v2" {
		w = append(w, "cgroup v2 only: the Docker 20.10 engine supports it, but check your kernel allows the cpuset controller in cgroup.subtree_control")
	}
	// One warning for every missing package: which plan needs which is
	// said plan by plan (ctrperf doctor's plans), so that a machine set up
	// for one purpose (make demo installs the engine alone) is not a
	// screenful of warnings.
	var missing []Tool
	var names []string
	for _, t := range f.Tools {
		if t.Path == "" {
			missing = append(missing, t)
			names = append(names, t.Name+" ("+t.Package+")")
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		t := missing[0]
		w = append(w, fmt.Sprintf("%s not found: install Debian package %s (needed for %s)", t.Name, t.Package, t.For))
	default:
		w = append(w, fmt.Sprintf("%d tools not found: %s; each plan below says which it needs, make bootstrap installs them all", len(missing), strings.Join(names, ", ")))
	}
	return w
}

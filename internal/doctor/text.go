package doctor

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText renders facts for a person at a terminal.
func (f *Facts) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	p("kernel", "%s", f.Kernel)
	cg := f.Cgroups.Version + " (" + strings.Join(f.Cgroups.Controllers, ", ") + ")"
	if f.Cgroups.Version == "hybrid" {
		cg += fmt.Sprintf("; cgroup2 at %s with %d controllers", f.Cgroups.V2Mount, len(f.Cgroups.V2Controllers))
	}
	p("cgroups", "%s", cg)
	p("cpus", "%d online (%s), %d NUMA node(s), %d thread(s) per core, SMT %s", f.CPU.Count, f.CPU.Online, f.CPU.NUMANodes, f.CPU.ThreadsPerCore, orNone(f.CPU.SMT))
	p("cpufreq governor", "%s", orNone(f.CPU.Governor))
	p("irqbalance", "%s", map[bool]string{true: "running", false: "not running"}[f.Irqbalance])
	if f.Docker.Answers {
		p("docker engine", "%s at %s", f.Docker.Version, f.Docker.Host)
		p("  storage driver", "%s on %s (%s)", f.Docker.StorageDriver, orNone(f.Docker.BackingFS), f.Docker.DataRoot)
		p("  userland proxy", "%s", boolText(f.Docker.UserlandProxy))
		p("  iptables", "%s", boolText(f.Docker.IPTables))
		p("  cgroup driver", "%s", f.Docker.CgroupDriver)
	} else {
		p("docker engine", "no engine answers at %s: ctrperf will start a private one", f.Docker.Host)
	}
	for i, d := range f.StorageDrivers {
		k := ""
		if i == 0 {
			k = "storage drivers"
		}
		if len(d.DataRoots) > 0 {
			p(k, "%-15s usable on data_root: %s", d.Driver, strings.Join(d.DataRoots, ", "))
		} else {
			p(k, "%-15s no: %s", d.Driver, d.Reason)
		}
	}
	for i, c := range append(f.LoopFilesystems, f.LoopDevices) {
		k := ""
		if i == 0 {
			k = "loop data roots"
		}
		if c.Usable {
			p(k, "%-15s yes", c.Name)
		} else {
			p(k, "%-15s no: %s", c.Name, c.Reason)
		}
	}
	for i, c := range f.MountOptions {
		k := ""
		if i == 0 {
			k = "mount options"
		}
		if c.Usable {
			p(k, "%-20s yes", c.Name)
		} else {
			p(k, "%-20s no: %s", c.Name, c.Reason)
		}
	}
	if f.Privileged.Usable {
		p("privileged", "available (dockerd holds every capability)")
	} else if f.Privileged.Reason != "" {
		p("privileged", "not available: %s", f.Privileged.Reason)
	}
	f.VMGuest.write(p)
	if f.VM.Usable {
		p("vm runtime", "available (accel: kvm and tcg)")
	} else if f.VM.Reason != "" {
		p("vm runtime", "accel: kvm not available: %s", f.VM.Reason)
		if f.VMGuest.TCG.Usable {
			p("", "accel: tcg available (emulated CPU: the mechanism, not a performance comparison)")
		} else if f.VMGuest.TCG.Reason != "" {
			p("", "accel: tcg not available: %s", f.VMGuest.TCG.Reason)
		}
	}
	if f.Podman.Usable {
		p("podman runtime", "available: %s", f.Podman.Reason)
	} else if f.Podman.Reason != "" {
		p("podman runtime", "not available: %s", f.Podman.Reason)
	}
	f.writeKube(tw)
	for i, t := range f.Tools {
		k := ""
		if i == 0 {
			k = "tools"
		}
		p(k, "%-15s %s", t.Name, orText(t.Path, "missing (apt-get install "+t.Package+")"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range f.Errors {
		fmt.Fprintln(w, "error:", e)
	}
	for _, x := range f.Warnings {
		if _, err := fmt.Fprintln(w, "warning:", x); err != nil {
			return err
		}
	}
	return nil
}

func orNone(s string) string { return orText(s, "none") }

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func boolText(b *bool) string {
	if b == nil {
		return "unknown (dockerd is not a local process)"
	}
	if *b {
		return "on"
	}
	return "off"
}

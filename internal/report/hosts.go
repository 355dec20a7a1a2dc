package report

import (
	"fmt"
	"html/template"
	"slices"
	"strings"

	"ctrperf/internal/results"
)

// The hosts of a two-host plan (hosts:) in the environment block: each host
// as its agent described it in OUT/env.json, beside this machine, one column
// each, with the roles it played and the configurations that used it.

// OneKernel is what the report says of hosts that share one kernel (the
// lab's namespaces of one machine).
const OneKernel = "hosts on one kernel prove the mechanism, not cross-machine performance"

// HostUse is a host of the runs: what OUT/env.json says of it and the
// configurations whose runs used it.
type HostUse struct {
	results.HostInfo
	Configs []string `json:"configs,omitempty"`
}

// addRunHosts notes the hosts a record names for configuration name.
func (e *Environment) addRunHosts(h *results.RunHosts, name string) {
	if h == nil {
		return
	}
	for _, r := range []struct {
		role string
		host *results.RunHost
	}{{results.RoleSUT, h.SUT}, {results.RoleLoad, h.Load}} {
		if r.host.Local() {
			e.localRoles = appendNew(e.localRoles, r.role)
			e.localConfigs = appendNew(e.localConfigs, name)
			continue
		}
		u := e.host(r.host.Name)
		if u.Dest == "" {
			u.Dest = r.host.Dest
		}
		if u.Hostname == "" {
			u.Hostname = r.host.Hostname
		}
		u.Roles = appendNew(u.Roles, r.role)
		u.Configs = appendNew(u.Configs, name)
	}
}

// host is the host named name, added when new.
func (e *Environment) host(name string) *HostUse {
	i := slices.IndexFunc(e.Hosts, func(u HostUse) bool { return u.Name == name })
	if i < 0 {
		e.Hosts = append(e.Hosts, HostUse{HostInfo: results.HostInfo{RunHost: results.RunHost{Name: name}}})
		i = len(e.Hosts) - 1
	}
	return &e.Hosts[i]
}

// addEnvHosts adds what OUT/env.json knows of each host.
func (e *Environment) addEnvHosts(hosts []results.HostInfo) {
	for _, h := range hosts {
		u := e.host(h.Name)
		roles, configs, dest := u.Roles, u.Configs, u.Dest
		u.HostInfo = h
		for _, r := range roles {
			u.Roles = appendNew(u.Roles, r)
		}
		u.Configs = configs
		if u.Dest == "" {
			u.Dest = dest
		}
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// SameKernel says two of the hosts, or a host and this machine, share one
// boot id: one kernel, not separate machines.
func (e *Environment) SameKernel() bool {
	if e == nil || len(e.Hosts) == 0 {
		return false
	}
	all := make([]results.HostInfo, 0, len(e.Hosts)+1)
	for _, u := range e.Hosts {
		all = append(all, u.HostInfo)
	}
	if e.Machine != nil {
		all = append(all, results.HostInfo{BootID: e.Machine.BootID})
	}
	return results.SameKernel(all)
}

// hostsTable is the hosts side by side: one column for each host of the
// plan and one for this machine (where ctrperf ran, and the roles no host
// took), one row per fact.
func hostsTable(e *Environment) (header []string, rows [][]string) {
	if e == nil || len(e.Hosts) == 0 {
		return nil, nil
	}
	cols := make([]results.HostInfo, 0, len(e.Hosts)+1)
	configs := make([][]string, 0, len(e.Hosts)+1)
	header = []string{"host"}
	for _, u := range e.Hosts {
		cols = append(cols, u.HostInfo)
		configs = append(configs, u.Configs)
		header = append(header, u.Name+" ("+strings.Join(u.Roles, ", ")+")")
	}
	here := results.HostInfo{Roles: append([]string{"ctrperf"}, e.localRoles...)}
	if m := e.Machine; m != nil {
		here.Hostname, here.BootID, here.Kernel, here.Machine = m.Hostname, m.BootID, m.Kernel, m.Machine
		here.CPUModel, here.CPUs, here.MemTotal = m.CPUModel, m.CPUs, m.MemTotal
	}
	cols = append(cols, here)
	configs = append(configs, e.localConfigs)
	header = append(header, "this machine ("+strings.Join(here.Roles, ", ")+")")

	row := func(label string, cell func(i int, h results.HostInfo) string) {
		r := []string{label}
		for i, h := range cols {
			r = append(r, orDash(cell(i, h)))
		}
		rows = append(rows, r)
	}
	row("destination", func(i int, h results.HostInfo) string {
		if i == len(cols)-1 {
			return "(local)"
		}
		return h.Dest
	})
	row("hostname", func(_ int, h results.HostInfo) string { return h.Hostname })
	row("kernel", func(_ int, h results.HostInfo) string { return strings.TrimSpace(h.Kernel + " " + h.Machine) })
	row("CPUs", func(_ int, h results.HostInfo) string {
		if h.CPUs == 0 {
			return ""
		}
		s := fmt.Sprintf("%d", h.CPUs)
		if h.CPUModel != "" {
			s += " (" + h.CPUModel + ")"
		}
		return s
	})
	row("memory", func(_ int, h results.HostInfo) string {
		if h.MemTotal == 0 {
			return ""
		}
		return fmt.Sprintf("%.1f GiB", float64(h.MemTotal)/(1<<30))
	})
	row("engine", func(i int, h results.HostInfo) string {
		if i == len(cols)-1 {
			if slices.Contains(e.localRoles, results.RoleSUT) {
				return "see above"
			}
			return ""
		}
		if h.Engine == nil {
			return "none"
		}
		s := "Docker " + orDash(h.Engine.Version)
		if h.Engine.StorageDriver != "" {
			s += ", " + h.Engine.StorageDriver
		}
		return s
	})
	row("boot id", func(_ int, h results.HostInfo) string { return shortID(h.BootID) })
	row("clock vs this machine", func(i int, h results.HostInfo) string {
		if i == len(cols)-1 {
			return "(reference)"
		}
		if h.Clock == nil {
			return "not measured"
		}
		return fmt.Sprintf("%+.3f ms ± %.3f (RTT %.3f ms, %d rounds)", h.Clock.OffsetMs, h.Clock.RTTMs/2, h.Clock.RTTMs, h.Clock.Samples)
	})
	row("used by", func(i int, _ results.HostInfo) string {
		if len(configs[i]) > 1 && slices.Equal(configs[i], e.configs) {
			return "every configuration"
		}
		return strings.Join(configs[i], ", ")
	})
	return header, rows
}

// htmlTable is a table whose cells are escaped already (plainHTML keeps
// "+" as written, greppable).
type htmlTable struct {
	Header []template.HTML
	Rows   [][]template.HTML
}

// shortID is the first 8 characters of a boot id: enough to see two equal.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// hostLines are the environment block's lines about the hosts: how
// latency and clocks were taken, and the one-kernel caveat.
func hostLines(e *Environment) []string {
	if e == nil || len(e.Hosts) == 0 {
		return nil
	}
	out := []string{"hosts side by side below: the system under test and its samples on the sut host, latencies timed on the load host alone (one monotonic clock), each host's clock offset estimated from round trips and recorded"}
	if e.SameKernel() {
		out = append(out, "the hosts share one boot id: "+OneKernel)
	}
	return out
}

// sameKernelWarning is the one-kernel caveat as a warning, so that the
// summary bench prints at the end says it too.
func sameKernelWarning(e *Environment) (Warning, bool) {
	if !e.SameKernel() {
		return Warning{}, false
	}
	return Warning{Message: "the plan's hosts share one boot id (one kernel, as the lab's namespaces do): " + OneKernel,
		Advice: "run the plan on two real machines (hosts: with their SSH destinations) for cross-machine figures"}, true
}

// envSection is the environment block: its lines, then the hosts side by
// side when the plan had hosts.
func envSection(e *Environment) (section, bool) {
	lines := envLines(e)
	if len(lines) == 0 {
		return section{}, false
	}
	s := section{Title: "Environment", Lines: append(lines, hostLines(e)...)}
	s.Header, s.Rows = hostsTable(e)
	return s, true
}

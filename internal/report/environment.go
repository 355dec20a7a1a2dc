package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// Environment is where the results were measured: the machine as bench
// recorded it in OUT/env.json, and each engine the runs used with the
// configurations that used it.
type Environment struct {
	Machine *results.Machine `json:"machine,omitempty"`
	// Start is when the first run started (the date when env.json is
	// missing).
	Start   time.Time   `json:"start,omitempty"`
	Engines []EngineUse `json:"engines,omitempty"`
	// DataFS are the data filesystems of the runs (the plan's filesystem
	// knob), each with the configurations whose runs used it.
	DataFS []DataFSUse `json:"data_fs,omitempty"`
	// Hosts are the plan's other hosts (hosts:), in the order the runs
	// named them (see hosts.go); localRoles the roles this machine played
	// in runs that had hosts.
	Hosts []HostUse `json:"hosts,omitempty"`
	// Placements are, for each configuration on a cluster, where its pods
	// and its load generator ran (its first run's record).
	Placements   []KubePlacement `json:"kubernetes_placements,omitempty"`
	localRoles   []string
	localConfigs []string
	configs      []string // every configuration, in order
}

// DataFSUse is a data filesystem (as the first run that made it recorded
// it) and the configurations that ran on one like it.
type DataFSUse struct {
	results.DataFSInfo
	Configs []string `json:"configs,omitempty"`
}

// KubePlacement is where one configuration's pods ran on a cluster, and
// where its load came from.
type KubePlacement struct {
	Config string            `json:"config"`
	Pods   []results.KubePod `json:"pods,omitempty"`
	// Client is where the load generator ran: "this machine", or
	// "N pod(s)" with the node the plan pinned them to.
	Client string `json:"client"`
}

// EngineUse is an engine and the configurations whose runs it served.
type EngineUse struct {
	results.EngineInfo
	Configs []string `json:"configs,omitempty"`
}

// environmentFromRecords gathers the engines the records name (as each
// engine reported itself at the start of a run), in configuration order.
func environmentFromRecords(recs []results.RunRecord, order []string) *Environment {
	env := &Environment{configs: order}
	idx := map[string]int{}
	for _, name := range order {
		for i := range recs {
			r := &recs[i]
			if r.Config != name {
				continue
			}
			if env.Start.IsZero() || (!r.Start.IsZero() && r.Start.Before(env.Start)) {
				env.Start = r.Start
			}
			if r.DataFS != nil {
				env.addDataFS(*r.DataFS, name)
			}
			env.addRunHosts(r.Hosts, name)
			if r.Engine == nil {
				continue
			}
			key := r.Engine.Runtime + "/" + r.Engine.Name
			i, seen := idx[key]
			if !seen {
				i = len(env.Engines)
				idx[key] = i
				env.Engines = append(env.Engines, EngineUse{EngineInfo: *r.Engine})
			}
			if !slices.Contains(env.Engines[i].Configs, name) {
				env.Engines[i].Configs = append(env.Engines[i].Configs, name)
			}
			if k := r.Engine.Kube; k != nil && !slices.ContainsFunc(env.Placements, func(p KubePlacement) bool { return p.Config == name }) {
				env.Placements = append(env.Placements, KubePlacement{Config: name, Pods: k.Pods, Client: kubeClient(r.Knobs)})
			}
		}
	}
	return env
}

// kubeClient says where a kubernetes configuration's load generator ran,
// from its knobs (kubernetes.client, clients, client_node).
func kubeClient(knobs map[string]any) string {
	k, _ := knobs[plan.KeyKubernetes].(map[string]any)
	if c, _ := k["client"].(string); c != "pod" {
		return "this machine"
	}
	n := 1
	if c, ok := k["clients"].(float64); ok && c > 0 {
		n = int(c)
	} else if c, ok := k["clients"].(int); ok && c > 0 {
		n = c
	}
	where := fmt.Sprintf("%d pod", n)
	if n > 1 {
		where += "s"
	}
	if node, _ := k["client_node"].(string); node != "" {
		where += " on " + node
	} else {
		where += " placed by the scheduler"
	}
	return where
}

// addDataFS notes that configuration name ran on fs; filesystems alike in
// type, options and size are one line.
func (e *Environment) addDataFS(fs results.DataFSInfo, name string) {
	same := func(u DataFSUse) bool {
		return u.FS == fs.FS && u.Size == fs.Size && slices.Equal(u.Options, fs.Options)
	}
	i := slices.IndexFunc(e.DataFS, same)
	if i < 0 {
		e.DataFS = append(e.DataFS, DataFSUse{DataFSInfo: fs})
		i = len(e.DataFS) - 1
	}
	if !slices.Contains(e.DataFS[i].Configs, name) {
		e.DataFS[i].Configs = append(e.DataFS[i].Configs, name)
	}
}

// addEnvFile adds what OUT/env.json knows: the machine, and engines no
// successful run named (a private engine whose runs all failed).
func (e *Environment) addEnvFile(f *results.Env) {
	if f == nil {
		return
	}
	e.Machine = f.Machine
	e.addEnvHosts(f.Hosts)
	for _, eng := range f.Engines {
		if !slices.ContainsFunc(e.Engines, func(u EngineUse) bool { return u.Name == eng.Name && u.Runtime == eng.Runtime }) {
			e.Engines = append(e.Engines, EngineUse{EngineInfo: eng})
		}
	}
}

// envLines are the environment block, one fact per line.
func envLines(e *Environment) []string {
	if e == nil {
		return nil
	}
	var out []string
	m := e.Machine
	date := e.Start
	if m != nil && !m.Time.IsZero() {
		date = m.Time
	}
	var first []string
	if !date.IsZero() {
		first = append(first, "measured "+date.UTC().Format("2006-01-02 15:04 MST"))
	}
	if m != nil {
		if m.Hostname != "" {
			first = append(first, "on "+m.Hostname)
		}
		first = append(first, "with ctrperf "+orDash(m.Ctrperf)+" ("+orDash(m.GoVersion)+")")
	}
	if len(first) > 0 {
		out = append(out, strings.Join(first, " "))
	}
	if m != nil {
		k := "kernel " + orDash(m.Kernel)
		if m.Machine != "" {
			k += " " + m.Machine
		}
		if m.Cgroups != "" {
			k += ", cgroup " + m.Cgroups
		}
		out = append(out, k)
		cpu := fmt.Sprintf("%d CPUs", m.CPUs)
		if m.CPUModel != "" {
			cpu += " (" + m.CPUModel + ")"
		}
		if m.MemTotal > 0 {
			cpu += fmt.Sprintf(", memory %.1f GiB", float64(m.MemTotal)/(1<<30))
		}
		out = append(out, cpu)
	} else {
		out = append(out, "machine: unknown (no env.json beside the results)")
	}
	for _, eng := range e.Engines {
		switch {
		case eng.Kube != nil:
			out = append(out, kubeLines(eng, e.Placements)...)
		case eng.Version != "" || eng.StorageDriver != "":
			// An engine of its own (a daemon with a version), not this
			// machine's processes.
			out = append(out, engineLine(eng))
		}
	}
	for _, fs := range e.DataFS {
		out = append(out, dataFSLine(fs))
	}
	return out
}

// kubeLines are a cluster: its version, kube-proxy mode and nodes with
// their CPU manager policy, then where each of its configurations' pods
// and load generator ran.
func kubeLines(e EngineUse, placements []KubePlacement) []string {
	k := e.Kube
	line := "Kubernetes cluster " + orDash(k.Context)
	if k.Server != "" {
		line += " (" + k.Server + ")"
	}
	parts := []string{"version " + orDash(e.Version)}
	proxy := "kube-proxy " + orDash(k.ProxyMode)
	if k.ProxyModeFrom != "" {
		proxy += ", read from " + k.ProxyModeFrom
	}
	parts = append(parts, proxy)
	line += ": " + strings.Join(parts, "; ")
	if len(e.Configs) > 0 {
		line += " — used by " + strings.Join(e.Configs, ", ")
	}
	out := []string{line}
	for _, n := range k.Nodes {
		l := "  node " + n.Name
		var f []string
		if !n.Ready {
			f = append(f, "NOT Ready")
		}
		if n.Kubelet != "" {
			f = append(f, "kubelet "+n.Kubelet)
		}
		if n.Runtime != "" {
			f = append(f, n.Runtime)
		}
		f = append(f, "CPU manager "+orDash(n.CPUManager))
		if n.Kernel != "" {
			f = append(f, "kernel "+n.Kernel)
		}
		out = append(out, l+": "+strings.Join(f, ", "))
	}
	for _, p := range placements {
		if !slices.Contains(e.Configs, p.Config) {
			continue
		}
		var pods []string
		for _, pod := range p.Pods {
			d := pod.Service + " on " + orDash(pod.Node)
			var f []string
			if pod.QoS != "" {
				f = append(f, pod.QoS)
			}
			if pod.CPUSet != "" {
				f = append(f, "CPUs "+pod.CPUSet)
			}
			if len(f) > 0 {
				d += " (" + strings.Join(f, ", ") + ")"
			}
			pods = append(pods, d)
		}
		l := "  " + p.Config + ": "
		if len(pods) > 0 {
			l += "pods " + strings.Join(pods, "; ") + "; "
		}
		out = append(out, l+"load from "+p.Client)
	}
	return out
}

func dataFSLine(u DataFSUse) string {
	line := "data filesystem " + orDash(u.FS)
	if len(u.Options) > 0 {
		line += " -o " + strings.Join(u.Options, ",")
	}
	if u.Size > 0 {
		line += fmt.Sprintf(" on a %.1f GiB loop file", float64(u.Size)/(1<<30))
	}
	if len(u.Applied) > 0 {
		line += ", mounted " + strings.Join(u.Applied, ",")
	}
	if len(u.Configs) > 0 {
		line += " — used by " + strings.Join(u.Configs, ", ")
	}
	return line
}

func engineLine(e EngineUse) string {
	// The runtime's name as the engine reported it (Docker, Podman); an
	// old record without one is Docker's.
	rt := "Docker"
	if e.Runtime != "" {
		rt = strings.ToUpper(e.Runtime[:1]) + e.Runtime[1:]
	}
	name := rt + " engine " + e.Name
	switch {
	case e.Nested:
		name += " (nested: a dockerd in a container of the default engine, started by ctrperf)"
	case e.Private:
		name += " (private, started by ctrperf)"
	}
	parts := []string{"version " + orDash(e.Version), "storage driver " + orDash(e.StorageDriver)}
	if e.BackingFS != "" {
		parts[1] += " on " + e.BackingFS
	}
	if e.UserlandProxy != nil {
		parts = append(parts, "userland proxy "+map[bool]string{true: "on", false: "off"}[*e.UserlandProxy])
	}
	if e.DataRoot != "" {
		parts = append(parts, "data root "+e.DataRoot)
	}
	line := name + ": " + strings.Join(parts, ", ")
	if len(e.Configs) > 0 {
		line += " — used by " + strings.Join(e.Configs, ", ")
	}
	return line
}

package results

import "time"

// The machines of a two-host run (a plan's hosts:): where the system under
// test was deployed and where the load generator ran. A run on this machine
// alone carries none of these (its record and env.json are as before).

// Host roles, as a plan's hosts: names them.
const (
	RoleSUT  = "sut"  // the system under test: its engine, baseline, samplers
	RoleLoad = "load" // the load generator
)

// RunHost names one host of a run: the plan's name for it and the SSH
// destination ctrperf reached it at.
type RunHost struct {
	// Name is the host as the plan (or --hosts) wrote it: a Host alias of
	// the ssh config ("lab-sut"), user@addr, or ssh://user@addr:port.
	Name string `json:"name"`
	// Dest is what ssh really used, after the ssh config
	// ("root@198.19.200.2:22"); empty for this machine.
	Dest string `json:"dest,omitempty"`
	// Hostname is the host's own name (its uname nodename), as its agent
	// reported it.
	Hostname string `json:"hostname,omitempty"`
}

// Local reports whether h is this machine (no SSH destination).
func (h *RunHost) Local() bool { return h == nil || h.Name == "" }

// RunHosts are the hosts of one run: SUT for the deployment (and its
// samples), Load for the generator (and its latencies). Nil in a record of
// a run on this machine alone.
type RunHosts struct {
	SUT  *RunHost `json:"sut,omitempty"`
	Load *RunHost `json:"load,omitempty"`
}

// HostInfo is one host of the plan as OUT/env.json describes it: what the
// host's agent reported of it when ctrperf reached it, and how its clock
// stood against this machine's.
type HostInfo struct {
	// Roles are the roles the host played in the runs (sut, load; both
	// when one host served both).
	Roles []string `json:"roles"`
	RunHost
	// BootID is /proc/sys/kernel/random/boot_id: two hosts with one boot
	// id are one kernel (the lab's namespaces), not two machines.
	BootID   string `json:"boot_id,omitempty"`
	Kernel   string `json:"kernel,omitempty"`
	Machine  string `json:"machine,omitempty"` // architecture, uname -m
	CPUModel string `json:"cpu_model,omitempty"`
	CPUs     int    `json:"cpus,omitempty"`
	MemTotal uint64 `json:"mem_total_bytes,omitempty"`
	// Engine is the Docker engine of the host as it reported itself
	// ("" when the host has none or ctrperf did not ask).
	Engine *EngineInfo `json:"engine,omitempty"`
	// Clock is the host's clock against this machine's, estimated from
	// round trips when ctrperf reached it.
	Clock *ClockOffset `json:"clock,omitempty"`
}

// ClockOffset is a host's wall clock against this machine's, estimated
// from round trips over the agent's connection (the round trip with the
// least delay wins, as NTP does). Durations are never taken across hosts:
// this is recorded so a reader can line up the two hosts' timestamps.
type ClockOffset struct {
	// OffsetMs is the host's clock minus this machine's, in milliseconds.
	OffsetMs float64 `json:"offset_ms"`
	// RTTMs is the round trip of the exchange the offset came from; the
	// offset is known to within half of it.
	RTTMs float64 `json:"rtt_ms"`
	// Samples is how many round trips were made.
	Samples int `json:"samples,omitempty"`
}

// Local is a time stamp of the host's clock (Unix nanoseconds) on this
// machine's clock.
func (c ClockOffset) Local(hostUnixNano int64) time.Time {
	return time.Unix(0, hostUnixNano).Add(-c.Offset())
}

// Offset is the host's clock minus this machine's.
func (c ClockOffset) Offset() time.Duration {
	return time.Duration(c.OffsetMs * float64(time.Millisecond))
}

// SameKernel reports whether hosts holds two or more hosts that share one
// boot id: one kernel (namespaces of one machine), not separate machines.
func SameKernel(hosts []HostInfo) bool {
	seen := map[string]bool{}
	for _, h := range hosts {
		if h.BootID == "" {
			continue
		}
		if seen[h.BootID] {
			return true
		}
		seen[h.BootID] = true
	}
	return false
}

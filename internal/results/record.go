// Package results holds what a benchmark run measured, as raw records: one
// RunRecord per run, appended to OUT/results.jsonl as soon as the run ends.
// Statistics and reports are always recomputed from these records.
package results

import "time"

// Status of a run.
type Status string

const (
	StatusOK     Status = "ok"
	StatusFailed Status = "failed"  // deployed or driven, but failed; Error says why
	StatusNotRun Status = "not_run" // could not be attempted (e.g. storage driver unavailable)
)

// Operation is what one labelled operation (a scenario step, "get", "set",
// "write", ...) measured during the measured window.
type Operation struct {
	Count  int64            `json:"count"`            // completed attempts incl. errors
	Errors map[string]int64 `json:"errors,omitempty"` // by kind: timeout, refused, reset, http_5xx, ...
	Bytes  int64            `json:"bytes,omitempty"`  // bytes received
	// Histogram of latencies in microseconds, HdrHistogram V2 compressed
	// encoding in base64 (see EncodeHistogram). Empty when the tool gave no
	// per-request latencies.
	Histogram string `json:"hist,omitempty"`
	// Percentiles in ms when a wrapped tool reports only those (fio, sysbench).
	PercentilesMs map[string]float64 `json:"percentiles_ms,omitempty"`
	MeanMs        float64            `json:"mean_ms,omitempty"` // when no histogram is available
}

// AddCounts adds op's count, bytes and errors to o: merging the same
// operation measured by several generators (tenants, instances).
func (o *Operation) AddCounts(op *Operation) {
	o.Count += op.Count
	o.Bytes += op.Bytes
	for k, v := range op.Errors {
		if o.Errors == nil {
			o.Errors = map[string]int64{}
		}
		o.Errors[k] += v
	}
}

// ErrorCount sums all error kinds.
func (o *Operation) ErrorCount() int64 {
	var n int64
	for _, v := range o.Errors {
		n += v
	}
	return n
}

// LoadStats describe the load generator's side of a run.
type LoadStats struct {
	Mode         string  `json:"mode"`                    // open, closed, tool
	TargetRate   float64 `json:"target_rate,omitempty"`   // sessions or requests per second asked for
	AchievedRate float64 `json:"achieved_rate,omitempty"` // started per second
	Concurrency  int     `json:"concurrency,omitempty"`
	// Late counts requests that could not be started at their intended time
	// (all workers busy); their latency still counts from the intended time.
	Late int64 `json:"late,omitempty"`
	// Generator CPU seconds (user+system) over the measured window, and the
	// CPUs it was pinned to.
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	CPUSet     string  `json:"cpuset,omitempty"`
	// Lateness of the generator itself (open loop): how long after its
	// intended start each measured session began to run, including any
	// wait for a free worker (see Late). It is client delay that the
	// latencies include (they count from the intended start), so a report
	// can tell it apart from server delay. A measurement merged from
	// several generators (noisy) carries the worst generator's p99 and max
	// only.
	LatenessP50Ms float64 `json:"lateness_p50_ms,omitempty"`
	LatenessP99Ms float64 `json:"lateness_p99_ms,omitempty"`
	LatenessMaxMs float64 `json:"lateness_max_ms,omitempty"`
	// Protected describes the cgroup the generator ran in to keep the
	// measured services from taking its CPU ("<dir> cpu.shares=10240"),
	// empty when it ran where ctrperf was started.
	Protected string `json:"protected,omitempty"`
}

// Measurement is what a workload driver returns for one measured window.
type Measurement struct {
	DurationS  float64               `json:"duration_s"`
	Operations map[string]*Operation `json:"operations,omitempty"`
	// Metrics at the workload level, e.g. throughput_per_s (always, the
	// primary rate), elapsed_s, or a tool's own figures (fio bw, iops).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Load    *LoadStats         `json:"load,omitempty"`
	// Tools and their versions (fio-3.33, sysbench 1.0.20, ...).
	Tools map[string]string `json:"tools,omitempty"`
	// Notes are warnings the driver wants in the report.
	Notes []string `json:"notes,omitempty"`
	// Capacity is the capacity search that chose this measurement, when
	// the load asked for one (load.search); the measurement is its highest
	// passing step's.
	Capacity *CapacitySearch `json:"capacity,omitempty"`
	// PerSecond is the measured window second by second, as the load
	// generator saw it (the k6 picture); empty for tools that report only
	// totals.
	PerSecond []Second `json:"per_second,omitempty"`
	// Declared describes metrics whose names the plan chose (the command
	// workload's figure) or whose sense a name cannot tell (wall_median_s):
	// which direction is better and the unit, as the workload declared them.
	// Reports use it before guessing from the name.
	Declared map[string]MetricInfo `json:"declared,omitempty"`
	// Executions are the timed executions of a command, in order, when the
	// workload runs one command several times (command): the raw values
	// behind its summary metrics.
	Executions []Execution `json:"executions,omitempty"`
	// Path is how a load host on another machine reached the services
	// (hosts: with sut and load apart); nil on one host.
	Path *NetPath `json:"path,omitempty"`
}

// NetPath is the path between a load host and the system under test: the
// one a client on another machine takes, with no process of ctrperf's
// between them, and what the SUT's admit chain let in and turned away.
type NetPath struct {
	// Kind is PathDirect: the load host dials the SUT's addresses; or
	// PathRelayed: a relay of the runtime's is between them (Via).
	Kind string `json:"kind"`
	// Via says what carries the packets on the SUT: the host's own
	// address, Docker's DNAT of a published port, or a route to the
	// container's address through the SUT.
	Via string `json:"via"`
	// SUTAddr is the SUT's address the load host's packets arrive on;
	// LoadAddr the load host's as the SUT sees it.
	SUTAddr  string `json:"sut_addr"`
	LoadAddr string `json:"load_addr"`
	// Dialled are the endpoints as the load host dialled them.
	Dialled []string `json:"dialled,omitempty"`
	// Routes are the routes put on the load host for the run.
	Routes []string `json:"routes,omitempty"`
	// AdmitChain is the SUT's iptables chain that admitted only the load
	// host; its counters: the load host's packets, and the packets of
	// other sources, each connection reset.
	AdmitChain      string `json:"admit_chain,omitempty"`
	AdmittedPackets uint64 `json:"admitted_packets"`
	RefusedPackets  uint64 `json:"refused_packets"`
	// CountError is why the counters could not be read.
	CountError string `json:"count_error,omitempty"`
}

// Kinds of NetPath.
const (
	// PathDirect is a path with nothing of ctrperf's on it.
	PathDirect = "direct"
	// PathRelayed is a path through a userspace relay of the runtime's
	// (a VM guest's user-mode network: QEMU's slirp), which is then in
	// every figure; Via says which.
	PathRelayed = "relayed"
)

// Second is one second of the measured window: the requests that completed
// in it (bucketed by completion) and their latency percentiles.
type Second struct {
	T      float64 `json:"t"`     // end of the second, seconds from the window's start
	Count  int64   `json:"count"` // completed requests, errors included
	Errors int64   `json:"errors,omitempty"`
	P50Ms  float64 `json:"p50_ms,omitempty"`
	P99Ms  float64 `json:"p99_ms,omitempty"`
	MaxMs  float64 `json:"max_ms,omitempty"`
}

// MetricInfo is what a workload declares about one of its metrics.
type MetricInfo struct {
	// Better is "higher" or "lower"; empty: neither (a spread, a count).
	Better string `json:"better,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// Merge is how the metric of parts measured side by side merges, for
	// a name metricMerges does not know (see Merge).
	Merge Merge `json:"merge,omitempty"`
}

// Senses of MetricInfo.Better.
const (
	BetterHigher = "higher"
	BetterLower  = "lower"
)

// Execution is one timed execution of a command.
type Execution struct {
	WallS float64 `json:"wall_s"` // wall time of the command alone
	// Figures taken from its output, by metric name.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// EngineInfo describes the engine a run was deployed on, as the engine
// reported it when the run started.
type EngineInfo struct {
	Runtime       string `json:"runtime"`                  // "host" or "docker"
	Name          string `json:"name"`                     // "host", "default", or the private engine's name
	Version       string `json:"version,omitempty"`        // dockerd version
	StorageDriver string `json:"storage_driver,omitempty"` // as the daemon reports it
	DataRoot      string `json:"data_root,omitempty"`
	BackingFS     string `json:"backing_fs,omitempty"`
	UserlandProxy *bool  `json:"userland_proxy,omitempty"`
	Private       bool   `json:"private"` // started by ctrperf
	// Nested: a dockerd in a container of the default engine (Docker in
	// Docker).
	Nested bool `json:"nested,omitempty"`
	// Kube is the cluster of runtime kubernetes (kube.go).
	Kube *KubeInfo `json:"kubernetes,omitempty"`
	// VM is the guest of runtime vm.
	VM *VMInfo `json:"vm,omitempty"`
}

// VMInfo is a guest of runtime vm as it booted.
type VMInfo struct {
	Accel string `json:"accel"` // kvm or tcg
	// Emulated: the guest's CPU is emulated (accel tcg): its figures
	// compare with nothing.
	Emulated    bool    `json:"emulated,omitempty"`
	VCPUs       int     `json:"vcpus"`
	MemoryBytes int64   `json:"memory_bytes"`
	Network     string  `json:"network"`
	Disk        string  `json:"disk"`
	Kernel      string  `json:"kernel"` // the guest's kernel version
	QEMU        string  `json:"qemu"`   // qemu-system-x86_64's version line
	Address     string  `json:"address,omitempty"`
	BootSeconds float64 `json:"boot_s"` // QEMU's start until the agent answered
	// Docker: the services ran as containers of a Docker engine inside
	// the guest (vm.docker: seed 003's "container in VM"); the engine
	// info's version and storage driver are that engine's.
	Docker bool `json:"docker,omitempty"`
}

// RunRecord is one line of results.jsonl.
type RunRecord struct {
	Plan       string         `json:"plan"`
	RunID      string         `json:"run_id"`
	Index      int            `json:"index"`      // position in the run order, 0-based
	Config     string         `json:"config"`     // configuration name
	Repetition int            `json:"repetition"` // 0-based
	Knobs      map[string]any `json:"knobs,omitempty"`
	Workload   string         `json:"workload"`
	Start      time.Time      `json:"start"`
	End        time.Time      `json:"end"`
	Status     Status         `json:"status"`
	Error      string         `json:"error,omitempty"`
	// Emulated: the configuration runs on an emulated CPU (runtime vm,
	// accel tcg), whatever its status: reports show it apart, never as a
	// ratio against bare metal.
	Emulated bool        `json:"emulated,omitempty"`
	Engine   *EngineInfo `json:"engine,omitempty"`
	DataFS   *DataFSInfo `json:"data_fs,omitempty"` // the data filesystem, if the plan asked for one
	// Hosts names the host of the deployment and of the generator when the
	// plan had hosts: (nil: both on this machine).
	Hosts  *RunHosts    `json:"hosts,omitempty"`
	Result *Measurement `json:"result,omitempty"`
	System *Series      `json:"system,omitempty"`
	// WindowOffsetS is where the measured window starts in System, in
	// seconds from the start of the series (the samples before it are the
	// deployment's warm-up): reports cut the series there.
	WindowOffsetS float64 `json:"window_offset_s,omitempty"`
}

// Runtime is the run's runtime knob ("host" or "docker"), "" when the
// record has none.
func (r *RunRecord) Runtime() string {
	rt, _ := r.Knobs["runtime"].(string)
	return rt
}

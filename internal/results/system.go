package results

// Series is what the observers recorded during one run. It is stored as-is in
// the run's RunRecord; reports compute summaries and timelines from it.
type Series struct {
	IntervalS float64 `json:"interval_s"`
	// Unavailable maps a sampler name ("disk", "cpu", "interrupts",
	// "containers", "processes", ...) to why it produced nothing.
	Unavailable map[string]string `json:"unavailable,omitempty"`
	Samples     []Sample          `json:"samples"`
	// Sources are the agents that took the samples, when not this machine
	// (runtime kubernetes: the sampler agent pod on each node of the run's
	// pods, the first the node of the service under test, whose CPU,
	// interrupts and disks the samples are).
	Sources []SeriesSource `json:"sources,omitempty"`
}

// SeriesSource is an agent that sampled a node for a series.
type SeriesSource struct {
	Node     string   `json:"node"`
	Agent    string   `json:"agent"`              // namespace/pod
	Hostname string   `json:"hostname,omitempty"` // as the agent reported it
	Pods     []string `json:"pods,omitempty"`     // the series' names of the pods sampled there
}

// Sample is one interval's worth of rates and levels. T is the end of the
// interval in seconds since the observer started.
type Sample struct {
	T float64 `json:"t"`
	// CPU per CPU ("cpu0", "cpu1", ...) plus "all", in percent of the interval.
	CPU map[string]CPUPercent `json:"cpu,omitempty"`
	// Disks per device name (sda, vda, loop0, ...), as iostat -x computes them.
	Disks map[string]DiskStats `json:"disks,omitempty"`
	// Interrupts per IRQ (number or name as in /proc/interrupts) and per CPU, per second.
	// Numbered IRQs are keyed "N:device" (e.g. "38:virtio2-input.0"); IRQs
	// that did not fire during the interval are left out.
	Interrupts map[string][]float64 `json:"interrupts,omitempty"`
	// Softirqs per kind (NET_RX, BLOCK, ...) and per CPU, per second.
	Softirqs map[string][]float64 `json:"softirqs,omitempty"`
	// Net per network interface of the sampled host's network namespace
	// (its NIC, bridges, veths), rates per second from /proc/net/dev.
	Net map[string]NetStats `json:"net,omitempty"`
	// System-wide levels and rates.
	ContextSwitchesPerS float64 `json:"ctxt_per_s,omitempty"`
	RunQueue            float64 `json:"runq,omitempty"` // procs_running
	BlockedProcs        float64 `json:"blocked,omitempty"`
	MemUsedBytes        float64 `json:"mem_used_bytes,omitempty"`
	MemAvailableBytes   float64 `json:"mem_available_bytes,omitempty"`
	// Containers per container name.
	Containers map[string]ContainerStats `json:"containers,omitempty"`
	// Processes per process group name ("dockerd", "containerd",
	// "containerd-shim", "docker-proxy", "loadgen", ...).
	Processes map[string]ProcessStats `json:"processes,omitempty"`
}

// CPUPercent is the split of one CPU's time over an interval, in percent.
type CPUPercent struct {
	User    float64 `json:"user"`
	Nice    float64 `json:"nice,omitempty"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"`
	Idle    float64 `json:"idle"`
}

// DiskStats are iostat -x figures for one device over one interval.
// (iostat's svctm is not among them: sysstat deprecated it as meaningless
// for devices that serve requests in parallel, and removed it in 12.x.)
type DiskStats struct {
	ReadsPerS    float64 `json:"r_s"`
	WritesPerS   float64 `json:"w_s"`
	ReadKBPerS   float64 `json:"rkb_s"`
	WriteKBPerS  float64 `json:"wkb_s"`
	ReadAwaitMs  float64 `json:"r_await"`
	WriteAwaitMs float64 `json:"w_await"`
	AvgQueueSize float64 `json:"aqu_sz"`
	UtilPercent  float64 `json:"util"`
	// Requests merged into others before reaching the device (rrqm/s,
	// wrqm/s), the mean size of a read or write request in kB (areq-sz, the
	// seed's avgrq-sz in sectors / 2) and the wait of reads and writes
	// together (await), each over the interval.
	ReadMergedPerS  float64 `json:"rrqm_s,omitempty"`
	WriteMergedPerS float64 `json:"wrqm_s,omitempty"`
	AvgRequestKB    float64 `json:"areq_sz,omitempty"`
	AwaitMs         float64 `json:"await,omitempty"`
}

// ContainerStats come from one container's cgroup.
type ContainerStats struct {
	CPUPercent float64 `json:"cpu_pct"` // 100 = one full CPU
	// CFS periods in which the cgroup was throttled, and the time it spent
	// throttled, during the interval (not since the container started).
	ThrottledPeriods float64 `json:"throttled_periods,omitempty"`
	ThrottledS       float64 `json:"throttled_s,omitempty"`
	MemBytes         float64 `json:"mem_bytes,omitempty"` // level at the end of the interval
	BlkReadBPerS     float64 `json:"blk_read_b_s,omitempty"`
	BlkWriteBPerS    float64 `json:"blk_write_b_s,omitempty"`
	// Context switches per second of the cgroup's threads (summed from
	// /proc/<tid>/status; switches of threads that exited during the
	// interval are not counted).
	VoluntaryCtxSwPerS   float64 `json:"vol_ctxsw_s,omitempty"`
	InvoluntaryCtxSwPerS float64 `json:"invol_ctxsw_s,omitempty"`
}

// ProcessStats sum the processes of one group.
type ProcessStats struct {
	CPUPercent float64 `json:"cpu_pct"` // 100 = one full CPU
	Count      int     `json:"count"`
	RSSBytes   float64 `json:"rss_bytes,omitempty"`
}

// NetStats are one network interface's rates over an interval.
type NetStats struct {
	RxBytesPerS   float64 `json:"rx_bytes_per_s"`
	TxBytesPerS   float64 `json:"tx_bytes_per_s"`
	RxPacketsPerS float64 `json:"rx_packets_per_s"`
	TxPacketsPerS float64 `json:"tx_packets_per_s"`
	DropsPerS     float64 `json:"drops_per_s,omitempty"`
	ErrorsPerS    float64 `json:"errors_per_s,omitempty"`
}

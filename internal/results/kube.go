package results

// KubeInfo is what a run on runtime kubernetes records of its cluster and
// its pods (EngineInfo.Kube).
type KubeInfo struct {
	Context   string `json:"context"`
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// ProxyMode is the kube-proxy mode in force ("" when nothing said),
	// ProxyModeFrom where it was read (a node's /proxyMode, the
	// kube-proxy ConfigMap) or why it is unknown.
	ProxyMode     string     `json:"proxy_mode,omitempty"`
	ProxyModeFrom string     `json:"proxy_mode_from,omitempty"`
	Nodes         []KubeNode `json:"nodes,omitempty"`
	// Pods are the run's pods (set per run): their QoS class and node.
	Pods []KubePod `json:"pods,omitempty"`
}

// KubeCluster is what `ctrperf doctor` says of a cluster (kube.Report; here
// so that doctor reports one without linking client-go).
type KubeCluster struct {
	Kubeconfig    string     `json:"kubeconfig,omitempty"`
	Context       string     `json:"context"`
	Server        string     `json:"server"`
	Answers       bool       `json:"answers"`
	Error         string     `json:"error,omitempty"`
	Version       string     `json:"version,omitempty"`
	ProxyMode     string     `json:"proxy_mode,omitempty"`
	ProxyModeFrom string     `json:"proxy_mode_from,omitempty"`
	Nodes         []KubeNode `json:"nodes,omitempty"`
	// CPUManager is each node's kubelet cpuManagerPolicy, read from its
	// /configz through the API server ("" when not readable).
	CPUManager map[string]string `json:"cpu_manager,omitempty"`
	Namespaces []string          `json:"ctrperf_namespaces,omitempty"`
}

// KubeNode is one node of the cluster when the engine was opened.
type KubeNode struct {
	Name    string `json:"name"`
	Ready   bool   `json:"ready"`
	Address string `json:"address,omitempty"`
	Kubelet string `json:"kubelet,omitempty"`
	Runtime string `json:"runtime,omitempty"` // the container runtime and its version
	Kernel  string `json:"kernel,omitempty"`
	// CPUManager is the kubelet's cpuManagerPolicy (none, static), read
	// from its /configz through the API server; "" when unreadable.
	CPUManager string `json:"cpu_manager,omitempty"`
}

// KubePod is one pod of a run.
type KubePod struct {
	Service string `json:"service"`
	Name    string `json:"name"`
	Node    string `json:"node,omitempty"`
	IP      string `json:"ip,omitempty"`
	QoS     string `json:"qos,omitempty"` // Guaranteed, Burstable, BestEffort, as the API server set it
	// CPUSet is the CPUs its container could run on when it started (its
	// cgroup's cpuset.cpus): under the static CPU manager a Guaranteed
	// pod's exclusive CPUs, else the node's shared pool. Read only where
	// this machine sees the node's cgroups (the lab); CPUSetNote says why
	// not otherwise.
	CPUSet     string `json:"cpuset,omitempty"`
	CPUSetNote string `json:"cpuset_note,omitempty"`
}

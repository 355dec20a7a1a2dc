package plan

// RuntimeTraits are what the layers above the engine may ask of a runtime
// instead of comparing its name: a workload asks whether its services are
// processes of this machine or run from images, the plan which defaults a
// configuration gets and whether the isolate controller can place it. A
// new runtime (Kubernetes, a remote host) adds its row to runtimeTable and
// is then handled by every such question; see "Add a runtime" in
// docs/ARCHITECTURE.md.
type RuntimeTraits struct {
	// Processes: services run as processes of the machine ctrperf runs on,
	// from their HostCommand, with this machine's binaries, tools, paths
	// and network (the bare-metal baseline).
	Processes bool
	// Images: services run from images (Service.Image, Service.Build), in
	// containers with their own paths.
	Images bool
	// Isolate: the isolate controller can place the services (it follows
	// Docker containers and pods by their labels), so isolate.policy and the noisy
	// workload's tenants work.
	Isolate bool
	// Network and Data are the defaults of a configuration that names none.
	Network NetworkMode
	Data    DataPlacement
	// Networks and Placements are every network mode and data placement
	// the runtime takes.
	Networks   []NetworkMode
	Placements []DataPlacement
	// OwnAddress is the network in which each service is dialled at an
	// address of its own, with nothing of the engine's in between
	// (container-ip, pod-ip); "" when there is none.
	OwnAddress NetworkMode
	// ClusterNetwork: services are dialled from other machines at
	// addresses no resolver names (a cluster's pod network): a server
	// binds every address and looks no peer's name up.
	ClusterNetwork bool
	// EngineKnobs: the configuration's engine: knobs select the engine
	// (a Docker daemon's storage driver, data root, userland proxy, a
	// nested engine) that ctrperf starts for it.
	EngineKnobs bool
	// NumericUser: a service's user must be a uid; the runtime does not
	// look names up in the image (a pod's securityContext.runAsUser).
	NumericUser bool
	// Cluster: services run on the nodes of a Kubernetes cluster, not on
	// this machine: the configuration's kubernetes: block says which
	// cluster and how; its services are sampled by agents the engine
	// starts on those nodes, and the load may come from generator agents
	// it starts there (bench's cluster site).
	Cluster bool
	// Guest: the services run in a virtual machine that ctrperf boots for
	// them (the vm: block), as processes of the guest; sampled there.
	Guest bool
	// Program is the command of this machine the runtime's engine runs
	// besides Docker's (podman): a plan that names the runtime needs its
	// Debian package (internal/deps).
	Program string
}

// ProcessesHere says whether the services are processes of the machine
// ctrperf runs on, whose PATH then has their programs: the host runtime,
// not a guest's (whose programs are its disk's: the Debian base's).
func (t RuntimeTraits) ProcessesHere() bool { return t.Processes && !t.Guest }

// runtimeTable is every runtime a plan may name, in the order error
// messages list them.
var runtimeTable = []struct {
	runtime Runtime
	traits  RuntimeTraits
}{
	{RuntimeHost, RuntimeTraits{Processes: true, Network: NetworkHost, Data: DataBind,
		Networks: []NetworkMode{NetworkHost}, Placements: []DataPlacement{DataBind, DataTmpfs}}},
	{RuntimeDocker, RuntimeTraits{Images: true, Isolate: true, Network: NetworkPublished, Data: DataLayer, OwnAddress: NetworkContainerIP, EngineKnobs: true,
		Networks: containerNetworks, Placements: containerPlacements}},
	// Rootful Podman's containers, through its Docker-compatible API: like
	// Docker's, but the isolate controller follows Docker's containers only.
	{RuntimePodman, RuntimeTraits{Images: true, Network: NetworkPublished, Data: DataLayer, OwnAddress: NetworkContainerIP, Program: "podman",
		Networks: containerNetworks, Placements: containerPlacements}},
	// Pods of a cluster: from images, the pod's IP, its root filesystem.
	// The isolate controller runs as a DaemonSet on every node (CRI).
	{RuntimeKubernetes, RuntimeTraits{Images: true, Isolate: true, Network: NetworkPodIP, Data: DataLayer,
		OwnAddress: NetworkPodIP, ClusterNetwork: true, NumericUser: true, Cluster: true,
		Networks:   []NetworkMode{NetworkPodIP, NetworkService, NetworkNodePort, NetworkHostNetwork},
		Placements: []DataPlacement{DataLayer, DataEmptyDir, DataEmptyDirMemory, DataHostPath, DataLocalPV}}},
	// A QEMU guest of ctrperf's own: the services are processes of the
	// guest (its agent deploys them as the host runtime does), dialled at
	// the guest's address; their data on the guest's disk.
	{RuntimeVM, RuntimeTraits{Processes: true, Guest: true, Network: NetworkHost, Data: DataBind,
		Networks: []NetworkMode{NetworkHost}, Placements: []DataPlacement{DataBind, DataTmpfs}}},
}

// A container engine's networks and data placements (Docker's).
var (
	containerNetworks   = []NetworkMode{NetworkHost, NetworkPublished, NetworkPublishedExternal, NetworkContainerIP}
	containerPlacements = []DataPlacement{DataLayer, DataVolume, DataBind, DataTmpfs}
)

// Traits returns what r is; an unknown runtime has none (the plan refuses
// it by name).
func (r Runtime) Traits() RuntimeTraits {
	for _, row := range runtimeTable {
		if row.runtime == r {
			return row.traits
		}
	}
	return RuntimeTraits{}
}

// Known says whether r is a runtime a plan may name.
func (r Runtime) Known() bool {
	for _, row := range runtimeTable {
		if row.runtime == r {
			return true
		}
	}
	return false
}

// runtimeNames are the runtimes a plan may name.
func runtimeNames() []string {
	out := make([]string, len(runtimeTable))
	for i, row := range runtimeTable {
		out[i] = string(row.runtime)
	}
	return out
}

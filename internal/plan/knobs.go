package plan

// The vocabulary of a configuration: where it runs, how the load reaches
// it, where its data lives, what it may use, and which Docker engine. The
// engine deploys these as they are (internal/engine aliases them).

// Runtime says where a workload runs.
type Runtime string

const (
	RuntimeHost   Runtime = "host"   // processes directly on the machine
	RuntimeDocker Runtime = "docker" // containers through the Docker Engine API
	// RuntimePodman: containers of rootful Podman, through the
	// Docker-compatible API of a `podman system service` of ctrperf's own.
	RuntimePodman Runtime = "podman"
	// RuntimeVM is a QEMU guest (seed 003's "KVM vs Docker"), described by
	// the vm: block (vm.go): accel kvm where a stock guest boots under KVM
	// (else not_run with `ctrperf doctor`'s reason), tcg (emulated) when a
	// plan asks for it.
	RuntimeVM Runtime = "vm"
)

// NetworkMode is how the load generator reaches the workload.
type NetworkMode string

const (
	// NetworkHost: container shares the host's network namespace (--net=host);
	// for the host runtime this is the only mode.
	NetworkHost NetworkMode = "host"
	// NetworkPublished: the port is published and the client dials
	// 127.0.0.1:port (docker-proxy when the userland proxy is on, hairpin NAT
	// when it is off).
	NetworkPublished NetworkMode = "published"
	// NetworkPublishedExternal: the client runs in a network namespace of
	// ctrperf's own, linked to the host by a veth pair in 198.18.0.0/15, and
	// dials the host side, so traffic takes iptables DNAT like a separate
	// load machine.
	NetworkPublishedExternal NetworkMode = "published-external"
	// NetworkContainerIP: the client dials the container's bridge IP directly
	// (what --link gave).
	NetworkContainerIP NetworkMode = "container-ip"
)

// DataPlacement is where a service writes its data directory.
type DataPlacement string

const (
	DataLayer  DataPlacement = "layer"  // the container's writable layer
	DataVolume DataPlacement = "volume" // a named Docker volume
	DataBind   DataPlacement = "bind"   // a host directory bind-mounted
	DataTmpfs  DataPlacement = "tmpfs"  // a tmpfs mount
)

// Resources limits a service. Zero values mean "no limit".
type Resources struct {
	CPUSet      string  `json:"cpuset,omitempty" yaml:"cpuset,omitempty"`             // e.g. "0" or "0-1"
	CPUShares   int64   `json:"cpu_shares,omitempty" yaml:"cpu_shares,omitempty"`     // relative weight (docker -c)
	CPUs        float64 `json:"cpus,omitempty" yaml:"cpus,omitempty"`                 // CFS quota in CPUs
	MemoryBytes int64   `json:"memory_bytes,omitempty" yaml:"memory_bytes,omitempty"` // docker -m
}

// EngineSpec selects a Docker engine. The zero value is the default engine:
// the one DOCKER_HOST or the default socket answers on, or else a private one
// ctrperf starts.
type EngineSpec struct {
	StorageDriver string `json:"storage_driver,omitempty" yaml:"storage_driver,omitempty"` // overlay2, btrfs, vfs, ...
	// DataRoot: "" or "native" (a directory on the host's filesystem), or
	// "loop-ext4", "loop-xfs", "loop-btrfs": a loop-mounted image file.
	DataRoot      string `json:"data_root,omitempty" yaml:"data_root,omitempty"`
	UserlandProxy *bool  `json:"userland_proxy,omitempty" yaml:"userland_proxy,omitempty"`
	// Nested runs the engine inside a container of the default engine
	// (Docker in Docker, seed 003): storage_driver is the inner engine's;
	// its containers share the host's network (network: host only).
	Nested bool `json:"nested,omitempty" yaml:"nested,omitempty"`
	// Kube is the kubernetes: block of runtime kubernetes (not a knob of
	// engine:): the cluster and what its engine does for the
	// configuration, one engine per distinct block.
	Kube KubeSpec `json:"-" yaml:"-"`
	// VM is the vm: block of runtime vm: one guest per distinct block.
	VM VMSpec `json:"-" yaml:"-"`
}

// IsDefault reports whether the spec asks for nothing beyond the default engine.
func (s EngineSpec) IsDefault() bool {
	return s.StorageDriver == "" && (s.DataRoot == "" || s.DataRoot == "native") && s.UserlandProxy == nil && !s.Nested
}

// Key is a stable short name for the spec, used to share one private engine
// between runs that ask for the same knobs.
func (s EngineSpec) Key() string {
	if s.Kube != (KubeSpec{}) {
		return s.Kube.Key()
	}
	if s.VM != (VMSpec{}) {
		return s.VM.Key()
	}
	if s.IsDefault() {
		return "default"
	}
	if s.Nested {
		d := s.StorageDriver
		if d == "" {
			d = "overlay2"
		}
		return "nested-" + d
	}
	k := s.StorageDriver
	if k == "" {
		k = "auto"
	}
	dr := s.DataRoot
	if dr == "" {
		dr = "native"
	}
	k += "-" + dr
	if s.UserlandProxy != nil {
		if *s.UserlandProxy {
			k += "-proxy"
		} else {
			k += "-noproxy"
		}
	}
	return k
}

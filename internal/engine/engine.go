// Package engine is where a workload runs: on the host (the bare-metal
// baseline) or in Docker containers, optionally on a private Docker engine
// started with daemon-level knobs (storage driver, data root, userland proxy).
//
// Every object an engine creates carries the label LabelManaged (and LabelRun
// with the run id) or the prefix NamePrefix in its name, so that Teardown and
// `ctrperf clean` can find it again after any kind of exit.
package engine

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Labels and names that mark everything ctrperf creates.
const (
	LabelManaged = "ctrperf.managed" // value "true"
	LabelRun     = "ctrperf.run"     // value: the run id
	LabelService = "ctrperf.service" // value: the service name inside a deployment
	NamePrefix   = "ctrperf"
	// GeneratorCgroupPrefix names the cgroup a load generator moves
	// itself into, ctrperf/generator-<pid> (package load's
	// ProtectGenerator); Clean removes such a group once it is empty.
	GeneratorCgroupPrefix = "generator-"
)

// Runtime says where a workload runs.
type Runtime string

const (
	RuntimeHost   Runtime = "host"   // processes directly on the machine
	RuntimeDocker Runtime = "docker" // containers through the Docker Engine API
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

// ReadyCheck says how to know a service is ready to take load.
type ReadyCheck struct {
	Port     int           // port to probe (container port)
	HTTPPath string        // if set, GET must answer 2xx; otherwise a TCP connect suffices
	Timeout  time.Duration // overall; default 60 s
}

// Service is one process (host) or container (docker) of a deployment.
//
// Command, HostCommand and Env values may contain templates the engine
// substitutes at deploy time, so that a workload need not know the runtime:
//
//	{{port:SVC:PORT}}  the port SVC really listens on in its own network
//	                   namespace: PORT unchanged on a docker bridge network; a
//	                   free port the engine allocated on the host runtime and
//	                   with docker --net=host, where everything shares the
//	                   host's ports. A declared port that the service's own
//	                   argv/env never references this way stays where it is
//	                   and must be free.
//	{{addr:SVC:PORT}}  host:port by which OTHER services reach SVC: the
//	                   container name and PORT on the run's bridge network
//	                   (the service name works too, as a network alias);
//	                   127.0.0.1 and the allocated port on a shared network.
//	{{data:SVC}}       SVC's DataDir as its process sees it: DataDir inside a
//	                   container; /var/lib/ctrperf/host/<run>/<svc> on the host.
//
// An unknown service or undeclared port is a deploy error.
type Service struct {
	Name        string            // short name, unique within the deployment ("app", "db")
	Image       string            // image reference for the docker runtime
	Command     []string          // argv inside the container (and on the host unless HostCommand is set)
	HostCommand []string          // argv on the host, when it differs
	Env         map[string]string // environment
	Ports       []int             // TCP ports the service listens on
	DataDir     string            // directory it writes to; the placement applies here
	Resources   Resources
	Ready       *ReadyCheck
	// Labels are extra container labels (docker runtime only), such as
	// ctrperf.isolate=true to opt in to the isolate controller. They never
	// override the run's own ctrperf.* labels.
	Labels map[string]string
	// Keep the container alive with this argv when Command exits immediately
	// (e.g. a tool image used only through Exec). Empty: Command is the main process.
	User string // optional user to run as inside the container
}

// DeploySpec is everything an engine needs to deploy one configuration.
type DeploySpec struct {
	RunID    string        // unique per run; goes into labels and names
	Network  NetworkMode   // how the client reaches the front service
	Data     DataPlacement // where DataDir of each service lives
	Services []Service     // the first one is the front service the load targets
}

// Endpoint is an address the load generator dials.
type Endpoint struct {
	Service string `json:"service"`
	Port    int    `json:"port"` // the service's own port
	Addr    string `json:"addr"` // host:port to dial from the client's side
}

// Container identifies a deployed container (or host process group).
type Container struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Service string `json:"service"`
	IP      string `json:"ip,omitempty"`
	PID     int    `json:"pid,omitempty"` // init process on the host
	// CgroupParent-relative path of the container's cgroup (e.g.
	// "/docker/<id>"), the same below every controller on v1.
	CgroupPath string `json:"cgroup_path,omitempty"`
}

// Target is a deployed configuration.
type Target struct {
	RunID      string
	Runtime    Runtime
	Network    NetworkMode
	Endpoints  []Endpoint
	Containers []Container
	// Dial is how the client connects (through a network namespace for
	// published-external). Nil means net.Dialer{}.DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Netns names the network namespace the client must run in
	// (published-external), for load tools that are separate programs:
	// `ip netns exec <Netns> wrk ...`. Empty: the host's namespace.
	Netns string
	// Private is the engine's own bookkeeping.
	Private any
}

// Endpoint returns the endpoint of a service port.
func (t *Target) Endpoint(service string, port int) (Endpoint, error) {
	for _, e := range t.Endpoints {
		if e.Service == service && (port == 0 || e.Port == port) {
			return e, nil
		}
	}
	return Endpoint{}, fmt.Errorf("target %s has no endpoint for service %q port %d", t.RunID, service, port)
}

// Dialer returns the dial function of the target, never nil.
func (t *Target) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.Dial != nil {
		return t.Dial
	}
	var d net.Dialer
	return d.DialContext
}

// ExecResult is the outcome of a command run inside a deployed service.
type ExecResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// Info describes an engine.
type Info struct {
	Runtime       Runtime `json:"runtime"`
	Name          string  `json:"name"`                     // "host", "default", or the private engine's name
	Version       string  `json:"version,omitempty"`        // dockerd version
	StorageDriver string  `json:"storage_driver,omitempty"` // as the daemon reports it
	DataRoot      string  `json:"data_root,omitempty"`
	BackingFS     string  `json:"backing_fs,omitempty"`
	UserlandProxy *bool   `json:"userland_proxy,omitempty"`
	Private       bool    `json:"private"` // started by ctrperf
}

// Engine deploys workloads. Implementations: Host and Docker.
type Engine interface {
	Info(ctx context.Context) (Info, error)
	Deploy(ctx context.Context, spec DeploySpec) (*Target, error)
	// Exec runs argv inside a deployed service (host: as a child in the
	// service's cgroup; docker: docker exec) and waits for it.
	Exec(ctx context.Context, t *Target, service string, argv []string) (ExecResult, error)
	// Teardown removes everything Deploy created. It must be safe to call
	// with a partially deployed target and more than once.
	Teardown(ctx context.Context, t *Target) error
	// Close releases the engine (stops a private dockerd ctrperf started).
	Close(ctx context.Context) error
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
}

// IsDefault reports whether the spec asks for nothing beyond the default engine.
func (s EngineSpec) IsDefault() bool {
	return s.StorageDriver == "" && (s.DataRoot == "" || s.DataRoot == "native") && s.UserlandProxy == nil
}

// Key is a stable short name for the spec, used to share one private engine
// between runs that ask for the same knobs.
func (s EngineSpec) Key() string {
	if s.IsDefault() {
		return "default"
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

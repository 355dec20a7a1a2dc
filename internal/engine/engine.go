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

	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// Labels and names that mark everything ctrperf creates.
const (
	LabelManaged = labels.Managed // value "true"
	LabelRun     = labels.Run     // value: the run id
	LabelService = labels.Service // value: the service name inside a deployment
	NamePrefix   = "ctrperf"
	// GeneratorCgroupPrefix names the cgroup a load generator moves
	// itself into, ctrperf/generator-<pid> (package load's
	// ProtectGenerator); Clean removes such a group once it is empty.
	GeneratorCgroupPrefix = "generator-"
)

// The engine speaks the plan's vocabulary: what a configuration asks for
// (runtime, network mode, data placement, resources, engine knobs) is
// defined by the plan schema, and deployed here as it is.
type (
	Runtime       = plan.Runtime
	NetworkMode   = plan.NetworkMode
	DataPlacement = plan.DataPlacement
	Resources     = plan.Resources
	EngineSpec    = plan.EngineSpec
)

const (
	RuntimeHost              = plan.RuntimeHost
	RuntimeDocker            = plan.RuntimeDocker
	RuntimePodman            = plan.RuntimePodman
	RuntimeVM                = plan.RuntimeVM
	NetworkHost              = plan.NetworkHost
	NetworkPublished         = plan.NetworkPublished
	NetworkPublishedExternal = plan.NetworkPublishedExternal
	NetworkContainerIP       = plan.NetworkContainerIP
	DataLayer                = plan.DataLayer
	DataVolume               = plan.DataVolume
	DataBind                 = plan.DataBind
	DataTmpfs                = plan.DataTmpfs
)

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
//	{{host:SVC}}       the host part of {{addr:SVC:PORT}}.
//	{{data:SVC}}       SVC's DataDir as its process sees it: DataDir inside a
//	                   container; /var/lib/ctrperf/host/<run>/<svc> on the host.
//	{{listen:SVC}}     the address SVC should listen on: 0.0.0.0 in a
//	                   network namespace of its own (a bridge network),
//	                   127.0.0.1 when it shares the host's (host runtime,
//	                   docker --net=host), so it never listens on the
//	                   machine's real interfaces — except the front
//	                   service of a spec with Reach, which listens on
//	                   Reach.Addr, the one the load host dials.
//
// An unknown service or undeclared port is a deploy error.
type Service struct {
	Name  string // short name, unique within the deployment ("app", "db")
	Image string // image reference for the docker runtime
	// Build, when set, is how Image is made when the engine lacks it: a
	// Dockerfile context on this machine that the runner builds locally
	// (never pulling) before the deploy. The engine itself only deploys
	// images that exist.
	Build *BuildContext
	// Entrypoint replaces the image's ENTRYPOINT (docker runtime); nil
	// keeps it. Command is then its arguments, as with `docker run
	// --entrypoint`.
	Entrypoint  []string
	Command     []string          // argv inside the container (and on the host unless HostCommand is set)
	HostCommand []string          // argv on the host, when it differs
	Env         map[string]string // environment
	Ports       []int             // TCP ports the service listens on
	DataDir     string            // directory it writes to; the placement applies here
	Resources   Resources
	// Privileged runs the container with --privileged (docker runtime
	// only; the host engine refuses it).
	Privileged bool
	Ready      *ReadyCheck
	// Labels are extra container labels (docker runtime only), such as
	// ctrperf.isolate=true to opt in to the isolate controller. They never
	// override the run's own ctrperf.* labels.
	Labels map[string]string
	User   string // optional user to run as inside the container
	// HostFiles are files of the engine's host bound read-only into the
	// container at the same paths (docker runtime): a VM guest's ctrperf
	// binary into the containers of its engine (runtime vm with docker).
	HostFiles []string
}

// BuildContext is a Dockerfile context directory that builds a service's
// image (see Service.Build).
type BuildContext struct {
	Dir        string // absolute directory sent to the builder
	Dockerfile string // path of the Dockerfile inside Dir ("Dockerfile")
	// Name is the image's short name (the ctrperf.image label), which
	// `ctrperf images list` shows and `ctrperf images rm NAME` takes.
	Name string
	// Content is the context's content hash when the plan was read; a
	// build refuses a context that changed since (one plan, one program).
	Content string
}

// DeploySpec is everything an engine needs to deploy one configuration.
type DeploySpec struct {
	RunID    string        // unique per run; goes into labels and names
	Network  NetworkMode   // how the client reaches the front service
	Data     DataPlacement // where DataDir of each service lives
	Services []Service     // the first one is the front service the load targets
	// DataRoot, when set, is the host directory the services' data
	// directories are made under instead of the engine's own (the host
	// runtime's <DataRoot>/<run>/<svc>, docker's bind sources): a data
	// filesystem of the run's (the plan's filesystem knob).
	DataRoot string
	// Reach, when set, is the load host of a two-host plan: the front
	// service is served on Reach.Addr as a client elsewhere dials it, and
	// only Reach.From gets in (see Reach). Nil: a client on this host.
	Reach *Reach `json:"reach,omitempty"`
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

// Info describes an engine, as each run records it.
type Info = results.EngineInfo

// Engine deploys workloads. Implementations: BareMetal (runtime host,
// this machine's processes), Docker (runtime docker, through the Docker
// Engine API; a private or nested daemon too), kube.Kube (runtime
// kubernetes, internal/engine/kube), remote.Engine (an engine of another
// machine through its agent) and, above it, bench's sutEngine (the SUT
// host's engine of a plan's hosts:, with the path from the load host).
type Engine interface {
	Info(ctx context.Context) (Info, error)
	// Ping reports whether the engine still answers: nil, or why not
	// (Unreachable tells an engine that is gone from one that is slow).
	// The host always answers.
	Ping(ctx context.Context) error
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

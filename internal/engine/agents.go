package engine

import (
	"context"
	"io"

	"ctrperf/internal/results"
)

// AgentRole says what an agent started by a NodeAgents engine is for.
type AgentRole string

const (
	// AgentSampler samples a node where the services run: it sees the
	// node's PID namespace, /proc, /sys and cgroup hierarchy (one per node
	// and session, reused by every run of the session on that node).
	AgentSampler AgentRole = "sampler"
	// AgentClient drives load from inside the cluster: a pod of ctrperf's
	// own image on the pod network, without the host's namespaces (one per
	// run and index, so that several generators run side by side).
	AgentClient AgentRole = "client"
)

// AgentRequest asks a NodeAgents engine for an agent.
type AgentRequest struct {
	Role AgentRole
	// Node is the node's name; "" lets the cluster choose.
	Node string
	// RunID and Index tell client agents apart (Index 0, 1, … of a run).
	RunID string
	Index int
}

// AgentConn is a running `ctrperf agent`'s standard streams:
// remote.NewClient speaks the agent protocol over Stdout and Stdin. Close
// ends the agent and releases what was started for it.
type AgentConn struct {
	Stdout io.Reader
	Stdin  io.WriteCloser
	Close  func() error
	// Node and Pod name where the agent runs, for records and errors.
	Node, Pod string
}

// NodeAgents is implemented by engines whose services run on machines
// other than this one (runtime kubernetes). Package bench finds it by a
// type assertion on the Engine, so that it samples a service on its own
// node and drives load from pods without importing the engine's package.
type NodeAgents interface {
	StartAgent(ctx context.Context, req AgentRequest) (*AgentConn, error)
	// NodeOf is the node that runs service svc of t ("" when unknown).
	NodeOf(t *Target, svc string) string
}

// RunObserver samples a run (bench's Observer).
type RunObserver interface {
	Start(ctx context.Context) error
	Stop() *results.Series
}

// ObservedElsewhere is implemented by engines whose services run on
// another kernel that the engine reaches itself (runtime vm's guest):
// bench asks it for the run's observer instead of sampling this machine,
// which is not where the services run.
type ObservedElsewhere interface {
	Observer(t *Target) RunObserver
}

// GuestHost is implemented by engines whose services run on a machine
// of their own that ctrperf started (runtime vm's guest): bench records
// that machine among OUT/env.json's hosts, as it does a plan's SSH hosts.
type GuestHost interface {
	Host() results.HostInfo
}

// RelayedPath is implemented by engines whose services the load reaches
// through a relay of the runtime's own (runtime vm's user-mode network:
// QEMU's slirp relays every connection in userspace): bench puts the path
// the engine describes, nil when there is no relay, in every run's record,
// as it does the path of a load host elsewhere.
type RelayedPath interface {
	Path(t *Target) *results.NetPath
}

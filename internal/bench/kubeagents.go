package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/selfbin"
)

// Sampling where a run's pods run: an engine whose services run on a
// cluster's nodes (engine.NodeAgents, runtime kubernetes) has each pod's
// cgroup, and the node's CPU, interrupts and disks, sampled by the
// sampler agent on that node (an agent pod with the node's /proc, /sys and
// cgroups), never by this machine, which is not where the pods run. An
// agent that cannot start or answer leaves the run's series unavailable
// with why, never this machine's samples in its place.

func newNodeObserver(na engine.NodeAgents, t *engine.Target, session string) *nodeObserver {
	return &nodeObserver{agents: na, t: t, session: session, created: time.Now(), build: agentBuild()}
}

// agentBuild is this ctrperf's binary's hash, which an agent pod's binary
// must match ("" when unknown, as in a test binary: then unchecked).
func agentBuild() string {
	b, err := selfbin.Read()
	if err != nil {
		return ""
	}
	return b.Hash
}

// nodeObserver samples a run's pods through the sampler agent of each of
// their nodes. The first node is the front service's: its CPU, interrupts
// and disks are the series'; the other nodes add their pods' cgroups to
// the sample nearest in time.
type nodeObserver struct {
	agents  engine.NodeAgents
	t       *engine.Target
	session string
	build   string
	// created is about when the run's observer clock started (the
	// runner's obsStart): sample times are moved to count from it, since
	// the agents start seconds later (a pod made, an exec, a hello).
	created time.Time
	nodes   []*nodeSampler
}

// nodeSampler is one node's agent session.
type nodeSampler struct {
	node string
	pods []agent.PodCgroup
	conn *engine.AgentConn
	c    *remote.Client
	o    *remote.Observer
}

// podsByNode are the target's pods by node, the front service's node
// first. A pod's engine.Container.ID is its UID (runtime kubernetes).
func podsByNode(na engine.NodeAgents, t *engine.Target) ([]*nodeSampler, error) {
	front := ""
	if len(t.Endpoints) > 0 {
		front = t.Endpoints[0].Service
	}
	byNode := map[string]*nodeSampler{}
	first := ""
	for _, c := range t.Containers {
		name := cmp.Or(c.Service, c.Name)
		node := na.NodeOf(t, c.Service)
		if node == "" {
			return nil, fmt.Errorf("the node of pod %s (service %s) is unknown", c.Name, name)
		}
		if c.ID == "" {
			return nil, fmt.Errorf("pod %s (service %s) has no UID", c.Name, name)
		}
		ns := byNode[node]
		if ns == nil {
			ns = &nodeSampler{node: node}
			byNode[node] = ns
		}
		ns.pods = append(ns.pods, agent.PodCgroup{Name: name, UID: c.ID})
		if first == "" || c.Service == front {
			first = node
		}
	}
	if len(byNode) == 0 {
		return nil, errors.New("the run has no pods")
	}
	out := []*nodeSampler{byNode[first]}
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		if n != first {
			out = append(out, byNode[n])
		}
	}
	return out, nil
}

// Start starts the sampler agent of each node and its samplers. Any
// failure is the run's observer error, which its series records.
func (o *nodeObserver) Start(ctx context.Context) error {
	nodes, err := podsByNode(o.agents, o.t)
	if err != nil {
		return fmt.Errorf("failed: sampling on the pods' nodes: %w", err)
	}
	for _, ns := range nodes {
		if err := o.start(ctx, ns); err != nil {
			o.close()
			return fmt.Errorf("failed: sampler agent on node %s: %w", ns.node, err)
		}
		o.nodes = append(o.nodes, ns)
	}
	return nil
}

// agentImageError says what to do when an agent pod's image holds another
// ctrperf than this one.
func agentImageError(err error) error {
	if errors.Is(err, &agent.Error{Code: agent.CodeVersion}) {
		return fmt.Errorf("%w: its image holds another ctrperf than this one; `make images && make kube-images` puts this one on the lab's nodes (elsewhere: import ctrperf/pause:latest into each node's runtime)", err)
	}
	return err
}

func (o *nodeObserver) start(ctx context.Context, ns *nodeSampler) error {
	conn, err := o.agents.StartAgent(ctx, engine.AgentRequest{Role: engine.AgentSampler, Node: ns.node})
	if err != nil {
		return err
	}
	ns.conn = conn
	c, err := remote.NewClient(ctx, conn.Stdout, conn.Stdin, remote.ClientOptions{Name: fmt.Sprintf("agent pod %s on %s", conn.Pod, ns.node),
		Session: o.session, Closer: closerFunc(conn.Close), Build: o.build})
	if err != nil {
		conn.Close()
		ns.conn = nil
		return agentImageError(err)
	}
	ns.c = c
	ns.o = remote.NewObserver(c, o.t.RunID, o.t).SamplePods(ns.pods).From(o.created)
	if err := ns.o.Start(ctx); err != nil {
		// The session is not in o.nodes yet: close it here, or its
		// client heartbeats until the namespace goes.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = c.Close(cctx)
		cancel()
		ns.c, ns.conn, ns.o = nil, nil, nil
		return err
	}
	return nil
}

// close ends the agents' sessions (their pods stay for the next run).
func (o *nodeObserver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range o.nodes {
		if ns.c != nil {
			_ = ns.c.Close(ctx)
		} else if ns.conn != nil {
			_ = ns.conn.Close()
		}
	}
	o.nodes = nil
}

// Stop ends sampling on every node and returns one series: the first
// node's, its times counted from the run's observer start, with the other
// nodes' pods added and every agent named in Sources.
func (o *nodeObserver) Stop() *results.Series {
	if len(o.nodes) == 0 {
		return nil
	}
	var all []*results.Series
	for _, ns := range o.nodes {
		all = append(all, ns.o.Stop())
	}
	out := all[0]
	for i, ns := range o.nodes {
		src := results.SeriesSource{Node: ns.node, Agent: ns.conn.Pod, Hostname: ns.c.Hello.Facts.Hostname}
		for _, p := range ns.pods {
			src.Pods = append(src.Pods, p.Name)
		}
		out.Sources = append(out.Sources, src)
		if i > 0 {
			mergeNodeSeries(out, all[i], ns.node)
		}
	}
	o.close()
	return out
}

// mergeNodeSeries adds the containers of another node's series to the
// sample of out nearest in time (within half an interval), and its
// unavailable samplers under the node's name.
func mergeNodeSeries(out, s *results.Series, node string) {
	for k, v := range s.Unavailable {
		if out.Unavailable == nil {
			out.Unavailable = map[string]string{}
		}
		out.Unavailable[node+": "+k] = v
	}
	half := math.Max(out.IntervalS, s.IntervalS) / 2
	lost := 0
	for _, smp := range s.Samples {
		best, dist := -1, math.Inf(1)
		for i, o := range out.Samples {
			if d := math.Abs(o.T - smp.T); d < dist {
				best, dist = i, d
			}
		}
		if best < 0 || dist > half {
			lost += len(smp.Containers)
			continue
		}
		for name, c := range smp.Containers {
			if out.Samples[best].Containers == nil {
				out.Samples[best].Containers = map[string]results.ContainerStats{}
			}
			out.Samples[best].Containers[name] = c
		}
	}
	if lost > 0 {
		if out.Unavailable == nil {
			out.Unavailable = map[string]string{}
		}
		out.Unavailable[node+": unmatched"] = fmt.Sprintf("%d container samples of node %s had no sample of the first node within %.2f s", lost, node, half)
	}
}

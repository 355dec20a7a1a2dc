package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// cluster is the site of a runtime whose services run on a cluster's
// nodes (RuntimeTraits.Cluster): its engine is opened here, as this
// machine's are, and starts agents on the nodes (engine.NodeAgents). Each
// pod's cgroup, and its node's CPU, interrupts and disks, are sampled by
// the sampler agent on that node (kubeagents.go), never by this machine,
// which is not where the pods run. The load comes from here, or, with
// kubernetes.client: pod, from N generator pods of ctrperf's own image
// (kubernetes.clients, placed on kubernetes.client_node), each a `ctrperf
// agent` that runs the workload's own driver against the target's
// endpoints, which are addresses of the cluster (pod IP, ClusterIP, a
// node's NodePort, a node's address for hostNetwork) and so what a pod
// dials (fanOut).
type cluster struct {
	thisMachine
}

// observer samples the run's pods on their nodes. An engine that starts
// no agents there cannot be sampled: the run's series says so, rather
// than holding this machine's samples.
func (s *cluster) observer(eng engine.Engine, t *engine.Target) Observer {
	na, ok := eng.(engine.NodeAgents)
	if !ok {
		return failedObserver{fmt.Errorf("failed: the engine (%s) starts no sampler agents on the cluster's nodes", s.cfg.Runtime)}
	}
	return newNodeObserver(na, t, s.r.session)
}

// driver is the workload's driver here, or the generator pods.
func (s *cluster) driver(rn *run) workload.Workload {
	n := s.cfg.Kube.ClientPods()
	if n == 0 {
		return s.r.wl
	}
	return &fanOut{Workload: s.r.wl, cfg: s.cfg, runID: rn.id, n: n, merge: mergeClientPods,
		gens: &clientPods{eng: rn.eng, node: s.cfg.Kube.ClientNode, runID: rn.id, session: s.r.session, build: agentBuild()}}
}

// failedObserver is an observer that cannot start.
type failedObserver struct{ err error }

func (o failedObserver) Start(context.Context) error { return o.err }
func (o failedObserver) Stop() *results.Series       { return nil }

// clientPods are a run's generator pods.
type clientPods struct {
	eng     engine.Engine
	node    string
	runID   string
	session string
	// build is this ctrperf's binary hash, which each pod's agent must
	// have: an old ctrperf/pause image must not generate the load under a
	// new build's record.
	build string

	mu    sync.Mutex
	conns map[int]*engine.AgentConn // by generator index
}

var _ generators = (*clientPods)(nil)

// clientPodsUnavailable is a configuration whose generator pods cannot
// exist here: every repetition would fail alike (not_run).
type clientPodsUnavailable struct{ reason string }

func (e *clientPodsUnavailable) Error() string     { return e.reason }
func (e *clientPodsUnavailable) NotRunnable() bool { return true }

func podName(k int, conn *engine.AgentConn) string {
	if conn == nil {
		return fmt.Sprintf("client pod %d", k)
	}
	return fmt.Sprintf("client pod %d (%s on %s)", k, conn.Pod, conn.Node)
}

// start starts the n agents at once and opens a session to each (hello,
// clock offset). The first failure cancels the others; the error names
// the pod.
func (p *clientPods) start(ctx context.Context, gens []*generator) error {
	na, ok := p.eng.(engine.NodeAgents)
	if !ok {
		return &clientPodsUnavailable{fmt.Sprintf("kubernetes.client: pod: the engine (%T) starts no agent pods", p.eng)}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range gens {
		g := &generator{k: i + 1, name: podName(i+1, nil)}
		gens[i] = g
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				err = fmt.Errorf("%s of %d: %w", g.name, len(gens), err)
				errs = append(errs, err)
				mu.Unlock()
				cancel(err)
			}
			conn, err := na.StartAgent(ctx, engine.AgentRequest{Role: engine.AgentClient, Node: p.node, RunID: p.runID, Index: i})
			if err != nil {
				fail(fmt.Errorf("start: %w", err))
				return
			}
			mu.Lock()
			g.name = podName(g.k, conn)
			g.close = func(context.Context) { _ = conn.Close() }
			mu.Unlock()
			p.mu.Lock()
			if p.conns == nil {
				p.conns = map[int]*engine.AgentConn{}
			}
			p.conns[i] = conn
			p.mu.Unlock()
			c, err := remote.NewClient(ctx, conn.Stdout, conn.Stdin, remote.ClientOptions{Name: g.name, Session: p.session,
				Closer: closerFunc(conn.Close), Build: p.build})
			if err != nil {
				fail(agentImageError(err))
				return
			}
			mu.Lock()
			g.client = c
			g.offset = c.Clock.Offset()
			// The session closes the conn after its shutdown.
			g.close = func(ctx context.Context) { _ = c.Close(ctx) }
			mu.Unlock()
		}()
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return errors.Join(errs...)
}

// stop ends every agent started: its session (the agent stops its
// driver), then its pod. Detached from the run's context, which may be
// cancelled already.
func (p *clientPods) stop(ctx context.Context, gens []*generator) {
	stopGenerators(ctx, gens)
}

// stopGenerators closes every generator that has something to close, at
// once, detached from ctx.
func stopGenerators(ctx context.Context, gens []*generator) {
	cctx, cancel := lifecycle.Detached(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range gens {
		if g == nil || g.close == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.close(cctx)
		}()
	}
	wg.Wait()
}

// ClientPodMetric names generator pod k's (1-based) copy of a metric in a
// merged measurement: client_pod_2_throughput_per_s.
func ClientPodMetric(k int, metric string) string {
	return "client_pod_" + strconv.Itoa(k) + "_" + metric
}

// mergeClientPods adds the measurements of generators that drove one
// deployment side by side over one window into the run's one
// (results.MergeSideBySide): histograms added, so latencies are those of
// every request of every pod, never averaged; error_rate weighted by the
// pods' requests; counts and rates summed; the server's own counters,
// which every pod read over the same window, the largest reading; each
// pod's throughput and p99 under client_pod_<k>_<metric>.
func mergeClientPods(ms []*results.Measurement) (*results.Measurement, error) {
	out, err := results.MergeSideBySide(ms, results.SideBySide{Part: "client pod", PartMetric: ClientPodMetric, SharedTarget: true})
	if err != nil {
		return nil, err
	}
	out.Metrics["client_pods"] = float64(len(ms))
	return out, nil
}

// describe records where the pods ran, how the load was split, and when
// each pod's window began relative to the first (this machine's clock,
// through each pod's offset): the notes say the same in every run of a
// configuration (a report lists each distinct note once), the figures
// that vary are metrics.
func (p *clientPods) describe(_ context.Context, env workload.Env, m *results.Measurement, gens []*generator, f *fanOutFacts) {
	nodes := map[string]int{}
	p.mu.Lock()
	for i := range gens {
		if c := p.conns[i]; c != nil {
			nodes[c.Node]++
		}
	}
	p.mu.Unlock()
	var where []string
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		where = append(where, fmt.Sprintf("%d on %s", nodes[n], n))
	}
	first, last := f.starts[0], f.starts[0]
	for _, s := range f.starts {
		if s.Before(first) {
			first = s
		}
		if s.After(last) {
			last = s
		}
	}
	for i, s := range f.starts {
		m.Metrics[ClientPodMetric(i+1, "start_ms")] = float64(s.Sub(first)) / 1e6
	}
	m.Metrics["client_pods_start_skew_ms"] = float64(last.Sub(first)) / 1e6
	// One note: a report (and bench run) shows each note of a run.
	m.Notes = append(m.Notes, fmt.Sprintf("load generated by %d pods of ctrperf's image in the cluster (ctrperf agent; %s), started behind a barrier (client_pods_start_skew_ms: how far apart their measured windows began); %s, so that together they offer the plan's; rates and counts summed over the pods, latencies from their merged histograms",
		len(gens), strings.Join(where, ", "), f.split))
	if late := first.Sub(f.at); late < 0 {
		m.Notes = append(m.Notes, "a pod's window began before the barrier by this machine's clock: its clock offset estimate is off by as much (or its agent does not know the barrier: an old image, `make kube-images`)")
	}
	if env.LoadCPUSet != "" {
		m.Notes = append(m.Notes, fmt.Sprintf("load_cpuset %s pins a generator on this machine: the generator pods were not pinned (their CPUs are the pod's)", env.LoadCPUSet))
	}
	slices.Sort(m.Notes)
}

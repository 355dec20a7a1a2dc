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

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// Runtime kubernetes with kubernetes.client: pod: the load generator runs
// as N pods of ctrperf's own image (kubernetes.clients, placed on
// kubernetes.client_node), each a `ctrperf agent` that the engine starts
// (engine.NodeAgents) and that runs the workload's own driver against the
// target's endpoints, which are addresses of the cluster (pod IP, ClusterIP,
// a node's NodePort, a node's address for hostNetwork) and so what a pod
// dials. The plan's load is split over the pods (clientShares): together
// they offer what one generator would. The pods start behind a barrier:
// each drive is sent with the same instant of this machine's clock, moved
// to the pod's by its clock offset, at which the agent starts the driver;
// the windows then begin together, give or take each pod's connection
// set-up (their actual starts and the skew are recorded). Their
// measurements merge into one (mergeClientPods): histograms added,
// counts and rates summed, never an average of percentiles.

// kubeClients is the run's driver: r.wl, or the generator pods when the
// configuration asks for them (hosts.go's driverOf, for a local load: the
// plan refuses a load host with client: pod).
func (r *runner) kubeClients(cfg *plan.Configuration, rn *run, wl workload.Workload) workload.Workload {
	if cfg.Runtime != plan.RuntimeKubernetes || cfg.Kube.ClientPods() == 0 {
		return wl
	}
	return &clientPods{Workload: wl, cfg: cfg, runID: rn.id, session: r.session, build: agentBuild()}
}

// clientPods drives the workload from generator pods.
type clientPods struct {
	workload.Workload
	cfg     *plan.Configuration
	runID   string
	session string
	// build is this ctrperf's binary hash, which each pod's agent must
	// have: an old ctrperf/pause image must not generate the load under a
	// new build's record.
	build string
	// lead is how long before the barrier the drives are sent (0: from
	// the pods' round trips, see barrierLead).
	lead time.Duration
}

// clientPodsUnavailable is a configuration whose generator pods cannot
// exist here: every repetition would fail alike (not_run).
type clientPodsUnavailable struct{ reason string }

func (e *clientPodsUnavailable) Error() string     { return e.reason }
func (e *clientPodsUnavailable) NotRunnable() bool { return true }

// clientPod is one generator: its agent's streams and session.
type clientPod struct {
	k      int // 1-based
	conn   *engine.AgentConn
	client *remote.Client
	offset time.Duration // the pod's clock minus this machine's
}

func (p *clientPod) name() string {
	if p.conn == nil {
		return fmt.Sprintf("client pod %d", p.k)
	}
	return fmt.Sprintf("client pod %d (%s on %s)", p.k, p.conn.Pod, p.conn.Node)
}

// Drive starts the pods, drives them together and merges what they
// measured. Every pod started is closed before it returns.
func (d *clientPods) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	na, ok := env.Engine.(engine.NodeAgents)
	if !ok {
		return nil, &clientPodsUnavailable{fmt.Sprintf("kubernetes.client: pod: the engine (%T) starts no agent pods", env.Engine)}
	}
	n := d.cfg.Kube.ClientPods()
	shares, split, err := clientShares(d.cfg, n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pods := make([]*clientPod, n)
	defer closeClientPods(ctx, pods)
	if err := d.start(ctx, na, pods); err != nil {
		return nil, err
	}

	lead := d.lead
	if lead == 0 {
		lead = barrierLead(pods)
	}
	at := time.Now().Add(lead)
	var (
		mu      sync.Mutex
		waiting = n
		starts  = make([]time.Time, n)
		wg      sync.WaitGroup
	)
	ms := make([]*results.Measurement, n)
	errs := make([]error, n)
	for i, p := range pods {
		knobs := workload.KnobsOf(d.cfg)
		knobs.Load = shares[i]
		params := agent.DriveParams{RunID: d.runID, Workload: d.Name(), Knobs: knobs, Resources: d.cfg.Resources,
			Window: env.Window, Target: agent.WireTarget(env.Target), StartAtUnixNano: at.Add(p.offset).UnixNano()}
		started := func(unixNano int64) {
			mu.Lock()
			defer mu.Unlock()
			starts[i] = time.Unix(0, unixNano).Add(-p.offset)
			waiting--
			if waiting == 0 && env.Started != nil {
				env.Started() // every pod's window has begun
			}
		}
		progress := func(msg string) {
			if env.Progress != nil {
				env.Progress(fmt.Sprintf("client pod %d: %s", p.k, msg))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := p.client.Drive(ctx, params, started, progress)
			ms[i] = m
			if err != nil {
				errs[i] = fmt.Errorf("%s of %d: %w", p.name(), n, err)
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	// The first failure is the cause; the others were most likely
	// cancelled by it.
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m, err := mergeClientPods(ms)
	if err != nil {
		return nil, err
	}
	noteClientPods(m, pods, starts, at, split)
	if env.LoadCPUSet != "" {
		m.Notes = append(m.Notes, fmt.Sprintf("load_cpuset %s pins a generator on this machine: the generator pods were not pinned (their CPUs are the pod's)", env.LoadCPUSet))
	}
	return m, nil
}

// start starts the n agents at once and opens a session to each (hello,
// clock offset). The first failure cancels the others; the error names
// the pod.
func (d *clientPods) start(ctx context.Context, na engine.NodeAgents, pods []*clientPod) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range pods {
		p := &clientPod{k: i + 1}
		pods[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				err = fmt.Errorf("%s of %d: %w", p.name(), len(pods), err)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel(err)
			}
			conn, err := na.StartAgent(ctx, engine.AgentRequest{Role: engine.AgentClient, Node: d.cfg.Kube.ClientNode, RunID: d.runID, Index: i})
			if err != nil {
				fail(fmt.Errorf("start: %w", err))
				return
			}
			mu.Lock()
			p.conn = conn
			mu.Unlock()
			c, err := remote.NewClient(ctx, conn.Stdout, conn.Stdin, remote.ClientOptions{Name: p.name(), Session: d.session,
				Closer: closerFunc(conn.Close), Build: d.build})
			if err != nil {
				fail(agentImageError(err))
				return
			}
			mu.Lock()
			p.client = c
			p.offset = c.Clock.Offset()
			mu.Unlock()
		}()
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return errors.Join(errs...)
}

// closerFunc is an AgentConn's Close as the io.Closer a remote.Client
// closes after its shutdown.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// closeClientPods ends every agent started: its session (the agent stops
// its driver), then its pod. Detached from the run's context, which may
// be cancelled already.
func closeClientPods(ctx context.Context, pods []*clientPod) {
	cctx, cancel := lifecycle.Detached(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pods {
		if p == nil || p.conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.client != nil {
				_ = p.client.Close(cctx) // closes the conn too
				return
			}
			_ = p.conn.Close()
		}()
	}
	wg.Wait()
}

// barrierLead is how far ahead of now the barrier is set: time for the
// drive requests to reach every pod (each a round trip or less), with a
// floor for the agents' scheduling.
func barrierLead(pods []*clientPod) time.Duration {
	var rtt time.Duration
	for _, p := range pods {
		rtt = max(rtt, time.Duration(p.client.Clock.RTTMs*float64(time.Millisecond)))
	}
	return min(max(500*time.Millisecond, 10*rtt), 10*time.Second)
}

// clientShares are the load knobs of each of n generator pods: the
// plan's connections (closed loop) or rate (open loop) divided so that
// the pods together offer the plan's load, each pod with its own seed
// (the same seed would give every pod the same arrivals and keys). The
// string says how the load was split, for the record.
func clientShares(cfg *plan.Configuration, n int) ([]map[string]any, string, error) {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = maps.Clone(cfg.Load)
		if out[i] == nil {
			out[i] = map[string]any{}
		}
	}
	var (
		open              bool
		rate              float64
		conns, ops        int64
		maxInFlight       int
		seed              uint64
		closedKey, opsKey = "concurrency", ""
	)
	switch l := cfg.Decoded.Load.(type) {
	case workload.KVLoad:
		if l.Search != nil || l.Client != "host" {
			return nil, "", &clientPodsUnavailable{"kv with kubernetes.client: pod takes neither load.search nor load.client: container"}
		}
		open, rate, conns, ops, maxInFlight, seed, opsKey = l.Mode == "open", l.Rate, l.Concurrency, l.Ops, l.MaxInFlight, l.Seed, "ops"
	case workload.WebLoad:
		if l.Search != nil {
			return nil, "", &clientPodsUnavailable{"web with kubernetes.client: pod takes no load.search"}
		}
		open, rate, conns, maxInFlight, seed = l.Rate > 0, l.Rate, int64(l.Concurrency), l.MaxInFlight, l.Seed
	default:
		return nil, "", &clientPodsUnavailable{fmt.Sprintf("kubernetes.client: pod: the load of workload %T does not split over generator pods", cfg.Decoded.Load)}
	}
	var desc []string
	if open {
		each := rate / float64(n)
		if each < load.MinRate {
			return nil, "", &clientPodsUnavailable{fmt.Sprintf("load.rate %g over %d generator pods is %g per pod, below the generator's least rate %g", rate, n, each, load.MinRate)}
		}
		inflight := (maxInFlight + n - 1) / n
		for i := range out {
			out[i]["rate"] = each
			out[i]["max_inflight"] = int64(inflight)
		}
		desc = append(desc, fmt.Sprintf("open loop: rate %g/s as %d × %g/s, max_inflight %d as %d × %d", rate, n, each, maxInFlight, n, inflight))
	} else {
		if conns < int64(n) {
			return nil, "", &clientPodsUnavailable{fmt.Sprintf("load.concurrency %d over %d generator pods: each pod drives at least one connection", conns, n)}
		}
		cs := splitWhole(conns, n)
		for i := range out {
			out[i][closedKey] = cs[i]
		}
		desc = append(desc, fmt.Sprintf("closed loop: concurrency %d as %s", conns, joinInts(cs)))
		if opsKey != "" && ops > 0 {
			per := splitWhole(ops, n)
			for i := range out {
				out[i][opsKey] = per[i]
			}
			desc = append(desc, fmt.Sprintf("ops %d as %s", ops, joinInts(per)))
		}
	}
	for i := range out {
		out[i]["seed"] = int64(seed) + int64(i)
	}
	desc = append(desc, fmt.Sprintf("seeds %d to %d", seed, seed+uint64(n)-1))
	return out, fmt.Sprintf("the load split over them (%s)", strings.Join(desc, "; ")), nil
}

// splitWhole divides v into n whole shares that differ by one at most,
// the larger first.
func splitWhole(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v / int64(n)
		if int64(i) < v%int64(n) {
			out[i]++
		}
	}
	return out
}

func joinInts(vs []int64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, "+")
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

// noteClientPods records where the pods ran, how the load was split, and
// when each pod's window began relative to the first (this machine's
// clock, through each pod's offset): the notes say the same in every run
// of a configuration (a report lists each distinct note once), the
// figures that vary are metrics.
func noteClientPods(m *results.Measurement, pods []*clientPod, starts []time.Time, at time.Time, split string) {
	nodes := map[string]int{}
	for _, p := range pods {
		nodes[p.conn.Node]++
	}
	var where []string
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		where = append(where, fmt.Sprintf("%d on %s", nodes[n], n))
	}
	first, last := starts[0], starts[0]
	for _, s := range starts {
		if s.Before(first) {
			first = s
		}
		if s.After(last) {
			last = s
		}
	}
	for i, s := range starts {
		m.Metrics[ClientPodMetric(i+1, "start_ms")] = float64(s.Sub(first)) / 1e6
	}
	m.Metrics["client_pods_start_skew_ms"] = float64(last.Sub(first)) / 1e6
	// One note: a report (and bench run) shows each note of a run.
	m.Notes = append(m.Notes, fmt.Sprintf("load generated by %d pods of ctrperf's image in the cluster (ctrperf agent; %s), started behind a barrier (client_pods_start_skew_ms: how far apart their measured windows began); %s, so that together they offer the plan's; rates and counts summed over the pods, latencies from their merged histograms",
		len(pods), strings.Join(where, ", "), split))
	if late := first.Sub(at); late < 0 {
		m.Notes = append(m.Notes, "a pod's window began before the barrier by this machine's clock: its clock offset estimate is off by as much (or its agent does not know the barrier: an old image, `make kube-images`)")
	}
	slices.Sort(m.Notes)
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// podAgents is an engine whose client agents are `ctrperf agent` servers
// run in this process over pipes, as the kube engine's run in pods over
// exec streams.
type podAgents struct {
	mu      sync.Mutex
	reqs    []engine.AgentRequest
	closed  []int
	called  map[int]time.Time // when each pod's driver began (after the barrier)
	decoded map[int]workload.KVLoad
	// delay and startErr shape StartAgent for pod index i; drive replaces
	// the driver's measurement.
	delay    func(i int) time.Duration
	startErr func(i int) error
	drive    func(ctx context.Context, i int, env workload.Env) (*results.Measurement, error)
	// build is the agents' binary hash (drivePods: "new", this
	// ctrperf's, when unset).
	build string
}

var (
	_ engine.Engine     = (*podAgents)(nil)
	_ engine.NodeAgents = (*podAgents)(nil)
)

func (a *podAgents) Info(context.Context) (engine.Info, error) {
	return engine.Info{Name: "fake-cluster"}, nil
}
func (a *podAgents) Ping(context.Context) error { return nil }
func (a *podAgents) Deploy(context.Context, engine.DeploySpec) (*engine.Target, error) {
	return nil, errors.New("not here")
}
func (a *podAgents) Exec(context.Context, *engine.Target, string, []string) (engine.ExecResult, error) {
	return engine.ExecResult{}, errors.New("not here")
}
func (a *podAgents) Teardown(context.Context, *engine.Target) error { return nil }
func (a *podAgents) Close(context.Context) error                    { return nil }
func (a *podAgents) NodeOf(*engine.Target, string) string           { return "" }

func (a *podAgents) StartAgent(ctx context.Context, req engine.AgentRequest) (*engine.AgentConn, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	a.mu.Unlock()
	i := req.Index
	if a.delay != nil {
		select {
		case <-time.After(a.delay(i)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if a.startErr != nil {
		if err := a.startErr(i); err != nil {
			return nil, err
		}
	}
	cr, aw := io.Pipe()
	ar, cw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Serve(context.Background(), ar, aw, agent.Options{Log: io.Discard, Build: func() (string, error) { return a.build, nil },
			Workload: func(string) (workload.Workload, error) { return podDriver{a: a, i: i}, nil }})
		aw.Close()
	}()
	var once sync.Once
	return &engine.AgentConn{Stdout: cr, Stdin: cw, Node: fmt.Sprintf("node-%d", i%2+1), Pod: fmt.Sprintf("ctrperf-client-%d", i),
		Close: func() error {
			once.Do(func() {
				cw.Close()
				<-done
				a.mu.Lock()
				a.closed = append(a.closed, i)
				a.mu.Unlock()
			})
			return nil
		}}, nil
}

// podDriver is kv as the agent in pod i runs it: kv's own knob decoding,
// a driver that records what it got and when.
type podDriver struct {
	a *podAgents
	i int
}

func (podDriver) Name() string                                       { return "kv" }
func (podDriver) Decode(k workload.Knobs) (any, any, error)          { return workload.KV{}.Decode(k) }
func (podDriver) Services(workload.Config) ([]engine.Service, error) { return nil, nil }
func (d podDriver) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	d.a.mu.Lock()
	if d.a.called == nil {
		d.a.called, d.a.decoded = map[int]time.Time{}, map[int]workload.KVLoad{}
	}
	d.a.called[d.i] = time.Now()
	d.a.decoded[d.i] = env.Config.Load.(workload.KVLoad)
	d.a.mu.Unlock()
	if _, err := env.Target.Endpoint("kv", 11211); err != nil {
		return nil, err
	}
	env.Started()
	if d.a.drive != nil {
		return d.a.drive(ctx, d.i, env)
	}
	return samples(map[int64]int{1000: 100}), nil
}

// samples is a measurement of one operation whose latencies (µs) are
// given as value → count, over a 1 s window.
func samples(vs map[int64]int) *results.Measurement {
	h := results.NewHistogram()
	var n int64
	for v, c := range vs {
		_ = h.RecordValues(v, int64(c))
		n += int64(c)
	}
	enc, _ := results.EncodeHistogram(h)
	return &results.Measurement{DurationS: 1, Operations: map[string]*results.Operation{"set": {Count: n, Histogram: enc}},
		Metrics: map[string]float64{results.MetricThroughput: float64(n), results.MetricElapsed: 1, "get_hits": 3},
		Load:    &results.LoadStats{Mode: "closed", Concurrency: 2}}
}

// podsConfig is a kv configuration with client: pod and n pods.
func podsConfig(t *testing.T, n int, ld map[string]any) *plan.Configuration {
	t.Helper()
	l, err := workload.ParseKVLoad(ld)
	if err != nil {
		t.Fatal(err)
	}
	c := &plan.Configuration{Name: "pods"}
	c.Runtime, c.Network = plan.RuntimeKubernetes, plan.NetworkService
	c.Kube = plan.KubeSpec{Client: "pod", Clients: n, ClientNode: "node-2"}
	c.Load = ld
	c.Decoded.Load = l
	return c
}

func podsEnv(started *int) workload.Env {
	return workload.Env{Target: &engine.Target{RunID: "r1", Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService,
		Endpoints: []engine.Endpoint{{Service: "kv", Port: 11211, Addr: "10.96.0.10:11211"}}},
		Window: workload.Window{Duration: time.Second}, Started: func() { *started++ }}
}

// podsDriver is the cluster site's driver of cfg's generator pods, on
// eng, for run r1.
func podsDriver(cfg *plan.Configuration, eng engine.Engine, session, build string) *fanOut {
	return &fanOut{Workload: workload.KV{}, cfg: cfg, runID: "r1", n: cfg.Kube.ClientPods(), merge: mergeClientPods,
		gens: &clientPods{eng: eng, node: cfg.Kube.ClientNode, runID: "r1", session: session, build: build}}
}

func drivePods(t *testing.T, a *podAgents, cfg *plan.Configuration) (*results.Measurement, int, error) {
	t.Helper()
	var started int
	env := podsEnv(&started)
	env.Engine = a
	env.LoadCPUSet = "1"
	if a.build == "" {
		a.build = "new"
	}
	d := podsDriver(cfg, a, "s1", "new")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := d.Drive(ctx, env)
	return m, started, err
}

// The merged measurement's p99 is the p99 of every pod's samples
// together: here 1 ms, where the pods' own p99s are 1 ms and 50 ms (their
// average 25.5 ms, their worst 50 ms; both wrong).
func TestClientPodsMergeHistograms(t *testing.T) {
	a := &podAgents{drive: func(_ context.Context, i int, _ workload.Env) (*results.Measurement, error) {
		if i == 0 {
			return samples(map[int64]int{1000: 1000}), nil
		}
		return samples(map[int64]int{1000: 985, 50000: 15}), nil
	}}
	m, started, err := drivePods(t, a, podsConfig(t, 2, map[string]any{"concurrency": 5, "seed": 7}))
	if err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Errorf("Started called %d times, want once (when both windows began)", started)
	}
	op := m.Operations["set"]
	if op == nil || op.Count != 2000 {
		t.Fatalf("merged set: %+v", op)
	}
	h, err := results.DecodeHistogram(op.Histogram)
	if err != nil {
		t.Fatal(err)
	}
	union := results.NewHistogram()
	_ = union.RecordValues(1000, 1985)
	_ = union.RecordValues(50000, 15)
	if got, want := h.ValueAtQuantile(99), union.ValueAtQuantile(99); got != want || got > 1100 {
		t.Errorf("merged p99 %d µs, want the union's %d µs (not the average of 1 and 50 ms)", got, want)
	}
	if got := m.Metrics[ClientPodMetric(2, results.MetricP99Ms)]; got < 49 || got > 51 {
		t.Errorf("pod 2's own p99 %.2f ms, want 50", got)
	}
	if m.Metrics[results.MetricThroughput] != 2000 || m.Metrics["get_hits"] != 6 || m.Metrics[results.MetricElapsed] != 1 {
		t.Errorf("metrics %v", m.Metrics)
	}
	if m.Metrics["client_pods"] != 2 || m.Load.Concurrency != 4 {
		t.Errorf("pods %v, concurrency %d", m.Metrics["client_pods"], m.Load.Concurrency)
	}
	// The load was split: 5 connections as 3 + 2, each pod its own seed.
	if a.decoded[0].Concurrency != 3 || a.decoded[1].Concurrency != 2 || a.decoded[0].Seed != 7 || a.decoded[1].Seed != 8 {
		t.Errorf("pods decoded %+v", a.decoded)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{"the load split over them (closed loop: concurrency 5 as 3+2; seeds 7 to 8)",
		"load generated by 2 pods of ctrperf's image in the cluster (ctrperf agent; 1 on node-1, 1 on node-2), started behind a barrier",
		"load_cpuset 1 pins a generator on this machine: the generator pods were not pinned"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	for _, r := range a.reqs {
		if r.Role != engine.AgentClient || r.Node != "node-2" || r.RunID != "r1" {
			t.Errorf("agent request %+v", r)
		}
	}
	if len(a.closed) != 2 {
		t.Errorf("closed %v, want both agents", a.closed)
	}
}

// A pod that comes up late does not start late: every driver waits for
// the barrier.
func TestClientPodsBarrier(t *testing.T) {
	a := &podAgents{delay: func(i int) time.Duration { return time.Duration(i) * 300 * time.Millisecond }}
	begin := time.Now()
	m, started, err := drivePods(t, a, podsConfig(t, 3, map[string]any{"concurrency": 3}))
	if err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Errorf("Started called %d times", started)
	}
	var first, last time.Time
	for i := range 3 {
		c := a.called[i]
		if c.Sub(begin) < 600*time.Millisecond {
			t.Errorf("pod %d drove %v after the start, before the last pod was up", i, c.Sub(begin))
		}
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if c.After(last) {
			last = c
		}
	}
	if skew := last.Sub(first); skew > 50*time.Millisecond {
		t.Errorf("drivers started %v apart behind the barrier", skew)
	}
	if s := m.Metrics["client_pods_start_skew_ms"]; s > 50 {
		t.Errorf("recorded skew %.1f ms", s)
	}
	for k := 1; k <= 3; k++ {
		if s, ok := m.Metrics[ClientPodMetric(k, "start_ms")]; !ok || s > 50 {
			t.Errorf("pod %d's start %.1f ms after the first (recorded: %v)", k, s, ok)
		}
	}
}

// A pod whose driver fails mid-run fails the run with its reason; the
// others are stopped and every agent is closed.
func TestClientPodsFailure(t *testing.T) {
	stopped := make(chan int, 2)
	a := &podAgents{drive: func(ctx context.Context, i int, _ workload.Env) (*results.Measurement, error) {
		if i == 1 {
			time.Sleep(100 * time.Millisecond)
			return nil, errors.New("kv: memcached load against 10.96.0.10:11211: connection refused")
		}
		<-ctx.Done()
		stopped <- i
		return nil, ctx.Err()
	}}
	_, _, err := drivePods(t, a, podsConfig(t, 2, nil))
	if err == nil || !strings.Contains(err.Error(), "client pod 2 (ctrperf-client-1 on node-2) of 2") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Error("pod 1's driver was not stopped")
	}
	if len(a.closed) != 2 {
		t.Errorf("closed %v, want both agents", a.closed)
	}

	// A pod that does not start: the run fails naming it, the one that
	// did is closed.
	a = &podAgents{startErr: func(i int) error {
		if i == 1 {
			return errors.New(`image "ctrperf/ticketd:latest" is not on node kube-node-2`)
		}
		return nil
	}}
	_, _, err = drivePods(t, a, podsConfig(t, 2, nil))
	if err == nil || !strings.Contains(err.Error(), "client pod 2 of 2: start: image") {
		t.Fatalf("err = %v", err)
	}
	if len(a.closed) != 1 || a.closed[0] != 0 {
		t.Errorf("closed %v, want pod 0's agent", a.closed)
	}
}

// An engine that starts no agents: the configuration is not_run.
func TestClientPodsWithoutAgents(t *testing.T) {
	var started int
	env := podsEnv(&started)
	env.Engine = &fakeEngine{name: "docker"}
	d := podsDriver(podsConfig(t, 2, nil), env.Engine, "", "")
	_, err := d.Drive(context.Background(), env)
	var nr interface{ NotRunnable() bool }
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "starts no agent pods") {
		t.Fatalf("err = %v", err)
	}
}

// The load splits so that the pods together offer the plan's.
func TestClientShares(t *testing.T) {
	// kv open loop: the rate and the in-flight bound divided.
	c := podsConfig(t, 3, map[string]any{"mode": "open", "rate": 900, "max_inflight": 10, "seed": 1})
	shares, desc, err := splitLoad(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range shares {
		if s["rate"] != 300.0 || s["max_inflight"] != int64(4) || s["seed"] != int64(1+i) || s["mode"] != "open" {
			t.Errorf("share %d: %v", i, s)
		}
		if _, err := workload.ParseKVLoad(roundTrip(t, s)); err != nil {
			t.Errorf("share %d does not decode: %v", i, err)
		}
	}
	if !strings.Contains(desc, "open loop: rate 900/s as 3 × 300/s, max_inflight 10 as 3 × 4") {
		t.Errorf("desc %q", desc)
	}
	// kv closed loop with ops: both split.
	c = podsConfig(t, 2, map[string]any{"concurrency": 3, "ops": 1001})
	shares, desc, err = splitLoad(c, 2)
	if err != nil || shares[0]["concurrency"] != int64(2) || shares[1]["concurrency"] != int64(1) || shares[0]["ops"] != int64(501) || shares[1]["ops"] != int64(500) {
		t.Errorf("closed: %v %v", shares, err)
	}
	if !strings.Contains(desc, "concurrency 3 as 2+1; ops 1001 as 501+500") {
		t.Errorf("desc %q", desc)
	}
	// web: its default open loop (2000 sessions per 60 s) and closed loop.
	wl, err := workload.ParseWebLoad(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Load, c.Decoded.Load = nil, wl
	shares, _, err = splitLoad(c, 2)
	if err != nil || shares[0]["rate"] != 2000.0/60/2 {
		t.Errorf("web open: %v %v", shares, err)
	}
	wl, _ = workload.ParseWebLoad(map[string]any{"concurrency": 4})
	c.Load, c.Decoded.Load = map[string]any{"concurrency": 4}, wl
	shares, _, err = splitLoad(c, 4)
	if err != nil || shares[3]["concurrency"] != int64(1) {
		t.Errorf("web closed: %v %v", shares, err)
	}
	// What cannot split.
	c = podsConfig(t, 2, map[string]any{"concurrency": 1})
	if _, _, err := splitLoad(c, 2); err == nil || !strings.Contains(err.Error(), "each generator drives at least one connection") {
		t.Errorf("1 connection over 2 pods: %v", err)
	}
	c = podsConfig(t, 2, map[string]any{"mode": "open", "rate": 0.0015})
	if _, _, err := splitLoad(c, 2); err == nil || !strings.Contains(err.Error(), "below the generator's least rate") {
		t.Errorf("tiny rate: %v", err)
	}
	c.Decoded.Load = 42
	if _, _, err := splitLoad(c, 2); err == nil {
		t.Error("an unknown load split")
	}
}

// roundTrip is a share as the agent decodes it: through JSON.
func roundTrip(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := agent.Decode(agent.Encode(m), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClientPodsRefuseAnotherBuild: a load-generator pod whose image holds
// another ctrperf than this one is refused with the fix, not trusted to
// generate the load of this build's record (issue 35 item 6: client pods
// sent no build hash).
func TestClientPodsRefuseAnotherBuild(t *testing.T) {
	a := &podAgents{build: "old"}
	_, _, err := drivePods(t, a, podsConfig(t, 2, nil))
	if err == nil || !strings.Contains(err.Error(), "another ctrperf") || !strings.Contains(err.Error(), "make kube-images") {
		t.Fatalf("Drive = %v: want the other build refused with the fix", err)
	}
	a = &podAgents{build: "new", drive: func(context.Context, int, workload.Env) (*results.Measurement, error) {
		return samples(map[int64]int{1000: 10}), nil
	}}
	if _, _, err := drivePods(t, a, podsConfig(t, 2, nil)); err != nil {
		t.Errorf("the same build: %v", err)
	}
}

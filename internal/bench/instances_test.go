package bench

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

const instancesPlan = `
name: unit
workload: benchfake
repetitions: 1
warmup: 0s
duration: 1ms
baseline: three
configurations:
  - name: three
    runtime: docker
    privileged: true
    instances: 3
`

// instanceOf is the 1-based instance of a target (run id <id>-i<k>).
func instanceOf(t *engine.Target) int {
	i := strings.LastIndex(t.RunID, "-i")
	if i < 0 {
		return 0
	}
	return int(t.RunID[i+2] - '0')
}

// instances: 3 deploys three times, drives the three at once, records the
// sum and each instance's figure, and tears each down; privileged reaches
// every service of every deployment.
func TestRunInstances(t *testing.T) {
	p := parsePlan(t, instancesPlan, plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	prov := &fakeProvider{}
	var running, most atomic.Int32
	release := make(chan struct{})
	wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		// All three drivers are in their window at the same time: the
		// third to arrive lets them all go.
		n := running.Add(1)
		if n == 3 {
			most.Store(n)
			close(release)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		k := instanceOf(env.Target)
		return measurement(float64(100 * k)), nil
	}}
	var observed *engine.Target
	if _, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
		Workload:  func(string) (workload.Workload, error) { return wl, nil },
		Observers: func(t *engine.Target) Observer { observed = t; return &fakeObserver{} },
		Progress:  Discard{}}); err != nil {
		t.Fatal(err)
	}
	if most.Load() != 3 {
		t.Errorf("the drivers did not run together")
	}
	recs := readRecords(t, out)
	if len(recs) != 1 || recs[0].Status != results.StatusOK {
		t.Fatalf("records %+v", recs)
	}
	id := recs[0].RunID
	want := []string{id + "-i1", id + "-i2", id + "-i3"}
	if strings.Join(prov.deployed, ",") != strings.Join(want, ",") || strings.Join(prov.tornDown, ",") != strings.Join(want, ",") {
		t.Errorf("deployed %v, torn down %v, want %v both", prov.deployed, prov.tornDown, want)
	}
	for _, spec := range prov.specs {
		for _, s := range spec.Services {
			if !s.Privileged {
				t.Errorf("%s: service %s not privileged", spec.RunID, s.Name)
			}
		}
	}
	m := recs[0].Result.Metrics
	for name, v := range map[string]float64{
		results.MetricThroughput:                    600,
		InstanceMetric(1, results.MetricThroughput): 100,
		InstanceMetric(2, results.MetricThroughput): 200,
		InstanceMetric(3, results.MetricThroughput): 300,
		"instances_min_throughput_per_s":            100,
		"instances_max_throughput_per_s":            300,
		"instances":                                 3,
	} {
		if m[name] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", name, m[name], v, m)
		}
	}
	if op := recs[0].Result.Operations["get"]; op == nil || op.Count != 300 {
		t.Errorf("operations %+v, want the three instances' 100 gets each", recs[0].Result.Operations)
	}
	if observed == nil || observed.RunID != id+"-i1" {
		t.Errorf("observer target %+v", observed)
	}
	if recs[0].Knobs["instances"] != float64(3) || recs[0].Knobs["privileged"] != true {
		t.Errorf("record knobs %v", recs[0].Knobs)
	}
}

// One instance failing fails the run, names the instance, stops the others
// and still tears every deployment down; a deploy failing at the second
// instance tears down the first and the partial second.
func TestRunInstancesFailures(t *testing.T) {
	t.Run("drive", func(t *testing.T) {
		p := parsePlan(t, instancesPlan, plan.Options{})
		out := filepath.Join(t.TempDir(), "out")
		prov := &fakeProvider{}
		wl := &fakeWorkload{drive: func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
			if instanceOf(env.Target) == 2 {
				return nil, errors.New("connection reset by peer")
			}
			<-ctx.Done() // the others run until the failure stops them
			return nil, ctx.Err()
		}}
		if _, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
			Workload: func(string) (workload.Workload, error) { return wl, nil }, Progress: Discard{}}); err != nil {
			t.Fatal(err)
		}
		recs := readRecords(t, out)
		if len(recs) != 1 || recs[0].Status != results.StatusFailed || recs[0].Result != nil ||
			!strings.Contains(recs[0].Error, "drive: instance 2 of 3: connection reset by peer") {
			t.Fatalf("record %+v", recs[0])
		}
		if len(prov.tornDown) != 3 {
			t.Errorf("torn down %v, want all three", prov.tornDown)
		}
	})
	t.Run("deploy", func(t *testing.T) {
		p := parsePlan(t, instancesPlan, plan.Options{})
		out := filepath.Join(t.TempDir(), "out")
		prov := &failSecondDeploy{fakeProvider: &fakeProvider{}}
		wl := &fakeWorkload{}
		if _, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
			Workload: func(string) (workload.Workload, error) { return wl, nil }, Progress: Discard{}}); err != nil {
			t.Fatal(err)
		}
		recs := readRecords(t, out)
		if len(recs) != 1 || recs[0].Status != results.StatusFailed || !strings.Contains(recs[0].Error, "deploy: instance 2 of 3: no room") {
			t.Fatalf("record %+v", recs[0])
		}
		if len(prov.deployed) != 2 || len(prov.tornDown) != 2 {
			t.Errorf("deployed %v, torn down %v; want the first two, both torn down", prov.deployed, prov.tornDown)
		}
	})
}

// failSecondDeploy's engine fails its second Deploy, with a partial target.
type failSecondDeploy struct{ *fakeProvider }

func (p *failSecondDeploy) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	e, info, err := p.fakeProvider.Engine(ctx, rt, spec)
	if err != nil {
		return nil, info, err
	}
	return &failingDeployEngine{Engine: e, p: p.fakeProvider}, info, nil
}

type failingDeployEngine struct {
	engine.Engine
	p *fakeProvider
}

func (e *failingDeployEngine) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	t, err := e.Engine.Deploy(ctx, spec)
	if err == nil && strings.HasSuffix(spec.RunID, "-i2") {
		return t, errors.New("no room")
	}
	return t, err
}

func TestMergeInstances(t *testing.T) {
	hist := func(us ...int64) string {
		h := results.NewHistogram()
		for _, v := range us {
			_ = h.RecordValue(v)
		}
		s, err := results.EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := &results.Measurement{DurationS: 10,
		Operations: map[string]*results.Operation{
			"get":   {Count: 2, Errors: map[string]int64{"timeout": 1}, Histogram: hist(1000, 2000)},
			"write": {Count: 10, PercentilesMs: map[string]float64{"99": 4}, MeanMs: 1},
		},
		Metrics: map[string]float64{results.MetricThroughput: 10, "iops": 5, results.MetricP99Ms: 2, results.MetricElapsed: 10, "direct": 1},
		Load:    &results.LoadStats{Mode: "closed", Concurrency: 4, LatenessP99Ms: 1},
		Tools:   map[string]string{"fio": "fio-3.33"}, Notes: []string{"slow start"}}
	b := &results.Measurement{DurationS: 11,
		Operations: map[string]*results.Operation{
			"get":   {Count: 1, Histogram: hist(9000)},
			"write": {Count: 30, PercentilesMs: map[string]float64{"99": 3}, MeanMs: 2},
		},
		Metrics: map[string]float64{results.MetricThroughput: 30, "iops": 7, results.MetricP99Ms: 9, results.MetricElapsed: 11, "direct": 1},
		Load:    &results.LoadStats{Mode: "closed", Concurrency: 4, LatenessP99Ms: 3}}
	m, err := mergeInstances([]*results.Measurement{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if m.DurationS != 11 {
		t.Errorf("duration %v, want the longest", m.DurationS)
	}
	get := m.Operations["get"]
	h, err := results.DecodeHistogram(get.Histogram)
	if err != nil || get.Count != 3 || get.Errors["timeout"] != 1 || h.TotalCount() != 3 || h.Max() < 8900 {
		t.Errorf("get %+v (hist count %d max %d, err %v)", get, h.TotalCount(), h.Max(), err)
	}
	w := m.Operations["write"]
	if w.Count != 40 || w.PercentilesMs["99"] != 4 || math.Abs(w.MeanMs-70.0/40) > 1e-9 {
		t.Errorf("write %+v: want summed count, worst p99, count-weighted mean", w)
	}
	for name, v := range map[string]float64{
		// p99_ms: of the merged histograms (1, 2 and 9 ms: HdrHistogram's
		// 9.007), no longer the worst instance's 9 (issue 37 item 2).
		results.MetricThroughput: 40, "iops": 12, results.MetricP99Ms: 9.007, results.MetricElapsed: 11, "direct": 1,
		InstanceMetric(1, results.MetricP99Ms): 2, InstanceMetric(2, results.MetricElapsed): 11,
	} {
		if m.Metrics[name] != v {
			t.Errorf("metric %s = %v, want %v", name, m.Metrics[name], v)
		}
	}
	if m.Load.Concurrency != 8 || m.Load.LatenessP99Ms != 3 {
		t.Errorf("load %+v", m.Load)
	}
	if m.Tools["fio"] != "fio-3.33" || len(m.Notes) != 1 || m.Notes[0] != "instance 1: slow start" {
		t.Errorf("tools %v notes %v", m.Tools, m.Notes)
	}
	if _, err := mergeInstances([]*results.Measurement{a, nil}); err == nil {
		t.Error("a missing measurement merged silently")
	}
}

// A privileged configuration that the engine cannot start (dockerd without
// every capability) is not_run with the reason, tried once, not failed.
func TestPrivilegedRefusedIsNotRun(t *testing.T) {
	p := parsePlan(t, strings.Replace(strings.Replace(instancesPlan, "instances: 3", "instances: 1", 1), "repetitions: 1", "repetitions: 2", 1), plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	prov := &fakeProvider{deployErr: errors.New(`start container x: OCI runtime create failed: runc create failed: unable to start container process: unable to apply caps: operation not permitted: unknown`)}
	if _, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }, Progress: Discard{}}); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, out)
	for _, r := range recs {
		if r.Status != results.StatusNotRun || !strings.Contains(r.Error, "cannot start privileged containers on this machine") {
			t.Errorf("record %s: %s %q", r.RunID, r.Status, r.Error)
		}
	}
	if len(recs) != 2 || len(prov.deployed) != 1 {
		t.Errorf("%d records, %d deploys; want 2 not_run records from one attempt", len(recs), len(prov.deployed))
	}
}

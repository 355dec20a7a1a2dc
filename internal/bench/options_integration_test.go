package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// TestInstancesPrivilegedDocker runs the real cpu workload (sysbench in the
// Debian base) as two instances with -c/-m limits: while the run is
// deployed, Docker must show two containers of two deployments, each with
// the shares and memory asked for; the record holds the sum and both
// instances' rates; afterwards nothing of either is left. A privileged
// configuration must run privileged per docker inspect, or, on an engine
// that cannot grant every capability (dockerd in a sandbox), be recorded
// not_run saying so.
func TestInstancesPrivilegedDocker(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := testenv.Docker(t)
	p, err := ParsePlan("opts.yaml", []byte(`
name: opts
workload: cpu
repetitions: 1
warmup: 0s
duration: 1s
baseline: two
load: {max_prime: 2000}
configurations:
  - name: two
    runtime: docker
    network: host
    instances: 2
    resources: {cpu_shares: 512, memory: 128m}
  - name: privileged
    runtime: docker
    network: host
    privileged: true
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ins := &inspector{ctx: ctx, cli: cli}
	out := filepath.Join(t.TempDir(), "out")
	_, err = Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: "benchtest"}, Observers: ins.observe,
		Workload: workload.Get, Progress: Discard{}})
	if err != nil {
		t.Fatal(err)
	}
	if ins.err != nil {
		t.Fatal(ins.err)
	}
	inspects := ins.all
	var rec, privRec results.RunRecord
	for _, r := range readRecords(t, out) {
		if r.Config == "two" {
			rec = r
		} else {
			privRec = r
		}
	}
	if rec.Status != results.StatusOK {
		t.Fatalf("instances run not ok: %+v", rec)
	}
	runs := map[string]bool{}
	privSeen := false
	for _, ins := range inspects {
		run := ins.Config.Labels[engine.LabelRun]
		if run == privRec.RunID {
			privSeen = true
			if !ins.HostConfig.Privileged {
				t.Errorf("%s of the privileged configuration is not privileged", ins.Name)
			}
			continue
		}
		runs[run] = true
		if hc := ins.HostConfig; hc.Privileged || hc.CPUShares != 512 || hc.Memory != 128<<20 {
			t.Errorf("%s: privileged %v cpu_shares %d memory %d; want false 512 %d", ins.Name, hc.Privileged, hc.CPUShares, hc.Memory, 128<<20)
		}
	}
	switch privRec.Status {
	case results.StatusOK:
		if !privSeen {
			t.Error("the privileged run was not inspected")
		}
	case results.StatusNotRun:
		if !strings.Contains(privRec.Error, "cannot start privileged containers on this machine") {
			t.Errorf("privileged not_run: %q", privRec.Error)
		}
		t.Logf("privileged: %s", privRec.Error)
	default:
		t.Errorf("privileged run: %s %s", privRec.Status, privRec.Error)
	}
	runs[privRec.RunID] = true
	if len(inspects) != 2+map[bool]int{true: 1}[privSeen] || !runs[rec.RunID+"-i1"] || !runs[rec.RunID+"-i2"] {
		t.Errorf("%d containers of runs %v, want one of %s-i1 and one of %s-i2", len(inspects), runs, rec.RunID, rec.RunID)
	}
	m := rec.Result.Metrics
	a, b := m[InstanceMetric(1, results.MetricThroughput)], m[InstanceMetric(2, results.MetricThroughput)]
	if a <= 0 || b <= 0 || m[results.MetricThroughput] != a+b {
		t.Errorf("throughput %v, instances %v and %v: want both measured and summed", m[results.MetricThroughput], a, b)
	}
	for run := range runs {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", engine.LabelRun+"="+run)})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("run %s left %d containers behind", run, len(list.Items))
		}
	}
}

// inspector is an Observers factory that inspects every container of each
// deployment as the run starts observing it: what Docker was asked for.
type inspector struct {
	ctx   context.Context
	cli   *client.Client
	mu    sync.Mutex
	all   []container.InspectResponse
	byRun map[string][]container.InspectResponse
	err   error // the first inspect that failed
}

func (in *inspector) observe(tg *engine.Target) Observer {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, c := range tg.Containers {
		res, err := in.cli.ContainerInspect(in.ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			if in.err == nil {
				in.err = fmt.Errorf("inspect %s: %w", c.Name, err)
			}
			continue
		}
		in.all = append(in.all, res.Container)
		if in.byRun == nil {
			in.byRun = map[string][]container.InspectResponse{}
		}
		in.byRun[tg.RunID] = append(in.byRun[tg.RunID], res.Container)
	}
	return &fakeObserver{}
}

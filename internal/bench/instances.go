package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"ctrperf/internal/engine"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// A configuration with `instances: N` (N > 1) deploys its workload N times
// in one run, each deployment with a run id of its own (<run id>-i<k>,
// k = 1..N: its own containers, network and ports), and drives them
// together: N drivers start at once, the run's measured window starts when
// the last of them has finished its warm-up, and the record holds the
// aggregate (merge) and each instance's figures (instanceMetrics). It is
// what the seeds did by starting several containers of the same image side
// by side: how much does the machine give N tenants together, and how
// evenly.

// instanceIDs are the run ids of a run's deployments: the run's own for
// one instance, <id>-i1 … <id>-iN for more.
func instanceIDs(id string, n int) []string {
	if n <= 1 {
		return []string{id}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-i%d", id, i+1)
	}
	return ids
}

// instancesTarget is what the observer sees of N deployments: one target
// with every instance's containers, their service names suffixed with the
// instance (cpu-i1, cpu-i2, …) so that their series stay apart.
func instancesTarget(ts []*engine.Target) *engine.Target {
	if len(ts) == 1 {
		return ts[0]
	}
	all := *ts[0]
	all.Containers = nil
	for i, t := range ts {
		for _, c := range t.Containers {
			c.Service = fmt.Sprintf("%s-i%d", c.Service, i+1)
			all.Containers = append(all.Containers, c)
		}
	}
	return &all
}

// driveInstances runs one driver per deployment, at once. started is called
// once, when every driver has reached its measured window. The first
// driver to fail cancels the others; the error names it.
func driveInstances(ctx context.Context, wl workload.Workload, env workload.Env, targets []*engine.Target) ([]*results.Measurement, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu      sync.Mutex
		waiting = len(targets)
		wg      sync.WaitGroup
	)
	ms := make([]*results.Measurement, len(targets))
	errs := make([]error, len(targets))
	for i, t := range targets {
		e := env
		e.Target = t
		e.Started = func() {
			mu.Lock()
			defer mu.Unlock()
			waiting--
			if waiting == 0 && env.Started != nil {
				env.Started()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := wl.Drive(ctx, e)
			ms[i] = m
			if err != nil {
				errs[i] = fmt.Errorf("instance %d of %d: %w", i+1, len(targets), err)
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	// The first failure is the cause; the others were most likely cancelled by it.
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return ms, cause
	}
	return ms, errors.Join(errs...)
}

// InstanceMetric names instance k's (1-based) copy of a metric in a merged
// measurement: instance_2_throughput_per_s.
func InstanceMetric(k int, metric string) string {
	return "instance_" + strconv.Itoa(k) + "_" + metric
}

// mergeInstances adds N instances' measurements into the run's one
// (results.MergeSideBySide: each metric by its declared merge, each
// instance's own server counted), then each instance's elapsed time under
// instance_<k>_elapsed_s and the spread of their throughputs
// (instances_min/max_throughput_per_s).
func mergeInstances(ms []*results.Measurement) (*results.Measurement, error) {
	if len(ms) == 1 {
		return ms[0], nil
	}
	out, err := results.MergeSideBySide(ms, results.SideBySide{Part: "instance", PartMetric: InstanceMetric, KeepPlacement: true})
	if err != nil {
		return nil, err
	}
	lo, hi := 0.0, 0.0
	for i, m := range ms {
		if v, ok := m.Metrics[results.MetricElapsed]; ok {
			out.Metrics[InstanceMetric(i+1, results.MetricElapsed)] = v
		}
		t := m.Metrics[results.MetricThroughput]
		if i == 0 || t < lo {
			lo = t
		}
		hi = max(hi, t)
	}
	if _, ok := out.Metrics[results.MetricThroughput]; ok {
		out.Metrics["instances_min_throughput_per_s"] = lo
		out.Metrics["instances_max_throughput_per_s"] = hi
	}
	out.Metrics["instances"] = float64(len(ms))
	return out, nil
}

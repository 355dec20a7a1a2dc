package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func init() { Register(CPU{}) }

// CPU is the control: sysbench cpu (prime numbers by trial division) does no
// system calls in its loop, so a container, which only changes the kernel's
// bookkeeping of namespaces and cgroups, should cost it nothing measurable.
// A difference here points at the machine (frequency, a noisy neighbour),
// not at Docker.
type CPU struct{}

var _ Workload = CPU{}

// Name implements Workload.
func (CPU) Name() string { return "cpu" }

// CPULoad are the cpu knobs.
type CPULoad struct {
	Threads  int64 // sysbench --threads
	MaxPrime int64 // sysbench --cpu-max-prime
}

// DefaultCPULoad is sysbench's own default work per event on one thread.
var DefaultCPULoad = CPULoad{Threads: 1, MaxPrime: 10000}

// ParseCPULoad reads and checks the knobs.
func ParseCPULoad(m map[string]any) (CPULoad, error) {
	l := DefaultCPULoad
	k := newKnobs("load", m)
	whole(k, "threads", &l.Threads, 1, 1024)
	whole(k, "max_prime", &l.MaxPrime, 3, 1<<31-1)
	return l, k.err()
}

// Decode implements Workload.
func (CPU) Decode(k Knobs) (any, any, error) {
	return decodeTool("cpu", k, ParseCPULoad, "the work is chosen under load")
}

// Services implements Workload.
func (CPU) Services(c Config) ([]engine.Service, error) {
	return toolServices("cpu", "cpu", c, "sysbench")
}

// cpuArgs are sysbench's arguments for d of work.
func cpuArgs(l CPULoad, d time.Duration) []string {
	return []string{"cpu", "--threads=" + strconv.FormatInt(l.Threads, 10),
		"--cpu-max-prime=" + strconv.FormatInt(l.MaxPrime, 10),
		"--time=" + strconv.FormatInt(int64((d+time.Second/2)/time.Second), 10),
		"--percentile=99", "run"}
}

// Drive implements Workload: a warm-up run (frequency ramps, page faults of
// the binary) and then the measured one, both parsed by load.RunSysbench.
func (CPU) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(CPULoad)
	if env.Window.Duration < time.Second {
		return nil, fmt.Errorf("cpu: duration %s is shorter than sysbench's 1 s resolution", env.Window.Duration)
	}
	ex := load.EngineExec(env.Engine, env.Target, "cpu")
	if env.Window.Warmup >= time.Second {
		if _, err := load.RunSysbench(ctx, ex, cpuArgs(l, env.Window.Warmup)...); err != nil {
			return nil, fmt.Errorf("cpu: warm-up: %w", err)
		}
	}
	if env.Started != nil {
		env.Started()
	}
	m, err := load.RunSysbench(ctx, ex, cpuArgs(l, env.Window.Duration)...)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if m.Metrics[results.MetricThroughput] <= 0 {
		return m, fmt.Errorf("cpu: sysbench reported no events")
	}
	return m, nil
}

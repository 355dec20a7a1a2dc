package workload

import (
	"context"
	"fmt"
	"strconv"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func init() { Register(CtxSw{}) }

// CtxSw is UnixBench's pipe-based context switching test (seed 003: the one
// figure where bare metal lost to the VM, until the CPU affinity was
// fixed): two processes pass a message back and forth over a pipe, each
// blocking until the other answers, so every message is a context switch.
// It wraps stress-ng --switch (a pair of mutually blocking processes per
// worker; one bogo op is one switch). What it is run against is the
// placement: resources.cpuset "0" puts both processes of a pair on one CPU,
// "0-1" gives them two CPUs (the scheduler still decides which runs where),
// no cpuset leaves them unpinned; on the host or in a container alike.
type CtxSw struct{}

var _ Workload = CtxSw{}

// Name implements Workload.
func (CtxSw) Name() string { return "ctxsw" }

// CtxSwLoad are the ctxsw knobs.
type CtxSwLoad struct {
	Pairs  int64  // stress-ng --switch N: pairs of processes
	Method string // --switch-method: pipe (UnixBench's), mq, sem-sysv
}

// DefaultCtxSwLoad is UnixBench's context1: one pair over a pipe.
var DefaultCtxSwLoad = CtxSwLoad{Pairs: 1, Method: "pipe"}

// ParseCtxSwLoad reads and checks the knobs.
func ParseCtxSwLoad(m map[string]any) (CtxSwLoad, error) {
	l := DefaultCtxSwLoad
	k := newKnobs("load", m)
	whole(k, "pairs", &l.Pairs, 1, 256)
	k.enum("method", &l.Method, "pipe", "mq", "sem-sysv")
	return l, k.err()
}

// Decode implements Workload.
func (CtxSw) Decode(k Knobs) (any, any, error) {
	return decodeTool("ctxsw", k, ParseCtxSwLoad, "the pairs are chosen under load; the CPUs with resources.cpuset")
}

// Services implements Workload.
func (CtxSw) Services(c Config) ([]engine.Service, error) {
	return toolServices("ctxsw", "ctxsw", c, "stress-ng")
}

// ctxswArgs are stress-ng's arguments for d of switching.
func ctxswArgs(l CtxSwLoad, timeout string) []string {
	return []string{"--switch", strconv.FormatInt(l.Pairs, 10), "--switch-method", l.Method, "--timeout", timeout}
}

// Drive implements Workload: a warm-up run, then the measured one.
// throughput_per_s and context_switches_per_s are stress-ng's switches per
// second of real time (summed over the pairs); switch_us is one switch's
// time within a pair, in µs.
func (CtxSw) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(CtxSwLoad)
	ex := load.EngineExec(env.Engine, env.Target, "ctxsw")
	if env.Window.Warmup > 0 {
		if _, err := load.RunStressNG(ctx, ex, ctxswArgs(l, wholeSeconds(env.Window.Warmup))...); err != nil {
			return nil, fmt.Errorf("ctxsw: warm-up: %w", err)
		}
	}
	if env.Started != nil {
		env.Started()
	}
	m, err := load.RunStressNG(ctx, ex, ctxswArgs(l, wholeSeconds(env.Window.Duration))...)
	if err != nil {
		return nil, fmt.Errorf("ctxsw: %w", err)
	}
	rate := m.Metrics[results.MetricThroughput]
	if rate <= 0 {
		return m, fmt.Errorf("ctxsw: stress-ng reported no switches")
	}
	m.Metrics["context_switches_per_s"] = rate
	m.Metrics["switch_us"] = 1e6 / (rate / float64(l.Pairs))
	return m, nil
}

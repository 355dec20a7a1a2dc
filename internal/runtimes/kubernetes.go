//go:build !nokube

package runtimes

import (
	"context"
	"errors"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/engine/kube"
	"ctrperf/internal/plan"
)

func init() { bench.RegisterRuntime(plan.RuntimeKubernetes, openKube) }

// openKube opens one engine per kubernetes: block; what would fail every
// run of it alike (no cluster, RBAC, another kube-proxy mode, no Ready
// node) is a not_run in its words.
func openKube(ctx context.Context, spec engine.EngineSpec, o bench.OpenOptions) (engine.Engine, engine.Info, error) {
	k, err := kube.New(ctx, kube.Options{Spec: spec.Kube, Kubeconfig: o.Flags[KubeconfigFlag], Session: o.RunID})
	var un *kube.Unavailable
	if errors.As(err, &un) {
		return nil, engine.Info{}, bench.RuntimeUnavailable("kubernetes: " + un.Reason)
	}
	if err != nil {
		return nil, engine.Info{}, err
	}
	info, err := k.Info(ctx)
	return k, info, err
}

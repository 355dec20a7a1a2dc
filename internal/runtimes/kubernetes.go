// Package runtimes registers with bench the runtimes whose engines link a
// large client of their own (kubernetes: client-go), so that only the
// program that imports it links them: cmd/ctrperf does; bench, its tests
// and its fuzz target do not (`go list -deps ./internal/bench | grep
// k8s.io` prints nothing).
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
	k, err := kube.New(ctx, kube.Options{Spec: spec.Kube, Kubeconfig: o.Kubeconfig, Session: o.RunID})
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

package runtimes

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
)

// TestClusterRuntimeRegistered: with this package linked, bench opens runtime
// kubernetes through engine/kube: a kubeconfig that does not exist is
// kube's own not_run reason, not bench's "built without".
func TestClusterRuntimeRegistered(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	e := &bench.Engines{RunID: "ctrperf-test"}
	_, _, err := e.Engine(context.Background(), plan.RuntimeKubernetes, engine.EngineSpec{Kube: plan.KubeSpec{Kubeconfig: missing}})
	if err == nil {
		t.Fatal("no error for a missing kubeconfig")
	}
	if !strings.HasPrefix(err.Error(), "kubernetes: ") || strings.Contains(err.Error(), "built without") || !strings.Contains(err.Error(), missing) {
		t.Errorf("err %q, want kube's reason naming %s", err, missing)
	}
}

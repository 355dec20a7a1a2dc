//go:build !nokube

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	remote "k8s.io/cri-client/pkg"

	"ctrperf/internal/isolate"
)

// startIsolateCRI starts the controller on a Kubernetes node, its
// membership from the node's CRI runtime at o.CRISocket.
func startIsolateCRI(ctx context.Context, o isolate.Options) (controller, error) {
	cri, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(criEndpoint(o.CRISocket)).
		WithConnectionTimeout(10 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("CRI runtime at %s: %w", o.CRISocket, err)
	}
	if _, err := cri.Version(ctx, "v1"); err != nil {
		return nil, fmt.Errorf("no CRI runtime answers at %s (%v): give the node's containerd or CRI-O socket", o.CRISocket, err)
	}
	run, err := isolate.StartCRI(ctx, cri, o)
	if err != nil {
		return nil, err
	}
	return run, nil
}

// criEndpoint is a CRI socket as the client dials it.
func criEndpoint(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	return "unix://" + s
}

//go:build nokube

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"ctrperf/internal/isolate"
	"ctrperf/internal/version"
)

// The Kubernetes side of isolate links client-go and the CRI client (grpc),
// which a program built with -tags nokube (make demo's build) does not: it
// says so (isolatefleet.go and isolatecri.go have the real ones).

func fleetStatus(*cobra.Command, string, string, bool) error {
	return fmt.Errorf("isolate status --kubeconfig: %w", version.ErrNoKubernetes)
}

func startIsolateCRI(context.Context, isolate.Options) (controller, error) {
	return nil, fmt.Errorf("isolate run --cri-socket: %w", version.ErrNoKubernetes)
}

//go:build !nokube

package doctor

import (
	"context"
	"time"

	"ctrperf/internal/engine/kube"
	"ctrperf/internal/results"
)

// labKubeconfig is where `make kube-up` writes the lab cluster's
// kubeconfig; "" in a program built without runtime kubernetes.
const labKubeconfig = kube.LabKubeconfig

// kubeClusters describes every cluster ctrperf can reach (runtime
// kubernetes): $KUBECONFIG or ~/.kube/config, and the lab's.
func kubeClusters(ctx context.Context) ([]results.KubeCluster, []error) {
	cs, errs := kube.Reachable()
	var out []results.KubeCluster
	for _, c := range cs {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out = append(out, kube.Describe(cctx, c))
		cancel()
	}
	return out, errs
}

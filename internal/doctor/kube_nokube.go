//go:build nokube

package doctor

import (
	"context"

	"ctrperf/internal/results"
)

// labKubeconfig is "": this program was built without runtime kubernetes
// (-tags nokube, make demo's build), so doctor looks for no cluster.
const labKubeconfig = ""

func kubeClusters(context.Context) ([]results.KubeCluster, []error) { return nil, nil }

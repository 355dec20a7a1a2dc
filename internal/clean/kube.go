//go:build !nokube

package clean

import (
	"context"
	"fmt"
	"io"
	"os"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/kube"
	"ctrperf/internal/kernel"
)

// kubeNamespaces removes the namespaces of runtime kubernetes whose owner
// is gone, on every cluster ctrperf can reach (kubeconfigs, else
// $KUBECONFIG or ~/.kube/config and the lab's): a namespace of another
// host's session is left alone (its owner cannot be checked from here),
// one of this host's is decided by its owner record, and kept while its
// process (pid and start time) still runs.
func kubeNamespaces(ctx context.Context, o Options, warn io.Writer) ([]string, error) {
	clusters, errs := kube.Reachable(o.Kubeconfigs...)
	for _, err := range errs {
		fmt.Fprintf(warn, "ctrperf clean: kubernetes: %v\n", err)
	}
	host, _ := os.Hostname()
	fs := o.Kernel
	var removed []string
	var firstErr error
	for _, c := range clusters {
		keep := func(n kube.Namespace) bool {
			if n.Host != host {
				fmt.Fprintf(warn, "ctrperf clean: leaving %s: its session runs on host %s, whose processes this one cannot see\n", n.What(), n.Host)
				return true
			}
			if o.Owners.Keep(n.What(), n.Session) {
				return true
			}
			// No live owner record: the process itself may still run
			// (a session without a record, a test).
			if kernel.ProcAlive(fs.Proc(), n.PID) {
				if st, err := kernel.ProcStartTime(fs.Proc(), n.PID); err == nil && st == n.Start {
					return true
				}
			}
			return false
		}
		r, err := kube.Clean(ctx, c.Client, kube.CleanOptions{Keep: keep, RunID: o.RunID, DryRun: o.DryRun})
		for _, x := range r {
			removed = append(removed, x+" on "+c.Server)
		}
		if err != nil {
			fmt.Fprintf(warn, "ctrperf clean: kubernetes %s (context %s): %v\n", c.Server, c.Context, err)
			if firstErr == nil && !engine.Unreachable(err) {
				firstErr = fmt.Errorf("kubernetes %s: %w", c.Server, err)
			}
		}
	}
	return removed, firstErr
}

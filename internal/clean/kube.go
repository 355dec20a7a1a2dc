//go:build !nokube

package clean

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/kube"
	"ctrperf/internal/kernel"
)

// kubeNamespaces removes the namespaces of runtime kubernetes whose owner
// is gone, on every cluster ctrperf can reach (kubeconfigs, else
// $KUBECONFIG or ~/.kube/config and the lab's). Whose a namespace is
// comes from its owner annotations (kube.Namespace.Whose): one made on
// this machine in this boot is kept while its owner lives (owner record,
// else pid and start time); one made before this machine's last boot has
// no owner any more; one of another machine (machine id, else hostname)
// is kept, as its owner cannot be checked from here, unless forced — the
// way to remove what a host that is gone left. One that ctrperf did not
// make (its name or owner annotations do not match) is never removed.
func kubeNamespaces(ctx context.Context, o Options, warn io.Writer) ([]string, error) {
	clusters, errs := kube.Reachable(o.Kubeconfigs...)
	for _, err := range errs {
		fmt.Fprintf(warn, "ctrperf clean: kubernetes: %v\n", err)
	}
	fs := o.Kernel
	self := kube.SelfOwner()
	if boot, err := kernel.BootID(fs.Proc()); err == nil {
		self.BootID = boot
	}
	var removed []string
	var firstErr error
	for _, c := range clusters {
		keep := keepNamespace(self, o.Owners, fs, warn)
		r, err := kube.Clean(ctx, c.Client, kube.CleanOptions{Keep: keep, RunID: o.RunID, DryRun: o.DryRun, Self: self, Warn: warn})
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

// keepNamespace decides a namespace of ctrperf's for clean, seen from self
// (see kubeNamespaces).
func keepNamespace(self kube.Owner, own *engine.Ownership, fs kernel.FS, warn io.Writer) func(kube.Namespace) bool {
	return func(n kube.Namespace) bool {
		switch n.Whose(self) {
		case kube.Elsewhere:
			who := fmt.Sprintf("pid %d on host %s", n.PID, n.Host)
			if n.MachineID != "" {
				who += " (machine " + shortID(n.MachineID) + ")"
			}
			who += ", which this host cannot see"
			if own == nil || own.KeepDecided(n.What(), n.Session, true, who) {
				fmt.Fprintf(warn, "ctrperf clean: leaving %s: its session runs on host %s, whose processes this one cannot see; if that host is gone, `ctrperf clean --force` removes it\n", n.What(), n.Host)
				return true
			}
			return false
		case kube.HereRebooted:
			// Its pid names no process of this boot.
			return own.KeepDecided(n.What(), n.Session, false, "gone: pid "+strconv.Itoa(n.PID)+" of an earlier boot of this machine")
		}
		if own.Keep(n.What(), n.Session) {
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
}

// shortID is the first 12 characters of an id, for people.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

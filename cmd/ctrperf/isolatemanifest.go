package main

import (
	"github.com/spf13/cobra"

	"ctrperf/internal/isolate/manifest"
)

func newIsolateManifestCmd() *cobra.Command {
	o := manifest.Defaults()
	cmd := &cobra.Command{
		Use:   "manifest [-- RUN FLAGS...]",
		Short: "Print the controller as a Kubernetes DaemonSet (ctrperf isolate manifest | kubectl apply -f -)",
		Long: `Print a Namespace, a ServiceAccount (no role, no token: the controller reads
only its node's runtime and kernel) and a DaemonSet that runs 'ctrperf isolate
run --cri-socket' on every node: hostPID, the node's cgroup mount, the
runtime's socket, kubelet's root directory (read-only: its cpu_manager_state
says whether the static CPU manager owns the cpusets, and then the controller
only demotes), the checkpoint on a hostPath, the metrics and /status port,
every taint tolerated, system-node-critical. Deleting the DaemonSet restores
every value (SIGTERM); a crashed pod's successor restores its checkpoint
first.

Pods opt in with the label ctrperf.isolate: "true"; their CPU request (or
their limit when only a limit is set) is their entitlement.

Paths may hold $(NODE_NAME), which kubelet expands: the lab cluster, whose
nodes share one machine, takes
  --cri-socket '/run/ctrperf/kube/$(NODE_NAME)/containerd.sock'
  --kubelet-dir '/var/lib/ctrperf/kube/nodes/$(NODE_NAME)/kubelet'
Flags after -- go to 'isolate run' (e.g. -- --policy shield --hot-after 3).
IRQ and RPS steering are off: they are the machine's, so turn them on
(-- --irq=true --rps=true) only where each node is a machine of its own.

The image is one that holds this ctrperf at /ctrperf (ctrperf/pause, built by
'make images' and imported into each node's runtime: no registry).
contrib/kubernetes/ctrperf-isolate.yaml is this command's output with the
defaults.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args = args
			b, err := manifest.YAML(o)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the DaemonSet")
	f.StringVar(&o.Image, "image", o.Image, "image holding this ctrperf at /ctrperf (pulled never)")
	f.StringVar(&o.CRISocket, "cri-socket", o.CRISocket, "the node's CRI runtime socket; may hold $(NODE_NAME)")
	f.StringVar(&o.KubeletDir, "kubelet-dir", o.KubeletDir, "kubelet's root directory on the node; may hold $(NODE_NAME)")
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "the controller's state directory on the node (checkpoint, lock, status); may hold $(NODE_NAME)")
	f.IntVar(&o.MetricsPort, "metrics-port", o.MetricsPort, "port of /metrics and /status in the pod")
	return cmd
}

//go:build !nokube

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ctrperf/internal/engine/kube"
	"ctrperf/internal/isolate"
	"ctrperf/internal/isolate/manifest"
)

// NodeStatus is one node's controller as `isolate status --kubeconfig`
// reads it; Error says why its status could not be read.
type NodeStatus struct {
	Node   string          `json:"node"`
	Pod    string          `json:"pod"`
	Status *isolate.Status `json:"status,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// fleetStatus reads every DaemonSet pod's /status through the API server.
func fleetStatus(cmd *cobra.Command, kubeconfig, namespace string, asJSON bool) error {
	rc, _, server, err := kube.ClientConfig(kubeconfig, "")
	if err != nil {
		return err
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", server, err)
	}
	nodes, err := readFleet(cmd.Context(), cs, namespace)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(nodes)
	}
	for i, n := range nodes {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "== node %s (pod %s)\n", n.Node, n.Pod)
		if n.Status == nil {
			fmt.Fprintf(out, "no status: %s\n", n.Error)
			continue
		}
		if err := printIsolateStatus(out, *n.Status); err != nil {
			return err
		}
		if len(n.Status.Recent) > 0 {
			fmt.Fprintln(out, "last decisions:")
			for _, e := range n.Status.Recent {
				fmt.Fprintf(out, "  %s %-9s %s %s -> %s %s\n", e.Time.Format("15:04:05.000"), e.Kind, e.Name, e.Old, e.New, e.Reason)
			}
		}
	}
	return nil
}

// readFleet lists the controller's pods (the manifest's app label) and
// gets each one's /status through the API server's pod proxy.
func readFleet(ctx context.Context, cs kubernetes.Interface, namespace string) ([]NodeStatus, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: manifest.AppLabel + "=" + manifest.Name})
	if err != nil {
		return nil, fmt.Errorf("list the controller's pods in %s: %w", namespace, err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("no controller pods in namespace %s (ctrperf isolate manifest | kubectl apply -f -)", namespace)
	}
	var out []NodeStatus
	for _, p := range pods.Items {
		ns := NodeStatus{Node: p.Spec.NodeName, Pod: p.Name}
		port := strconv.Itoa(manifest.Defaults().MetricsPort)
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == "metrics" {
					port = strconv.Itoa(int(cp.ContainerPort))
				}
			}
		}
		b, err := cs.CoreV1().Pods(namespace).ProxyGet("http", p.Name, port, "/status", nil).DoRaw(ctx)
		if err != nil {
			ns.Error = err.Error()
		} else {
			var s isolate.Status
			if err := json.Unmarshal(b, &s); err != nil {
				ns.Error = "parse /status: " + err.Error()
			} else {
				ns.Status = &s
			}
		}
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

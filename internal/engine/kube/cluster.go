package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"ctrperf/internal/results"
)

// LabKubeconfig is where the lab cluster of `make kube-up` writes its
// kubeconfig.
const LabKubeconfig = "/var/lib/ctrperf/kube/kubeconfig"

// Cluster is one cluster ctrperf can reach: where it was found and the
// client to it.
type Cluster struct {
	Kubeconfig string // the file, or "" for kubectl's search
	Context    string
	Server     string
	Client     kubernetes.Interface
	Config     *rest.Config
}

// Reachable are the clusters of the kubeconfigs ctrperf knows (explicit
// ones, else kubectl's search, and the lab's), one per API server, each
// with the error that kept it out.
func Reachable(explicit ...string) ([]Cluster, []error) {
	paths := explicit
	if len(paths) == 0 {
		paths = []string{""} // $KUBECONFIG, ~/.kube/config
		if _, err := os.Stat(LabKubeconfig); err == nil {
			paths = append(paths, LabKubeconfig)
		}
	}
	var out []Cluster
	var errs []error
	seen := map[string]bool{}
	for _, p := range paths {
		rc, ctxName, server, err := ClientConfig(p, "")
		if err != nil {
			if p != "" || kubeconfigExists() {
				errs = append(errs, err)
			}
			continue
		}
		if seen[server] {
			continue
		}
		seen[server] = true
		rc.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", server, err))
			continue
		}
		out = append(out, Cluster{Kubeconfig: p, Context: ctxName, Server: server, Client: cs, Config: rc})
	}
	return out, errs
}

// kubeconfigExists says whether kubectl's search finds a kubeconfig
// ($KUBECONFIG, ~/.kube/config): without one there is no cluster to
// speak of, and nothing to warn about.
func kubeconfigExists() bool {
	if os.Getenv("KUBECONFIG") != "" {
		return true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(home + "/.kube/config")
	return err == nil
}

// Report is what `ctrperf doctor` says of a cluster.
type Report = results.KubeCluster

// Describe reports on a cluster: its version, nodes (Ready, runtime),
// kube-proxy mode, each node's CPU manager policy, ctrperf's namespaces.
func Describe(ctx context.Context, c Cluster) Report {
	r := Report{Kubeconfig: c.Kubeconfig, Context: c.Context, Server: c.Server}
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Answers, r.Version = true, v.GitVersion
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.Error = describe(err, "list", "nodes")
		return r
	}
	k := &Kube{cs: c.Client, rc: c.Config}
	r.ProxyMode, r.ProxyModeFrom = k.readProxyMode(ctx, nodes.Items)
	r.CPUManager = map[string]string{}
	for _, n := range nodes.Items {
		ni := nodeInfo(n)
		kc, _ := readKubeletConfig(ctx, c.Client, n.Name)
		ni.CPUManager = kc.CPUManagerPolicy
		r.Nodes = append(r.Nodes, ni)
		r.CPUManager[n.Name] = kc.CPUManagerPolicy
	}
	if nss, err := Namespaces(ctx, c.Client); err == nil {
		for _, n := range nss {
			r.Namespaces = append(r.Namespaces, n.Name)
		}
		sort.Strings(r.Namespaces)
	}
	return r
}

// KubeletConfig is what ctrperf reads of a node's kubelet configuration.
type KubeletConfig struct {
	// CPUManagerPolicy is none or static ("none" when the kubelet leaves
	// it unset, its default).
	CPUManagerPolicy string `json:"cpuManagerPolicy"`
	// CgroupRoot and CgroupDriver say where the node's pods' cgroups are
	// (cgroupfs: <root>/kubepods/...; systemd: kubepods.slice/...).
	CgroupRoot   string `json:"cgroupRoot"`
	CgroupDriver string `json:"cgroupDriver"`
	// CPUManagerReconcilePeriod is how often the static CPU manager
	// brings the other containers' cpusets in line with what it pinned
	// ("10s" by default).
	CPUManagerReconcilePeriod string `json:"cpuManagerReconcilePeriod"`
	// ContainerRuntimeEndpoint is the node's CRI socket (unix://...).
	ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
}

// reconcilePeriod is the CPU manager's reconcile period (10 s when unset
// or unreadable).
func (kc KubeletConfig) reconcilePeriod() time.Duration {
	if d, err := time.ParseDuration(kc.CPUManagerReconcilePeriod); err == nil && d > 0 {
		return d
	}
	return 10 * time.Second
}

// readKubeletConfig reads a node's kubelet configuration from its
// /configz, through the API server's node proxy (nodes/proxy: an admin's
// right; RBAC may refuse it).
func readKubeletConfig(ctx context.Context, cs kubernetes.Interface, node string) (KubeletConfig, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/configz").DoRaw(cctx)
	if err != nil {
		return KubeletConfig{}, fmt.Errorf("node %s's /configz: %s", node, describe(err, "get", "nodes/proxy"))
	}
	return parseConfigz(b)
}

func parseConfigz(b []byte) (KubeletConfig, error) {
	var cz struct {
		KubeletConfig KubeletConfig `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &cz); err != nil {
		return KubeletConfig{}, fmt.Errorf("kubelet /configz: %w", err)
	}
	kc := cz.KubeletConfig
	if kc.CPUManagerPolicy == "" {
		kc.CPUManagerPolicy = "none"
	}
	return kc, nil
}

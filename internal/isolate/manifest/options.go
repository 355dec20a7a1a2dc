// Package manifest is `ctrperf isolate manifest`: the controller as a
// DaemonSet, the way operators deploy node agents. It is built from
// k8s.io/api types and printed as YAML; contrib/kubernetes holds the
// default output, kept equal to it by a test.
//
// The objects link k8s.io/api: a program built with -tags nokube (make
// demo's build) has the options alone, and YAML says it cannot.
package manifest

// Options are the knobs of the manifest. CRISocket, KubeletDir and
// StateDir may hold $(NODE_NAME), which kubelet expands in the container's
// arguments: a machine that runs several nodes (the lab cluster) keeps a
// socket and a state directory per node.
type Options struct {
	Namespace  string
	Image      string
	CRISocket  string
	KubeletDir string
	StateDir   string
	// Args are more `isolate run` flags (policy, thresholds, --irq=true on
	// a machine with one node).
	Args        []string
	MetricsPort int
}

// Defaults are a stock node's paths: containerd's socket, kubelet's root,
// and the image that holds this ctrperf (FROM scratch, imported into each
// node's runtime: no registry).
func Defaults() Options {
	return Options{Namespace: "ctrperf-isolate", Image: "ctrperf/pause:latest",
		CRISocket: "/run/containerd/containerd.sock", KubeletDir: "/var/lib/kubelet",
		StateDir: "/run/ctrperf/isolate-node/$(NODE_NAME)", MetricsPort: 9477}
}

// Name is the DaemonSet's, its ServiceAccount's and its pods' app label.
const Name = "ctrperf-isolate"

// AppLabel selects the DaemonSet's pods (isolate status --kubeconfig).
const AppLabel = "app.kubernetes.io/name"

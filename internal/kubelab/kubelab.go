// Package kubelab knows the lab Kubernetes cluster that scripts/kube.sh
// (make kube-up) makes on this machine: where its kubeconfig is, and how to
// find anything of it left on the machine (processes, mounts, network
// namespaces, links, routes, firewall chains, cgroups, files), which
// `make kube-down` must remove to the last one (Leftovers, in the tests: only
// internal/kernel reads /proc and /sys outside tests).
package kubelab

// The names scripts/kube.sh gives what it makes.
const (
	Kubeconfig = StateDir + "/kubeconfig" // admin credentials, mode 0600
	StateDir   = "/var/lib/ctrperf/kube"  // certificates, etcd, node roots, logs
	RunDir     = "/run/ctrperf/kube"      // pid files, containerd state and sockets
	Bridge     = "ctrperf-kube0"          // the nodes' bridge, 198.19.210.1/24
	Chain      = "CTRPERF-KUBE"           // accepts the bridge's traffic in filter/FORWARD
	CgroupRoot = "ctrperf-kube"           // /sys/fs/cgroup/<hierarchy>/ctrperf-kube/<node>
	NodePrefix = "kube-node-"             // node names, their netns and host-side veths
	PodCIDR    = "198.19.64.0/18"         // node N has 198.19.(63+N).0/24
	ServiceNet = "198.19.96.0/20"
	NodeNet    = "198.19.210."
)

// Package kubelab knows the lab Kubernetes cluster that scripts/kube.sh
// (make kube-up) makes on this machine: where its kubeconfig is, and how to
// find anything of it left on the machine (processes, mounts, network
// namespaces, links, routes, firewall chains, cgroups, files), which
// `make kube-down` must remove to the last one (Leftovers, in the tests: only
// internal/kernel reads /proc and /sys outside tests).
package kubelab

import "ctrperf/internal/labnet"

// The names scripts/kube.sh gives what it makes: labnet.env's, which the
// script sources.
var (
	Kubeconfig = StateDir + "/kubeconfig"        // admin credentials, mode 0600
	StateDir   = labnet.Get("KUBE_STATE")        // certificates, etcd, node roots, logs
	RunDir     = labnet.Get("KUBE_RUN")          // pid files, containerd state and sockets
	Bridge     = labnet.Get("KUBE_BRIDGE")       // the nodes' bridge, KUBE_APISERVER_IP/24
	Chain      = labnet.Get("KUBE_CHAIN")        // accepts the bridge's traffic in filter/FORWARD
	CgroupRoot = labnet.Get("KUBE_CGROUP_ROOT")  // /sys/fs/cgroup/<hierarchy>/ctrperf-kube/<node>
	NodePrefix = labnet.Get("KUBE_NODE_PREFIX")  // node names, their netns and host-side veths
	PodCIDR    = labnet.Get("KUBE_CLUSTER_CIDR") // node N has KUBE_NODE_N_POD_CIDR
	ServiceNet = labnet.Get("KUBE_SERVICE_CIDR")
	NodeNet    = labnet.Get("KUBE_NODE_NET")
)

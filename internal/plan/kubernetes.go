package plan

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Runtime kubernetes deploys the services as pods of a cluster the user
// points ctrperf at (kubeconfig and context, as kubectl finds them), in a
// namespace of the session's own. Its vocabulary: four network paths from
// the client to the front service, five places for the data directory,
// and a `kubernetes:` block for what only a cluster has (which one, the
// QoS class, the node, the kube-proxy mode a plan requires).
//
//	runtime: kubernetes
//	network: service            # pod-ip, service, nodeport, host-network
//	data: emptydir              # layer, emptydir, emptydir-memory, hostpath, local-pv
//	kubernetes: {context: lab, node: node-2, qos: guaranteed, proxy_mode: nftables}
//	kubernetes: {client: pod, clients: 2, client_node: node-2}   # the load from 2 pods on node-2

// RuntimeKubernetes runs the services as pods of a Kubernetes cluster.
const RuntimeKubernetes Runtime = "kubernetes"

// Network paths of runtime kubernetes.
const (
	// NetworkPodIP: the client dials the pod's IP (the CNI's path, no
	// kube-proxy).
	NetworkPodIP NetworkMode = "pod-ip"
	// NetworkService: the client dials a ClusterIP Service, which
	// kube-proxy translates to the pod (iptables, nftables or IPVS).
	NetworkService NetworkMode = "service"
	// NetworkNodePort: the client dials a node's address and the
	// Service's NodePort, as a load machine outside the cluster does.
	NetworkNodePort NetworkMode = "nodeport"
	// NetworkHostNetwork: the pod shares its node's network namespace
	// (hostNetwork: true); the client dials the node's address.
	NetworkHostNetwork NetworkMode = "host-network"
)

// Data placements of runtime kubernetes (layer, the container's root
// filesystem, is shared with docker).
const (
	DataEmptyDir       DataPlacement = "emptydir"        // emptyDir on the node's disk
	DataEmptyDirMemory DataPlacement = "emptydir-memory" // emptyDir{medium: Memory}: a tmpfs
	DataHostPath       DataPlacement = "hostpath"        // a directory of the node
	DataLocalPV        DataPlacement = "local-pv"        // a static local PersistentVolume ctrperf creates and removes
)

var (
	kubeNetworks   = []string{string(NetworkPodIP), string(NetworkService), string(NetworkNodePort), string(NetworkHostNetwork)}
	kubePlacements = []string{string(DataLayer), string(DataEmptyDir), string(DataEmptyDirMemory), string(DataHostPath), string(DataLocalPV)}
	kubeKeys       = []string{"kubeconfig", "context", "proxy_mode", "qos", "node", "client", "client_node", "clients", "kubelet_dir"}
	// KubeProxyModes are the kube-proxy modes a plan may require.
	KubeProxyModes = []string{"iptables", "nftables", "ipvs"}
	// KubeQoS are the QoS classes a plan may ask for.
	KubeQoS = []string{"burstable", "guaranteed", "besteffort"}
	// KubeClients are where the load generator runs.
	KubeClients = []string{"host", "pod"}
)

// SplitLoad is a decoded load (WorkloadKnobs.Load) that generators side
// by side can offer in shares (workload.Splitter): its workload's driver
// is ctrperf's own generator dialling the target's endpoint, with nothing
// exec'd in a service and no file of this machine read, so it runs in a
// generator pod (kubernetes.client: pod). The plan asks the decoded load,
// never the workload's name.
type SplitLoad interface {
	Split(knobs map[string]any, n int) (shares []map[string]any, how string, err error)
}

// MaxKubeClients bounds kubernetes.clients: each generator is a pod of its
// own, started for the run.
const MaxKubeClients = 16

// KubeSpec is a configuration's `kubernetes:` block. The zero value is the
// current context of the kubeconfig kubectl would read, any node, the QoS
// class the resources give, and the client on this machine.
type KubeSpec struct {
	// Kubeconfig and Context choose the cluster: empty Kubeconfig is
	// --kubeconfig, $KUBECONFIG or ~/.kube/config; empty Context is the
	// kubeconfig's current context.
	Kubeconfig string `json:"kubeconfig,omitempty" yaml:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty" yaml:"context,omitempty"`
	// ProxyMode, when set, is the kube-proxy mode the runs require: on a
	// cluster whose kube-proxy runs another they are not_run.
	ProxyMode string `json:"proxy_mode,omitempty" yaml:"proxy_mode,omitempty"`
	// QoS: guaranteed makes requests equal limits with whole CPUs (what
	// the static CPU manager pins); besteffort sets neither; burstable
	// (the default with resources) sets requests and limits from them.
	QoS string `json:"qos,omitempty" yaml:"qos,omitempty"`
	// Node places the pods under test (nodeName); empty: the scheduler's
	// choice.
	Node string `json:"node,omitempty" yaml:"node,omitempty"`
	// Client is where the load generator runs: host (ctrperf on this
	// machine, the default) or pod.
	Client string `json:"client,omitempty" yaml:"client,omitempty"`
	// ClientNode places the load generator's pods (client: pod) or kv's
	// client container (load.client: container); empty: the scheduler's
	// choice for client pods, Node for kv's container.
	ClientNode string `json:"client_node,omitempty" yaml:"client_node,omitempty"`
	// Clients is how many generator pods drive the load together with
	// client: pod (0 is one): the workload's connections or open-loop
	// rate split over them, so that the total offered load is the plan's,
	// and their HdrHistograms merged into one measurement.
	Clients int `json:"clients,omitempty" yaml:"clients,omitempty"`
	// KubeletDir is kubelet's root directory on the nodes, for the isolate
	// controller's DaemonSet (isolate.policy): its cpu_manager_state says
	// whether the static CPU manager owns the cpusets. It may hold
	// $(NODE_NAME); empty is /var/lib/kubelet.
	KubeletDir string `json:"kubelet_dir,omitempty" yaml:"kubelet_dir,omitempty"`
}

// ClientPods is the number of generator pods of client: pod (0 without).
func (k KubeSpec) ClientPods() int {
	if k.Client != "pod" {
		return 0
	}
	return max(k.Clients, 1)
}

// IsZero says whether the block asks for nothing.
func (k KubeSpec) IsZero() bool { return k == KubeSpec{} }

// Key is a short stable name of the block for engine caches: each
// distinct block is an engine of its own (the cluster, and what the
// engine checks once, such as the kube-proxy mode a plan requires).
func (k KubeSpec) Key() string {
	return fmt.Sprintf("kube(%s|%s|%s|%s|%s|%s|%s|%d|%s)", k.Kubeconfig, k.Context, k.ProxyMode, k.QoS, k.Node, k.Client, k.ClientNode, k.Clients, k.KubeletDir)
}

// KubeNetwork says whether m is a network path of runtime kubernetes only.
func KubeNetwork(m NetworkMode) bool { return contains(kubeNetworks, string(m)) }

// KubeData says whether p is a data placement of runtime kubernetes only.
func KubeData(p DataPlacement) bool { return p != DataLayer && contains(kubePlacements, string(p)) }

func (d *decoder) setKube(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["kubernetes."+key] = n
	var allowed []string
	var dst *string
	switch key {
	case "kubeconfig":
		dst = &k.Kube.Kubeconfig
	case "context":
		dst = &k.Kube.Context
	case "proxy_mode":
		dst, allowed = &k.Kube.ProxyMode, KubeProxyModes
	case "qos":
		dst, allowed = &k.Kube.QoS, KubeQoS
	case "node":
		dst = &k.Kube.Node
	case "client":
		dst, allowed = &k.Kube.Client, KubeClients
	case "client_node":
		dst = &k.Kube.ClientNode
	case "kubelet_dir":
		if s, ok := d.str(n, field); ok {
			if !strings.HasPrefix(s, "/") {
				d.errorf(n, field, "%q: want an absolute path on the nodes (it may hold $(NODE_NAME))", s)
				return
			}
			k.Kube.KubeletDir = s
		}
		return
	case "clients":
		if v, ok := d.integer(n, field); ok {
			if v < 1 || v > MaxKubeClients {
				d.errorf(n, field, "%d: expected a number of generator pods between 1 and %d", v, MaxKubeClients)
				return
			}
			// One pod is the default: stored as 0, so that writing it
			// changes neither the engine, the record nor the plan's hash.
			k.Kube.Clients = int(v)
			if v == 1 {
				k.Kube.Clients = 0
			}
		}
		return
	default:
		d.unknownSub(n, field, key, kubeKeys)
		return
	}
	var s string
	var ok bool
	if allowed != nil {
		s, ok = d.enum(n, field, allowed)
	} else {
		s, ok = d.str(n, field)
		if ok && s == "" {
			d.errorf(n, field, "empty; leave the key out for the default")
			ok = false
		}
	}
	if ok {
		*dst = s
	}
}

// checkKube checks the kubernetes vocabulary: a configuration of runtime
// kubernetes takes only its own networks and placements and none of
// Docker's or the host's knobs; any other runtime takes none of
// kubernetes'. It reports at the line of the knob and returns true when
// it has judged the configuration's network and data (checkKnobs then
// leaves them alone).
func (d *decoder) checkKube(c *Configuration) bool {
	field := func(k string) string { return join(c.Origin, k) }
	if !c.Runtime.Traits().Cluster {
		judged := false
		if KubeNetwork(c.Network) {
			d.errorf(c.node("network"), field("network"), "%q needs runtime kubernetes (runtime %s has %s)", c.Network, c.Runtime, strings.Join(runtimeNetworks(c.Runtime), ", "))
			judged = true
		}
		if KubeData(c.Data) {
			d.errorf(c.node("data"), field("data"), "%q needs runtime kubernetes", c.Data)
			judged = true
		}
		for _, k := range kubeKeys {
			if n, ok := c.nodes["kubernetes."+k]; ok {
				d.errorf(n, field("kubernetes."+k), "the kubernetes block needs runtime kubernetes (remove it or set runtime: kubernetes)")
			}
		}
		return judged
	}
	if !contains(kubeNetworks, string(c.Network)) {
		d.errorf(c.node("network"), field("network"), "%q is not a network of runtime kubernetes; expected %s", c.Network, oneOf(kubeNetworks))
	}
	if !contains(kubePlacements, string(c.Data)) {
		d.errorf(c.node("data"), field("data"), "%q is not a data placement of runtime kubernetes; expected %s", c.Data, oneOf(kubePlacements))
	}
	refuse := func(k, why string) {
		if n, ok := c.nodes[k]; ok {
			d.errorf(n, field(k), "%s", why)
		}
	}
	for _, k := range engineKeys {
		refuse("engine."+k, "engine knobs select a Docker engine; runtime kubernetes deploys through the cluster's own runtime (remove it; kubernetes.context chooses the cluster)")
	}
	if c.Filesystem.On() {
		n, ok := c.nodes["filesystem"]
		if !ok {
			n = c.node("filesystem.type")
		}
		d.errorf(n, field("filesystem"), "the data filesystem is a loop mount on this machine, which a node of the cluster does not see; use data: local-pv or hostpath")
	}
	refuse("resources.cpuset", "Kubernetes has no cpuset for a pod: set kubernetes.qos: guaranteed with whole resources.cpus on a node whose kubelet runs the static CPU manager, which pins them")
	refuse("resources.cpu_shares", "Kubernetes sets a pod's CPU shares from its CPU request: use resources.cpus (requests and limits)")
	if c.Kube.QoS == "guaranteed" {
		r := c.Resources
		switch {
		case r.CPUs == 0 || r.MemoryBytes == 0:
			d.errorf(c.node("kubernetes.qos"), field("kubernetes.qos"), "guaranteed needs resources.cpus and resources.memory: requests equal limits, for every container")
		case r.CPUs != float64(int64(r.CPUs)):
			d.errorf(c.node("resources.cpus"), field("resources.cpus"), "%g with kubernetes.qos guaranteed: the static CPU manager pins whole CPUs only; use a whole number", r.CPUs)
		}
	}
	if c.Kube.QoS == "besteffort" && (c.Resources.CPUs != 0 || c.Resources.MemoryBytes != 0) {
		d.errorf(c.node("kubernetes.qos"), field("kubernetes.qos"), "besteffort sets no requests or limits; remove resources.cpus and resources.memory or use burstable")
	}
	return true
}

// checkKubeClientLoad refuses client: pod for a workload whose decoded
// load does not split over generator pods (SplitLoad): its driver runs
// tools in the services or reads files of this machine. Called once the
// workload decoded the configuration's knobs.
func (d *decoder) checkKubeClientLoad(workload string, c *Configuration) {
	if !c.Runtime.Traits().Cluster || c.Kube.Client != "pod" || c.Decoded.Load == nil {
		return
	}
	if _, ok := c.Decoded.Load.(SplitLoad); !ok {
		d.errorf(c.node("kubernetes.client"), join(c.Origin, "kubernetes.client"), "pod: workload %s's driver cannot run in a generator pod (it runs tools in the services or reads files of this machine; its load does not split over generators)", workload)
	}
}

// checkKubeClient checks client: pod against the workload and its load:
// the generator pods run the workload's own driver in `ctrperf agent`,
// each with its share of the load. What cannot work so is refused at its
// line: a workload whose driver execs in the services or reads this
// machine's files, a capacity search (its steps would need every pod's
// SLO verdict), kv's own client container, instances, a load host, and
// fewer connections than pods.
func (d *decoder) checkKubeClient(workload string, c *Configuration) {
	if !c.Runtime.Traits().Cluster {
		return // checkKube refused the block
	}
	field := func(k string) string { return join(c.Origin, k) }
	if _, set := c.nodes["kubernetes.clients"]; set && c.Kube.Client != "pod" {
		d.errorf(c.node("kubernetes.clients"), field("kubernetes.clients"), "generator pods need kubernetes.client: pod (with client host the generator is ctrperf on this machine, one process)")
		return
	}
	if c.Kube.Client != "pod" {
		return
	}
	switch {
	case c.Load["search"] != nil:
		d.errorf(c.node("load.search"), field("load.search"), "a capacity search with kubernetes.client: pod: its steps would need the verdict of every generator pod; search with client: host, or give load.rate")
	case c.Load["client"] == "container":
		d.errorf(c.node("load.client"), field("load.client"), "container with kubernetes.client: pod: %s's client container is one generator in a pod of the run, client: pod starts generator pods of their own; choose one", workload)
	case c.Instances > 1:
		d.errorf(c.node("instances"), field("instances"), "%d instances with kubernetes.client: pod: the generator pods drive one deployment; use instances: 1", c.Instances)
	case !c.Hosts.Load.Local():
		d.errorf(c.node("kubernetes.client"), field("kubernetes.client"), "pod with hosts.load %s: the generator runs in pods of the cluster, not on a load host; choose one", c.Hosts.Load.Raw)
	}
	if n := c.Kube.ClientPods(); n > 1 {
		if conc, ok := c.Load["concurrency"].(int); ok && conc > 0 && conc < n {
			d.errorf(c.node("kubernetes.clients"), field("kubernetes.clients"), "%d generator pods for load.concurrency %d: each pod drives at least one connection; use at most %d pods", n, conc, conc)
		}
	}
}

// TakesNetwork says whether runtime r has network mode m.
func (r Runtime) TakesNetwork(m NetworkMode) bool {
	return slices.Contains(r.Traits().Networks, m)
}

// TakesData says whether runtime r has data placement p.
func (r Runtime) TakesData(p DataPlacement) bool {
	return slices.Contains(r.Traits().Placements, p)
}

// runtimeNetworks are the networks runtime rt takes.
func runtimeNetworks(rt Runtime) []string {
	var out []string
	for _, n := range rt.Traits().Networks {
		out = append(out, string(n))
	}
	return out
}

// describeKube is the block in a configuration's one-line summary.
func (k KubeSpec) describe() string {
	var parts []string
	for _, kv := range [][2]string{{"context", k.Context}, {"node", k.Node}, {"qos", k.QoS}, {"proxy", k.ProxyMode}, {"client", k.Client}, {"client_node", k.ClientNode}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if k.Clients > 1 {
		parts = append(parts, fmt.Sprintf("clients=%d", k.Clients))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("kube{%s}", strings.Join(parts, ","))
}

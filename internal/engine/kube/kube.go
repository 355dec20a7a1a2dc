// Package kube is runtime kubernetes: an engine.Engine that deploys a
// configuration's services as pods of a cluster through client-go, each
// session in a namespace of its own (ctrperf-<session>), labelled like
// every ctrperf object and annotated with its owner process so that
// `ctrperf clean` removes what a killed session left and never a live
// one's.
//
// The cluster is found as kubectl finds it: the plan's
// kubernetes.kubeconfig, else --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; kubernetes.context, else the kubeconfig's current
// context.
package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// Options make a Kube engine.
type Options struct {
	// Spec is the configuration's kubernetes: block (the cluster, the
	// node, the QoS class, the required kube-proxy mode).
	Spec plan.KubeSpec
	// Kubeconfig is --kubeconfig: used when the plan names none.
	Kubeconfig string
	// Session names the namespace (ctrperf-<session>).
	Session string
	// Owner is written on the namespace (SelfOwner when zero).
	Owner Owner
	// Client and Config replace the ones the kubeconfig gives (tests: a
	// fake clientset; Config may then be nil, and Exec fails).
	Client kubernetes.Interface
	Config *rest.Config
	// HelperImage runs the helper pods (local PV directories, removing
	// hostpath data); it needs /bin/sh.
	HelperImage string
	// PendingTimeout bounds how long a pod may stay Pending (unschedulable,
	// its image being unpacked) before the deploy fails with the
	// scheduler's reason (default 90 s).
	PendingTimeout time.Duration
	// AgentDeadline bounds how long an agent pod may run (default
	// AgentDeadline).
	AgentDeadline time.Duration
	// NamespaceTimeout bounds the wait for a namespace to go (default 2 min).
	NamespaceTimeout time.Duration
	// ProxyModeProbe reads a node's kube-proxy /proxyMode (tests replace
	// it); nil: HTTP to the node's address on port 10249.
	ProxyModeProbe func(ctx context.Context, nodeIP string) (string, error)
	// KernelHasIPVS says whether this machine's kernel has CONFIG_IP_VS
	// (nil: read /proc/config.gz).
	KernelHasIPVS func() (bool, string)
	// LocalPVSize is the capacity a local PV declares (default 10 GiB; a
	// local PV's capacity is a label, not a quota).
	LocalPVSize int64
	// ReadKubelet reads a node's kubelet configuration (tests replace it);
	// nil: its /configz through the API server (none with a fake client).
	ReadKubelet func(ctx context.Context, node string) (KubeletConfig, error)
	// Kernel is where a node's cgroups are read from when this machine is
	// that node (the lab): a pod's cpuset (zero: the real kernel).
	Kernel kernel.FS
}

// Kube is the engine of one kubernetes: block on one cluster.
type Kube struct {
	cs        kubernetes.Interface
	rc        *rest.Config
	opt       Options
	ns        string
	context   string
	server    string
	info      *engine.Info
	proxyMode string
	proxyFrom string
	// kubelets are the nodes' kubelet configurations, where readable.
	kubelets map[string]KubeletConfig
	// staticNodes, for qos guaranteed without kubernetes.node, are the
	// nodes whose kubelet runs the static CPU manager: the pods go there.
	staticNodes []string
}

var _ engine.Engine = (*Kube)(nil)

// ClientConfig loads the kubeconfig kubectl would: explicit (the plan's
// or --kubeconfig), else $KUBECONFIG, else ~/.kube/config; context, else
// the current one. It returns the REST config and the context's name.
func ClientConfig(kubeconfig, contextName string) (*rest.Config, string, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", "", fmt.Errorf("kubeconfig %s: %w", describeKubeconfig(rules), err)
	}
	name := contextName
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return nil, "", "", fmt.Errorf("kubeconfig %s has no current context and the plan names none (kubernetes.context)", describeKubeconfig(rules))
	}
	if _, ok := raw.Contexts[name]; !ok {
		var have []string
		for k := range raw.Contexts {
			have = append(have, k)
		}
		sort.Strings(have)
		return nil, "", "", fmt.Errorf("kubeconfig %s has no context %q (it has %s)", describeKubeconfig(rules), name, strings.Join(have, ", "))
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", "", fmt.Errorf("kubeconfig %s, context %s: %w", describeKubeconfig(rules), name, err)
	}
	rc.QPS, rc.Burst = 50, 100
	return rc, name, rc.Host, nil
}

func describeKubeconfig(r *clientcmd.ClientConfigLoadingRules) string {
	if r.ExplicitPath != "" {
		return r.ExplicitPath
	}
	if len(r.Precedence) > 0 {
		return strings.Join(r.Precedence, ":")
	}
	return "(none found: --kubeconfig, $KUBECONFIG, ~/.kube/config)"
}

// New connects to the cluster of the block and checks, once, what would
// make every run of it fail alike: the API server answers, the session may
// create what it needs (RBAC), the kube-proxy mode the block requires is
// the cluster's, a node is Ready (the block's node, if it names one). Such
// a finding is a *Unavailable: the configuration is not_run with it.
func New(ctx context.Context, opt Options) (*Kube, error) {
	k := &Kube{cs: opt.Client, rc: opt.Config, opt: opt, ns: NamespaceName(opt.Session)}
	if opt.Session == "" {
		return nil, errors.New("kubernetes engine: no session")
	}
	if k.opt.Owner == (Owner{}) {
		k.opt.Owner = SelfOwner()
	}
	if k.cs == nil {
		path := opt.Spec.Kubeconfig
		if path == "" {
			path = opt.Kubeconfig
		}
		rc, name, server, err := ClientConfig(path, opt.Spec.Context)
		if err != nil {
			return nil, &Unavailable{Reason: err.Error()}
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, &Unavailable{Reason: fmt.Sprintf("kubernetes client for %s: %v", server, err)}
		}
		k.cs, k.rc, k.context, k.server = cs, rc, name, server
	} else {
		k.context, k.server = opt.Spec.Context, "fake"
		if k.context == "" {
			k.context = "default"
		}
	}
	if err := k.check(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Unavailable is a finding that makes every run of the block fail alike
// (wrong context, forbidden, another kube-proxy mode, no Ready node): its
// configurations are not_run with Reason.
type Unavailable struct{ Reason string }

func (e *Unavailable) Error() string { return e.Reason }

func (k *Kube) check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := k.cs.Discovery().ServerVersion()
	if err != nil {
		return &Unavailable{Reason: fmt.Sprintf("kubernetes API server %s (context %s) does not answer: %v", k.server, k.context, err)}
	}
	if err := k.checkAccess(cctx); err != nil {
		return err
	}
	nodes, err := k.cs.CoreV1().Nodes().List(cctx, metav1.ListOptions{})
	if err != nil {
		return &Unavailable{Reason: describe(err, "list", "nodes")}
	}
	if err := checkNodes(nodes.Items, k.opt.Spec.Node); err != nil {
		return &Unavailable{Reason: err.Error()}
	}
	if n := k.opt.Spec.ClientNode; n != "" {
		if err := checkNodes(nodes.Items, n); err != nil {
			return &Unavailable{Reason: strings.Replace(err.Error(), "(kubernetes.node)", "(kubernetes.client_node)", 1)}
		}
	}
	k.proxyMode, k.proxyFrom = k.readProxyMode(cctx, nodes.Items)
	if err := k.checkProxyMode(); err != nil {
		return err
	}
	info := engine.Info{Runtime: string(plan.RuntimeKubernetes), Name: k.context, Version: v.GitVersion,
		Kube: &results.KubeInfo{Context: k.context, Server: k.server, Namespace: k.ns, ProxyMode: k.proxyMode, ProxyModeFrom: k.proxyFrom}}
	k.kubelets = map[string]KubeletConfig{}
	var unread []string
	for _, n := range nodes.Items {
		ni := nodeInfo(n)
		if kc, err := k.readKubelet(cctx, n.Name); err == nil {
			k.kubelets[n.Name], ni.CPUManager = kc, kc.CPUManagerPolicy
		} else {
			unread = append(unread, err.Error())
		}
		info.Kube.Nodes = append(info.Kube.Nodes, ni)
	}
	if err := k.placeGuaranteed(nodes.Items, unread); err != nil {
		return err
	}
	k.info = &info
	return nil
}

func (k *Kube) readKubelet(ctx context.Context, node string) (KubeletConfig, error) {
	switch {
	case k.opt.ReadKubelet != nil:
		return k.opt.ReadKubelet(ctx, node)
	case k.rc == nil:
		return KubeletConfig{}, errors.New("no REST config to reach the kubelets' /configz")
	}
	return readKubeletConfig(ctx, k.cs, node)
}

// placeGuaranteed: kubernetes.qos guaranteed asks for pinned CPUs, which
// only a kubelet with the static CPU manager gives. A named node whose
// kubelet runs another policy makes the block not_run; without a named
// node the pods go to the nodes that run it (none: not_run). Where no
// kubelet configuration could be read, the placement is left to the plan.
func (k *Kube) placeGuaranteed(nodes []corev1.Node, unread []string) error {
	if k.opt.Spec.QoS != "guaranteed" || len(k.kubelets) == 0 {
		return nil
	}
	if n := k.opt.Spec.Node; n != "" {
		if kc, ok := k.kubelets[n]; ok && kc.CPUManagerPolicy != "static" {
			return &Unavailable{Reason: fmt.Sprintf("kubernetes.qos guaranteed on node %s (kubernetes.node), whose kubelet runs cpuManagerPolicy %s: its Guaranteed pods would not be pinned to CPUs of their own; use a node with the static CPU manager (the lab's kube-node-2)", n, kc.CPUManagerPolicy)}
		}
		return nil
	}
	var policies []string
	for _, n := range nodes {
		kc, ok := k.kubelets[n.Name]
		if !ok {
			continue
		}
		if kc.CPUManagerPolicy == "static" {
			k.staticNodes = append(k.staticNodes, n.Name)
		}
		policies = append(policies, n.Name+" "+kc.CPUManagerPolicy)
	}
	if len(k.staticNodes) == 0 {
		why := ""
		if len(unread) > 0 {
			why = "; unread: " + strings.Join(unread, "; ")
		}
		return &Unavailable{Reason: fmt.Sprintf("kubernetes.qos guaranteed: no node's kubelet runs the static CPU manager (%s%s), so no Guaranteed pod would be pinned (the lab: make kube-up KUBE_STATIC_CPU_NODE=kube-node-2)", strings.Join(policies, ", "), why)}
	}
	return nil
}

// checkNodes: some node is Ready, and the one the block names exists and
// is Ready.
func checkNodes(nodes []corev1.Node, want string) error {
	var ready []string
	for _, n := range nodes {
		ok, why := nodeReady(n)
		if n.Name == want && !ok {
			return fmt.Errorf("node %s (kubernetes.node) is NotReady: %s", want, why)
		}
		if ok {
			ready = append(ready, n.Name)
		}
	}
	if want != "" {
		found := false
		for _, n := range nodes {
			found = found || n.Name == want
		}
		if !found {
			var names []string
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			return fmt.Errorf("the cluster has no node %q (kubernetes.node); it has %s", want, strings.Join(names, ", "))
		}
	}
	if len(ready) == 0 {
		var why []string
		for _, n := range nodes {
			_, w := nodeReady(n)
			why = append(why, n.Name+": "+w)
		}
		if len(nodes) == 0 {
			return errors.New("the cluster has no nodes")
		}
		return fmt.Errorf("no node of the cluster is Ready (%s)", strings.Join(why, "; "))
	}
	return nil
}

func nodeReady(n corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, "Ready"
			}
			return false, strings.TrimSpace(fmt.Sprintf("Ready=%s %s %s", c.Status, c.Reason, c.Message))
		}
	}
	return false, "no Ready condition yet"
}

func nodeInfo(n corev1.Node) results.KubeNode {
	ready, _ := nodeReady(n)
	out := results.KubeNode{Name: n.Name, Ready: ready, Kubelet: n.Status.NodeInfo.KubeletVersion,
		Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, Kernel: n.Status.NodeInfo.KernelVersion}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && out.Address == "" {
			out.Address = a.Address
		}
	}
	return out
}

// accessNeeded are the verbs and resources a session uses.
var accessNeeded = []struct{ verb, group, resource, sub string }{
	{"create", "", "namespaces", ""},
	{"delete", "", "namespaces", ""},
	{"create", "", "pods", ""},
	{"get", "", "pods", ""},
	{"create", "", "pods", "exec"},
	{"create", "", "services", ""},
	{"create", "", "persistentvolumes", ""},
	{"delete", "", "persistentvolumes", ""},
	{"create", "", "persistentvolumeclaims", ""},
	{"list", "", "events", ""},
}

// checkAccess asks the API server whether the session may do what it will
// (SelfSubjectAccessReview), so that RBAC refuses once, naming the verb and
// resource, not in the middle of a deploy.
func (k *Kube) checkAccess(ctx context.Context) error {
	var denied []string
	for _, a := range accessNeeded {
		ns := k.ns
		if a.resource == "namespaces" || a.resource == "persistentvolumes" {
			ns = ""
		}
		r, err := k.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar(a.verb, a.group, a.resource, a.sub, ns), metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) {
				return &Unavailable{Reason: describe(err, "create", "selfsubjectaccessreviews")}
			}
			return &Unavailable{Reason: fmt.Sprintf("kubernetes API server %s: access review: %v", k.server, err)}
		}
		if !r.Status.Allowed {
			what := a.resource
			if a.sub != "" {
				what += "/" + a.sub
			}
			denied = append(denied, fmt.Sprintf("%s %s", a.verb, what))
		}
	}
	if len(denied) > 0 {
		return &Unavailable{Reason: fmt.Sprintf("RBAC forbids context %s to %s (in namespace %s, or cluster-wide for namespaces and persistentvolumes); ctrperf needs them to deploy", k.context, strings.Join(denied, ", "), k.ns)}
	}
	return nil
}

// describe says what an API error means for people: forbidden names the
// verb and resource, an unreachable server says so.
func describe(err error, verb, resource string) string {
	var st apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("RBAC forbids %s %s: %v", verb, resource, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the API server refused the credentials (%s %s): %v", verb, resource, err)
	case errors.As(err, &st):
		return fmt.Sprintf("%s %s: %v", verb, resource, err)
	}
	return fmt.Sprintf("%s %s: %v", verb, resource, err)
}

// unreachable wraps an error of an API server that is not there to answer
// with engine.ErrUnreachable, so the runner's watch fails the run at once.
func unreachable(err error) error {
	if err == nil {
		return nil
	}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || (errors.As(err, &op) && op.Op == "dial") {
		return fmt.Errorf("%w: %v", engine.ErrUnreachable, err)
	}
	return err
}

// Info describes the cluster: version, context, nodes, the kube-proxy mode
// (recorded in every run's record).
func (k *Kube) Info(ctx context.Context) (engine.Info, error) {
	if k.info == nil {
		return engine.Info{}, errors.New("kubernetes engine: not checked")
	}
	in := *k.info
	kc := *in.Kube
	in.Kube = &kc
	return in, nil
}

// Ping asks the API server for its health.
func (k *Kube) Ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if k.rc == nil {
		_, err := k.cs.Discovery().ServerVersion()
		return unreachable(err)
	}
	err := k.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
	if err != nil {
		return fmt.Errorf("kubernetes API server %s: %w", k.server, unreachable(err))
	}
	return nil
}

// Close ends the session: its namespace, when this process made it, goes
// with everything left in it, and Close waits until it is gone.
func (k *Kube) Close(ctx context.Context) error { return k.deleteOwnNamespace(ctx) }

// Namespace is the session's namespace.
func (k *Kube) Namespace() string { return k.ns }

// hostname for owner annotations.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// Clientset is the engine's client of the cluster (the isolate controller's
// DaemonSet is applied with it).
func (k *Kube) Clientset() kubernetes.Interface { return k.cs }

// RunLabel is the value of labels.Run on a run's pods.
func RunLabel(runID string) string { return labelValue(runID) }

// RuntimeSocket is the nodes' CRI socket as a path that may hold
// $(NODE_NAME) (a node's own name in its path, as on the lab cluster, whose
// nodes share a machine), from the kubelets' /configz; def when none was
// readable or the nodes disagree otherwise.
func (k *Kube) RuntimeSocket(def string) string {
	out := ""
	for node, kc := range k.kubelets {
		ep := strings.TrimPrefix(kc.ContainerRuntimeEndpoint, "unix://")
		if ep == "" {
			return def
		}
		ep = strings.ReplaceAll(ep, node, "$(NODE_NAME)")
		if out != "" && out != ep {
			return def
		}
		out = ep
	}
	if out == "" {
		return def
	}
	return out
}

// KubeletDir is the plan's kubernetes.kubelet_dir ("" when it names none).
func (k *Kube) KubeletDir() string { return k.opt.Spec.KubeletDir }

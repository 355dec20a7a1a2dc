package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/kernel"
	"ctrperf/internal/labels"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// stepTimeout bounds one API call of a deploy or teardown; like Docker's,
// calls are not cut short by the run's context (an object in flight when
// the user hits Ctrl-C would be created after the cleanup looked).
const stepTimeout = 30 * time.Second

// state is the engine's bookkeeping of a deployment in Target.Private.
type state struct {
	mu   sync.Mutex
	pods []results.KubePod
	// running are the pods as they ran (parallel to pods): their UIDs and
	// container IDs, to read their cpusets again.
	running []*corev1.Pod
	// dataNodes are the nodes that hold hostpath or local-pv directories
	// of the run, removed at teardown.
	dataNodes map[string]bool
}

// SelfOwner is this process as the owner of a namespace.
func SelfOwner() Owner {
	pid := os.Getpid()
	fs := kernel.DefaultFS()
	st, _ := kernel.ProcStartTime(fs.Proc(), pid)
	boot, _ := kernel.BootID(fs.Proc())
	return Owner{Host: hostname(), MachineID: kernel.MachineID(), BootID: boot, PID: pid, StartTime: st, Started: metav1.Now(), Command: strings.Join(os.Args, " ")}
}

func (k *Kube) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return lifecycle.Detached(ctx, stepTimeout)
}

// Deploy creates the session's namespace (if this is its first run), then
// each service, last first, waiting for its pod to run and its ready check
// to pass: a pod's IP is known once it runs, so the services a front
// service names ({{addr:db:3306}}) are deployed before it. On any error
// and on cancellation it removes what it made.
func (k *Kube) Deploy(ctx context.Context, spec engine.DeploySpec) (t *engine.Target, err error) {
	if err := engine.ValidateSpec(plan.RuntimeKubernetes, spec); err != nil {
		return nil, err
	}
	st := &state{dataNodes: map[string]bool{}}
	t = &engine.Target{RunID: spec.RunID, Runtime: plan.RuntimeKubernetes, Network: spec.Network, Private: st}
	defer func() {
		if err != nil {
			if terr := k.Teardown(ctx, t); terr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, terr)
			}
			t = nil
		}
	}()
	// Every template must resolve before anything is made.
	all := engine.Bindings{}
	for _, s := range spec.Services {
		all[s.Name] = engine.ServiceBinding{Host: "pending", PortsIdentity: true, DataDir: s.DataDir}
	}
	if err := all.Check(spec.Services, argv); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	if err := k.ensureNamespace(ctx); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	b := engine.Bindings{}
	for i := len(spec.Services) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return t, fmt.Errorf("deploy %s: stopped before service %q: %w", spec.RunID, spec.Services[i].Name, context.Cause(ctx))
		}
		if err := k.deployService(ctx, t, spec, i, b); err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
	}
	k.settleCPUSets(ctx, st)
	return t, nil
}

// settleCPUSets waits, after a deploy that pinned a Guaranteed pod, until
// the run's other pods on that node have left its CPUs: the static CPU
// manager takes them from the shared pool at once, but moves the
// containers already running only in its reconcile loop (every
// cpuManagerReconcilePeriod, 10 s by default). So the run starts with the
// placement it records; past the period and a margin, the pod's record
// says it still shares them.
func (k *Kube) settleCPUSets(ctx context.Context, st *state) {
	st.mu.Lock()
	defer st.mu.Unlock()
	pinned := map[string]cpuset.CPUSet{} // node: the CPUs its Guaranteed pods hold
	for _, p := range st.pods {
		if kc, ok := k.kubelets[p.Node]; ok && kc.CPUManagerPolicy == "static" && p.QoS == string(corev1.PodQOSGuaranteed) && p.CPUSet != "" {
			if cs, err := cpuset.Parse(p.CPUSet); err == nil {
				pinned[p.Node] = pinned[p.Node].Union(cs)
			}
		}
	}
	if len(pinned) == 0 {
		return
	}
	for i := range st.pods {
		p := &st.pods[i]
		held, ok := pinned[p.Node]
		if !ok || p.QoS == string(corev1.PodQOSGuaranteed) || p.CPUSet == "" {
			continue
		}
		kc := k.kubelets[p.Node]
		wait := kc.reconcilePeriod() + 2*time.Second
		deadline := time.Now().Add(wait)
		for {
			cpus, note := podCPUSet(k.opt.Kernel, kc, true, st.running[i])
			cs, err := cpuset.Parse(cpus)
			if note == "" && cpus != "" && err == nil && cs.Intersection(held).IsEmpty() {
				p.CPUSet = cpus
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				p.CPUSet = cpus
				p.CPUSetNote = fmt.Sprintf("still on CPUs %s, pinned to a Guaranteed pod of the node, %s after the deploy (the CPU manager's reconcile period is %s)%s",
					held, wait, kc.reconcilePeriod(), msgSuffix(note))
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// argv is what of a service may hold templates.
func argv(s engine.Service) []string {
	return append(append([]string(nil), s.Entrypoint...), s.Command...)
}

// waitServiceAccount waits, until deadline, for the new namespace's default
// ServiceAccount: the controller-manager makes it a moment after the
// namespace, and the API server refuses a pod created before then.
func (k *Kube) waitServiceAccount(ctx context.Context, deadline time.Time) error {
	for {
		sctx, cancel := k.step(ctx)
		_, err := k.cs.CoreV1().ServiceAccounts(k.ns).Get(sctx, "default", metav1.GetOptions{})
		cancel()
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "get", "serviceaccounts"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s: its default ServiceAccount did not appear within %s (is the cluster's controller-manager running?)", k.ns, k.namespaceTimeout())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s: waiting for its default ServiceAccount: %w", k.ns, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureNamespace creates the session's namespace, or finds it: this
// session's (a later run) is used; one that is terminating (the previous
// run's teardown, or a clean) is waited for; anyone else's is an error.
func (k *Kube) ensureNamespace(ctx context.Context) error {
	deadline := time.Now().Add(k.namespaceTimeout())
	for {
		sctx, cancel := k.step(ctx)
		_, err := k.cs.CoreV1().Namespaces().Create(sctx, namespace(k.ns, k.opt.Session, k.opt.Owner), metav1.CreateOptions{})
		cancel()
		if err == nil {
			return k.waitServiceAccount(ctx, deadline)
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "create", "namespaces"))
		}
		sctx, cancel = k.step(ctx)
		ns, gerr := k.cs.CoreV1().Namespaces().Get(sctx, k.ns, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(gerr) {
			continue // gone meanwhile
		}
		if gerr != nil {
			return fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(gerr), "get", "namespaces"))
		}
		if ns.DeletionTimestamp == nil {
			if k.opt.Owner.Made(ns.Annotations) {
				return nil
			}
			return fmt.Errorf("namespace %s exists and is not this session's (owner %s pid %s, %s); `ctrperf clean` removes it once its owner is gone",
				k.ns, ns.Annotations[AnnotationHost], ns.Annotations[AnnotationPID], ns.Annotations[AnnotationCommand])
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s is terminating since %s and did not go within %s (finalizers %v; conditions: %s)",
				k.ns, ns.DeletionTimestamp.Format(time.RFC3339), k.namespaceTimeout(), ns.Spec.Finalizers, nsConditions(ns))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is terminating: %w", k.ns, context.Cause(ctx))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func nsConditions(ns *corev1.Namespace) string {
	var out []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

func (k *Kube) namespaceTimeout() time.Duration {
	if k.opt.NamespaceTimeout > 0 {
		return k.opt.NamespaceTimeout
	}
	return 2 * time.Minute
}

func (k *Kube) pendingTimeout(rc *engine.ReadyCheck) time.Duration {
	if k.opt.PendingTimeout > 0 {
		return k.opt.PendingTimeout
	}
	return 90 * time.Second
}

func (k *Kube) deployService(ctx context.Context, t *engine.Target, spec engine.DeploySpec, i int, b engine.Bindings) error {
	s := spec.Services[i]
	st := t.Private.(*state)
	b[s.Name] = engine.ServiceBinding{Host: "", PortsIdentity: true, DataDir: s.DataDir}
	cmd, err := b.ExpandAll(s.Command)
	if err != nil {
		return fmt.Errorf("service %q command: %w (a service can name only those after it in the list, which are deployed first)", s.Name, err)
	}
	entry, err := b.ExpandAll(s.Entrypoint)
	if err != nil {
		return fmt.Errorf("service %q entrypoint: %w", s.Name, err)
	}
	env, err := b.ExpandEnv(s.Env)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}
	ps := podSpec{Namespace: k.ns, RunID: spec.RunID, Network: spec.Network, Data: spec.Data, Kube: k.opt.Spec, Node: k.opt.Spec.Node, Nodes: k.staticNodes}
	if s.Labels[labels.Role] == "client" && k.opt.Spec.ClientNode != "" {
		ps.Node = k.opt.Spec.ClientNode // the load generator's pod
	}
	if s.DataDir != "" && spec.Data == plan.DataLocalPV {
		if ps.Node, ps.Claim, err = k.localPV(ctx, t, spec.RunID, s.Name); err != nil {
			return fmt.Errorf("service %q: %w", s.Name, err)
		}
	}
	pod, err := Pod(ps, s, cmd, entry, env)
	if err != nil {
		return err
	}
	sctx, cancel := k.step(ctx)
	_, err = k.cs.CoreV1().Pods(k.ns).Create(sctx, pod, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("service %q: %s", s.Name, describe(unreachable(err), "create", "pods"))
	}
	var svc *corev1.Service
	if i == 0 && (spec.Network == plan.NetworkService || spec.Network == plan.NetworkNodePort) {
		sctx, cancel := k.step(ctx)
		svc, err = k.cs.CoreV1().Services(k.ns).Create(sctx, Service(k.ns, spec.RunID, pod.Name, pod.Name, s.Ports, spec.Network), metav1.CreateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("service %q: %s", s.Name, describe(unreachable(err), "create", "services"))
		}
	}
	running, err := k.waitRunning(ctx, pod.Name, s.Image)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}
	if s.DataDir != "" && spec.Data == plan.DataHostPath {
		st.mu.Lock()
		st.dataNodes[running.Spec.NodeName] = true
		st.mu.Unlock()
	}
	ip := running.Status.PodIP
	t.Containers = append(t.Containers, engine.Container{ID: string(running.UID), Name: running.Name, Service: s.Name, IP: ip})
	st.mu.Lock()
	kp := results.KubePod{Service: s.Name, Name: running.Name, Node: running.Spec.NodeName, IP: ip, QoS: string(running.Status.QOSClass)}
	st.mu.Unlock()
	kc, known := k.kubelets[running.Spec.NodeName]
	kp.CPUSet, kp.CPUSetNote = podCPUSet(k.opt.Kernel, kc, known, running)
	st.mu.Lock()
	st.pods = append(st.pods, kp)
	st.running = append(st.running, running)
	st.mu.Unlock()
	b[s.Name] = engine.ServiceBinding{Host: ip, PortsIdentity: true, DataDir: s.DataDir}
	if i == 0 {
		for _, p := range s.Ports {
			addr, err := endpointAddr(spec.Network, running, svc, p)
			if err != nil {
				return fmt.Errorf("service %q port %d: %w", s.Name, p, err)
			}
			t.Endpoints = append(t.Endpoints, engine.Endpoint{Service: s.Name, Port: p, Addr: addr})
		}
	}
	if s.Ready == nil {
		return nil
	}
	port := s.Ready.Port
	if port == 0 && len(s.Ports) > 0 {
		port = s.Ports[0]
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if ep, err := t.Endpoint(s.Name, port); i == 0 && err == nil {
		addr = ep.Addr // the path the load will take
	}
	alive := func(ctx context.Context) error { return k.podAlive(ctx, pod.Name) }
	if err := engine.WaitReady(ctx, *s.Ready, addr, nil, alive); err != nil {
		return fmt.Errorf("service %q (pod %s/%s on %s) not ready on %s: %w%s%s", s.Name, k.ns, pod.Name, running.Spec.NodeName, addr, err,
			reachHint(spec.Network, addr), k.logTail(ctx, pod.Name, 20))
	}
	return nil
}

// reachHint says what a client on this machine needs to reach the
// address of a network mode, for an address that did not answer.
func reachHint(mode plan.NetworkMode, addr string) string {
	switch mode {
	case plan.NetworkService:
		return fmt.Sprintf(" (a ClusterIP is translated by kube-proxy on the nodes: this machine reaches %s only with a route to the service CIDR through a node, as the lab's `make kube-up` sets)", addr)
	case plan.NetworkPodIP:
		return fmt.Sprintf(" (this machine reaches pod IPs only with routes to the nodes' pod CIDRs: is %s routed?)", addr)
	}
	return ""
}

// endpointAddr is where the client on this machine dials port p of the
// front service, per network mode: the pod's IP; the Service's ClusterIP;
// the pod's node's address and the NodePort; the node's address (the
// pod's IP with hostNetwork).
func endpointAddr(mode plan.NetworkMode, pod *corev1.Pod, svc *corev1.Service, p int) (string, error) {
	switch mode {
	case plan.NetworkPodIP:
		if pod.Status.PodIP == "" {
			return "", fmt.Errorf("pod %s has no IP", pod.Name)
		}
		return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p)), nil
	case plan.NetworkHostNetwork:
		if pod.Status.HostIP == "" {
			return "", fmt.Errorf("pod %s has no host IP", pod.Name)
		}
		return net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(p)), nil
	case plan.NetworkService, plan.NetworkNodePort:
		if svc == nil {
			return "", errors.New("no Service")
		}
		for _, sp := range svc.Spec.Ports {
			if int(sp.Port) != p {
				continue
			}
			if mode == plan.NetworkService {
				if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
					return "", fmt.Errorf("service %s has no ClusterIP", svc.Name)
				}
				return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(p)), nil
			}
			if sp.NodePort == 0 {
				return "", fmt.Errorf("service %s has no NodePort for %d", svc.Name, p)
			}
			if pod.Status.HostIP == "" {
				return "", fmt.Errorf("pod %s has no host IP", pod.Name)
			}
			return net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(int(sp.NodePort))), nil
		}
		return "", fmt.Errorf("service %s does not expose port %d", svc.Name, p)
	}
	return "", fmt.Errorf("network %q is not one of runtime kubernetes", mode)
}

// ImageNotOnNodeError is an image a node does not have: pods never pull
// (there is no registry), so the configuration cannot run until someone
// loads it there. It wraps image.ErrMissing, which the runner records
// not_run.
type ImageNotOnNodeError struct {
	Image, Node, Message string
}

func (e *ImageNotOnNodeError) Error() string {
	return fmt.Sprintf("image %q is not on node %s (pods use imagePullPolicy Never; no registry): load it into the nodes' runtime (`make kube-images` on the lab; elsewhere `docker save %s | ctr -n k8s.io images import -` on each node)%s",
		e.Image, e.Node, e.Image, msgSuffix(e.Message))
}

func (e *ImageNotOnNodeError) Unwrap() error { return image.ErrMissing }

func msgSuffix(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}

// waitRunning waits until the pod runs with its containers started, or
// says why not: its image is not on the node (at once), its container
// failed (at once, with its output), or it stayed Pending past the
// pending timeout (with the scheduler's reason from its events).
func (k *Kube) waitRunning(ctx context.Context, name, img string) (*corev1.Pod, error) {
	deadline := time.Now().Add(k.pendingTimeout(nil))
	var last *corev1.Pod
	for {
		sctx, cancel := k.step(ctx)
		pod, err := k.cs.CoreV1().Pods(k.ns).Get(sctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %s", k.ns, name, describe(unreachable(err), "get", "pods"))
		}
		last = pod
		if done, err := podState(pod, img); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w%s", k.ns, name, err, k.logTail(ctx, name, 20))
		} else if done {
			return pod, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pod %s/%s still %s after %s: %s", k.ns, name, last.Status.Phase, k.pendingTimeout(nil), k.pendingReason(ctx, last))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pod %s/%s: %w", k.ns, name, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// podState says whether a pod runs with every container started, or why
// it never will.
func podState(pod *corev1.Pod, img string) (bool, error) {
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, fmt.Errorf("%s: %s", pod.Status.Phase, containerStates(pod))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull":
				return false, &ImageNotOnNodeError{Image: img, Node: pod.Spec.NodeName, Message: w.Message}
			case "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return false, fmt.Errorf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
		if term := cs.State.Terminated; term != nil {
			return false, fmt.Errorf("container %s exited with status %d (%s) right after start", cs.Name, term.ExitCode, term.Reason)
		}
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false, nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false, nil
		}
	}
	return len(pod.Status.ContainerStatuses) > 0, nil
}

func containerStates(pod *corev1.Pod) string {
	var out []string
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Terminated != nil:
			out = append(out, fmt.Sprintf("container %s exited %d (%s)", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason))
		case cs.State.Waiting != nil:
			out = append(out, fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		}
	}
	if pod.Status.Message != "" {
		out = append(out, pod.Status.Message)
	}
	if len(out) == 0 {
		return "no container status"
	}
	return strings.Join(out, "; ")
}

// pendingReason is why a pod is still pending: the scheduler's condition
// and the pod's latest warning events.
func (k *Kube) pendingReason(ctx context.Context, pod *corev1.Pod) string {
	var out []string
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("not scheduled: %s %s", c.Reason, c.Message))
		}
	}
	sctx, cancel := k.step(ctx)
	defer cancel()
	evs, err := k.cs.CoreV1().Events(k.ns).List(sctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err == nil {
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		seen := map[string]bool{}
		for i := len(evs.Items) - 1; i >= 0 && len(seen) < 3; i-- {
			e := evs.Items[i]
			m := fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	out = append(out, containerStates(pod))
	return strings.Join(out, "; ")
}

func (k *Kube) podAlive(ctx context.Context, name string) error {
	pod, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod: %w", unreachable(err))
	}
	if pod.DeletionTimestamp != nil {
		return errors.New("the pod is being deleted")
	}
	if _, err := podState(pod, ""); err != nil {
		return err
	}
	return nil
}

// logTail is the end of a pod's output, formatted to end a message.
func (k *Kube) logTail(ctx context.Context, name string, lines int64) string {
	lctx, cancel := lifecycle.Detached(ctx, 10*time.Second)
	defer cancel()
	b, err := k.cs.CoreV1().Pods(k.ns).GetLogs(name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(lctx)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return "; last output:\n" + strings.TrimSpace(string(b))
}

// DeploymentInfo is the cluster's Info with the run's pods (node, IP, QoS
// class as the API server set it).
func (k *Kube) DeploymentInfo(t *engine.Target) *engine.Info {
	in, err := k.Info(context.Background())
	if err != nil || t == nil {
		return nil
	}
	if st, ok := t.Private.(*state); ok {
		st.mu.Lock()
		in.Kube.Pods = append([]results.KubePod(nil), st.pods...)
		st.mu.Unlock()
	}
	return &in
}

// Exec runs argv in a service's pod (the exec subresource) and waits.
// A non-zero exit is in the result, not an error.
func (k *Kube) Exec(ctx context.Context, t *engine.Target, service string, argv []string) (engine.ExecResult, error) {
	var c *engine.Container
	for i := range t.Containers {
		if t.Containers[i].Service == service {
			c = &t.Containers[i]
		}
	}
	if c == nil {
		return engine.ExecResult{}, fmt.Errorf("target %s has no service %q", t.RunID, service)
	}
	if k.rc == nil {
		return engine.ExecResult{}, errors.New("kubernetes engine without a REST config cannot exec")
	}
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(c.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: dnsLabel(service, 63), Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(k.rc, "POST", req.URL())
	if err != nil {
		return engine.ExecResult{}, fmt.Errorf("exec %v in pod %s: %w", argv, c.Name, err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	res := engine.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		res.ExitCode = code.Code
		return res, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("exec %v in pod %s: %w", argv, c.Name, context.Cause(ctx))
		}
		return res, fmt.Errorf("exec %v in pod %s: %w", argv, c.Name, unreachable(err))
	}
	return res, nil
}

func sortStrings(s []string) { sort.Strings(s) }

// podCPUSet reads the CPUs a running pod's (first) container may use, its
// cgroup's cpuset, where this machine sees the node's cgroups: the lab's
// nodes are this machine, a real cluster's are not. The pod's UID in the
// path makes sure the cgroup is that pod's and no other machine's. It
// returns the CPU list, or why there is none.
func podCPUSet(fs kernel.FS, kc KubeletConfig, known bool, pod *corev1.Pod) (cpus, note string) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return "", "no container status"
	}
	cid := pod.Status.ContainerStatuses[0].ContainerID
	if i := strings.Index(cid, "://"); i >= 0 {
		cid = cid[i+3:]
	}
	if cid == "" {
		return "", "no container ID"
	}
	root := kc.CgroupRoot
	if !known {
		root = "/" // the kubelet's default
	}
	l := fs.Cgroups()
	file := "cpuset.cpus"
	if l.Mode == kernel.V2 {
		file = "cpuset.cpus.effective"
	}
	uid := string(pod.UID)
	var rels []string
	if kc.CgroupDriver == "systemd" {
		u := strings.ReplaceAll(uid, "-", "_")
		for _, q := range []string{"", "burstable", "besteffort"} {
			slice := "kubepods.slice"
			podSlice := "kubepods-pod" + u + ".slice"
			if q != "" {
				slice += "/kubepods-" + q + ".slice"
				podSlice = "kubepods-" + q + "-pod" + u + ".slice"
			}
			rels = append(rels, path.Join(root, slice, podSlice, "*"+cid+".scope"))
		}
	} else {
		for _, q := range []string{"", "burstable", "besteffort"} {
			rels = append(rels, path.Join(root, "kubepods", q, "pod"+uid, cid))
		}
	}
	for _, rel := range rels {
		matches, _ := filepath.Glob(filepath.Join(l.Path("cpuset", rel), file))
		for _, f := range matches {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", fmt.Sprintf("%s: %v", f, err)
			}
			return strings.TrimSpace(string(b)), ""
		}
	}
	why := fmt.Sprintf("the node's cgroups are not on this machine (no cpuset cgroup of pod %s, container %.12s, under %s)", uid, cid, l.Path("cpuset", root))
	if !known {
		why += "; its kubelet's cgroupRoot was unread"
	}
	return "", why
}

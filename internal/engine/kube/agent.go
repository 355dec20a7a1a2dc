package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/kernel"
	"ctrperf/internal/labels"
)

// Agent pods: `ctrperf agent` on the cluster's nodes, for package bench
// (engine.NodeAgents). The pod itself only waits (ctrperf's own pause
// image, /ctrperf __pause: the ctrperf binary FROM scratch, imported onto
// the nodes by `make kube-images`); the agent is an exec into it whose
// stdin and stdout carry the agent protocol, so the session ends with the
// stream and the pod can serve the next one.
//
//   - a sampler (ctrperf-agent-<node>) sees its node: host PID and network
//     namespaces, privileged, the node's /proc, /sys and cgroup hierarchy
//     mounted read-only under /host, which the agent reads instead of its
//     own (--proc-root …). One per node in the session's namespace, reused
//     while the namespace lives (a run's teardown removes the namespace,
//     and the pod with it).
//   - a client runs a load generator on the pod network, unprivileged, one
//     per run and index, deleted by its AgentConn's Close.

var _ engine.NodeAgents = (*Kube)(nil)

const (
	agentContainer = "agent"
	// hostMounts is where a sampler pod mounts its node's kernel.
	hostProc   = "/host/proc"
	hostSys    = "/host/sys"
	hostCgroup = "/host/cgroup"
	// agentCloseTimeout bounds the wait for an agent to end its session
	// once its stdin is closed (it tears down what the session made).
	agentCloseTimeout = 15 * time.Second
	// stderrTail is how much of an agent's stderr an error quotes.
	stderrTail = 2048
)

// SamplerPodName is the sampler agent's pod on a node.
func SamplerPodName(node string) string { return dnsLabel("ctrperf-agent-"+node, 63) }

// ClientPodName is the pod of a run's client agent number index.
func ClientPodName(runID string, index int) string {
	return PodName(runID, fmt.Sprintf("ctrperf-client-%d", index))
}

// AgentImage is the image of agent pods: ctrperf's pause image, which
// holds the ctrperf binary (image.SelfPath).
func AgentImage() string { return image.Resolve(image.Pause.Name) }

// agentArgv is what the exec into an agent pod runs.
func agentArgv(role engine.AgentRole) []string {
	argv := []string{image.SelfPath, "agent"}
	if role == engine.AgentSampler {
		argv = append(argv, "--proc-root", hostProc, "--sys-root", hostSys, "--cgroup-root", hostCgroup)
	}
	return argv
}

// AgentDeadline bounds how long an agent pod runs (its
// activeDeadlineSeconds), so that a privileged sampler pod outlives a
// session whose owner died, and which nobody cleaned, by a day at most.
// A session goes on longer than that only by setting
// Options.AgentDeadline.
const AgentDeadline = 24 * time.Hour

// AgentPod is the pod of an agent of req in namespace ns of session, which
// the kubelet ends after deadline (AgentDeadline when 0). Pure, so that
// each role's spec is tested without a cluster.
func AgentPod(ns, session, img string, deadline time.Duration, req engine.AgentRequest) (*corev1.Pod, error) {
	grace := int64(gracePeriod)
	if deadline <= 0 {
		deadline = AgentDeadline
	}
	active := int64(max(1, deadline.Round(time.Second)/time.Second))
	c := corev1.Container{Name: agentContainer, Image: img, ImagePullPolicy: corev1.PullNever}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			ActiveDeadlineSeconds:         &active,
			EnableServiceLinks:            new(false),
			AutomountServiceAccountToken:  new(false),
		},
	}
	node := req.Node
	switch req.Role {
	case engine.AgentSampler:
		if node == "" {
			return nil, errors.New("a sampler agent samples one node: the request names none")
		}
		pod.Name = SamplerPodName(node)
		pod.Labels = runLabels(session)
		pod.Annotations = map[string]string{AnnotationRun: session}
		pod.Spec.HostPID, pod.Spec.HostNetwork = true, true
		// A sampler goes where the services went, tainted node or not.
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		c.SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		for _, m := range []struct{ name, from, to string }{{"proc", kernel.ProcMount, hostProc}, {"sys", kernel.SysMount, hostSys}, {"cgroup", kernel.CgroupMount, hostCgroup}} {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: m.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.from}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m.name, MountPath: m.to, ReadOnly: true})
		}
	case engine.AgentClient:
		if req.RunID == "" {
			return nil, errors.New("a client agent belongs to a run: the request names none")
		}
		pod.Name = ClientPodName(req.RunID, req.Index)
		pod.Labels = runLabels(req.RunID)
		pod.Annotations = map[string]string{AnnotationRun: req.RunID}
	default:
		return nil, fmt.Errorf("agent role %q is neither %s nor %s", req.Role, engine.AgentSampler, engine.AgentClient)
	}
	pod.Labels[labels.Service] = "agent-" + string(req.Role)
	if node != "" {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}},
		}}
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod, nil
}

// StartAgent starts `ctrperf agent` in an agent pod of req (made, or the
// session's running one reused) and returns its streams. An image missing
// on the node is an *ImageNotOnNodeError (not_run: `make kube-images`).
func (k *Kube) StartAgent(ctx context.Context, req engine.AgentRequest) (*engine.AgentConn, error) {
	pod, err := k.agentPodRunning(ctx, req)
	if err != nil {
		return nil, err
	}
	conn, err := k.execAgent(pod.Name, pod.Spec.NodeName, agentArgv(req.Role))
	if err != nil {
		if req.Role == engine.AgentClient {
			k.deletePod(ctx, pod.Name)
		}
		return nil, err
	}
	if req.Role == engine.AgentClient {
		end := conn.Close
		conn.Close = func() error {
			err := end()
			k.deletePod(context.Background(), pod.Name)
			return err
		}
	}
	return conn, nil
}

// agentPodRunning makes the agent pod of req, or finds it, and waits until
// it runs.
func (k *Kube) agentPodRunning(ctx context.Context, req engine.AgentRequest) (*corev1.Pod, error) {
	img := AgentImage()
	want, err := AgentPod(k.ns, k.opt.Session, img, k.opt.AgentDeadline, req)
	if err != nil {
		return nil, err
	}
	if err := k.ensureNamespace(ctx); err != nil {
		return nil, fmt.Errorf("%s agent: %w", req.Role, err)
	}
	for attempt := 0; ; attempt++ {
		sctx, cancel := k.step(ctx)
		_, err := k.cs.CoreV1().Pods(k.ns).Create(sctx, want, metav1.CreateOptions{})
		cancel()
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%s agent pod %s/%s: %s", req.Role, k.ns, want.Name, describe(unreachable(err), "create", "pods"))
		}
		sctx, cancel = k.step(ctx)
		have, gerr := k.cs.CoreV1().Pods(k.ns).Get(sctx, want.Name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(gerr) {
			continue // gone meanwhile
		}
		if gerr != nil {
			return nil, fmt.Errorf("%s agent pod %s/%s: %s", req.Role, k.ns, want.Name, describe(unreachable(gerr), "get", "pods"))
		}
		if have.DeletionTimestamp == nil && have.Status.Phase != corev1.PodFailed && have.Status.Phase != corev1.PodSucceeded {
			break // the session's own, reused
		}
		// A pod that ended or is going: replaced, once.
		if attempt > 0 {
			return nil, fmt.Errorf("%s agent pod %s/%s is %s and does not go", req.Role, k.ns, want.Name, have.Status.Phase)
		}
		k.deletePod(ctx, want.Name)
		if err := k.waitPodGone(ctx, want.Name); err != nil {
			return nil, fmt.Errorf("%s agent pod %s/%s: %w", req.Role, k.ns, want.Name, err)
		}
	}
	pod, err := k.waitRunning(ctx, want.Name, img)
	if err != nil {
		return nil, fmt.Errorf("%s agent on %s: %w", req.Role, nodeOrAny(req.Node), err)
	}
	return pod, nil
}

func nodeOrAny(n string) string {
	if n == "" {
		return "any node"
	}
	return "node " + n
}

func (k *Kube) deletePod(ctx context.Context, name string) {
	grace := int64(0)
	dctx, cancel := k.step(ctx)
	defer cancel()
	_ = k.cs.CoreV1().Pods(k.ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

func (k *Kube) waitPodGone(ctx context.Context, name string) error {
	deadline := time.Now().Add(k.pendingTimeout(nil))
	for {
		sctx, cancel := k.step(ctx)
		_, err := k.cs.CoreV1().Pods(k.ns).Get(sctx, name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return errors.New(describe(unreachable(err), "get", "pods"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still there %s after its deletion", k.pendingTimeout(nil))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// execAgent runs argv in the agent pod with its stdin and stdout as the
// AgentConn's streams (the exec subresource: API server → the node's
// kubelet). The stream lives until Close, not with a caller's context.
// When it ends, reads of Stdout fail with why, quoting the agent's stderr.
func (k *Kube) execAgent(pod, node string, argv []string) (*engine.AgentConn, error) {
	if k.rc == nil {
		return nil, errors.New("kubernetes engine without a REST config cannot exec into an agent pod")
	}
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: agentContainer, Command: argv, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(k.rc, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec %v in pod %s/%s: %w", argv, k.ns, pod, err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &tail{max: stderrTail}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		why := agentEnded(k.ns, pod, err, stderr.String())
		outW.CloseWithError(why)
		inR.CloseWithError(why)
	}()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			inW.Close() // end of stdin: the agent ends its session
			select {
			case <-done:
			case <-time.After(agentCloseTimeout):
			}
			cancel()
			<-done
		})
		return nil
	}
	return &engine.AgentConn{Stdout: outR, Stdin: inW, Close: closeFn, Node: node, Pod: k.ns + "/" + pod}, nil
}

// agentEnded says why an agent's exec stream ended.
func agentEnded(ns, pod string, err error, stderr string) error {
	why := "the agent ended"
	if err != nil {
		why = err.Error()
	}
	hint := ""
	if strings.Contains(stderr, "unknown flag") || strings.Contains(stderr, "unknown command") {
		hint = fmt.Sprintf(" (the image's ctrperf is not this one: `make images && make kube-images` imports this ctrperf's %s onto the nodes)", AgentImage())
	}
	if s := strings.TrimSpace(stderr); s != "" {
		return fmt.Errorf("agent in pod %s/%s: %s%s; its stderr ends: %s", ns, pod, why, hint, s)
	}
	return fmt.Errorf("agent in pod %s/%s: %s%s", ns, pod, why, hint)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// NodeOf is the node of service svc's pod in t: from the deployment's
// record, else (a target of several instances) from the pod itself.
func (k *Kube) NodeOf(t *engine.Target, svc string) string {
	if t == nil {
		return ""
	}
	pod := ""
	for _, c := range t.Containers {
		if c.Service == svc {
			pod = c.Name
		}
	}
	if st, ok := t.Private.(*state); ok {
		st.mu.Lock()
		for _, p := range st.pods {
			if p.Service == svc && (pod == "" || p.Name == pod) || pod != "" && p.Name == pod {
				st.mu.Unlock()
				return p.Node
			}
		}
		st.mu.Unlock()
	}
	if pod == "" {
		return ""
	}
	sctx, cancel := k.step(context.Background())
	defer cancel()
	p, err := k.cs.CoreV1().Pods(k.ns).Get(sctx, pod, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.Spec.NodeName
}

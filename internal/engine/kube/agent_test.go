package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

func TestAgentPodOfEachRole(t *testing.T) {
	const ns, session, img = "ctrperf-s", "s-0a1b", "ctrperf/pause:latest"
	sampler, err := AgentPod(ns, session, img, 0, engine.AgentRequest{Role: engine.AgentSampler, Node: "kube-node-2"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := AgentPod(ns, session, img, 0, engine.AgentRequest{Role: engine.AgentClient, RunID: "s-0a1b-r3", Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := AgentPod(ns, session, img, 0, engine.AgentRequest{Role: engine.AgentClient, RunID: "s-0a1b-r3", Node: "kube-node-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{sampler, client, pinned} {
		if d := p.Spec.ActiveDeadlineSeconds; d == nil || *d != int64(AgentDeadline/time.Second) {
			t.Errorf("pod %s: activeDeadlineSeconds %v, want %v: an orphaned agent pod must end", p.Name, d, AgentDeadline)
		}
		c := p.Spec.Containers[0]
		if p.Namespace != ns || p.Labels[labels.Managed] != "true" || p.Labels[labels.Run] == "" || c.Image != img ||
			c.ImagePullPolicy != corev1.PullNever || len(c.Command) != 0 {
			t.Errorf("pod %s: namespace %s, labels %v, container %+v: want the session's namespace, ctrperf's labels, the image's own waiting entrypoint, never pulled", p.Name, p.Namespace, p.Labels, c)
		}
	}

	// The sampler: its node's namespaces and kernel, read-only.
	if sampler.Name != "ctrperf-agent-kube-node-2" || sampler.Labels[labels.Run] != session || !sampler.Spec.HostPID || !sampler.Spec.HostNetwork {
		t.Errorf("sampler %s: labels %v, hostPID %v, hostNetwork %v", sampler.Name, sampler.Labels, sampler.Spec.HostPID, sampler.Spec.HostNetwork)
	}
	if got := nodeOfAffinity(sampler); got != "kube-node-2" {
		t.Errorf("sampler pinned to %q", got)
	}
	sc := sampler.Spec.Containers[0]
	if sc.SecurityContext == nil || sc.SecurityContext.Privileged == nil || !*sc.SecurityContext.Privileged {
		t.Errorf("sampler not privileged: %+v", sc.SecurityContext)
	}
	mounts := map[string]string{}
	for _, m := range sc.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("sampler mount %s is writable", m.MountPath)
		}
		for _, v := range sampler.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				mounts[v.HostPath.Path] = m.MountPath
			}
		}
	}
	if mounts["/proc"] != hostProc || mounts["/sys"] != hostSys || mounts["/sys/fs/cgroup"] != hostCgroup {
		t.Errorf("sampler mounts %v", mounts)
	}
	argv := strings.Join(agentArgv(engine.AgentSampler), " ")
	if argv != image.SelfPath+" agent --proc-root "+hostProc+" --sys-root "+hostSys+" --cgroup-root "+hostCgroup {
		t.Errorf("sampler argv %q: the agent must read the mounted roots", argv)
	}

	// A client: the pod network, no privilege, one per run and index.
	cc := client.Spec.Containers[0]
	if client.Spec.HostNetwork || client.Spec.HostPID || cc.SecurityContext != nil || len(client.Spec.Volumes) != 0 {
		t.Errorf("client pod has host access: %+v / %+v", client.Spec, cc.SecurityContext)
	}
	if client.Labels[labels.Run] != "s-0a1b-r3" || client.Name == pinned.Name || client.Name != ClientPodName("s-0a1b-r3", 1) {
		t.Errorf("client pods %s and %s (labels %v)", client.Name, pinned.Name, client.Labels)
	}
	if nodeOfAffinity(client) != "" || nodeOfAffinity(pinned) != "kube-node-1" {
		t.Errorf("client placement: %q and %q", nodeOfAffinity(client), nodeOfAffinity(pinned))
	}
	if strings.Join(agentArgv(engine.AgentClient), " ") != image.SelfPath+" agent" {
		t.Errorf("client argv %v", agentArgv(engine.AgentClient))
	}

	for _, bad := range []engine.AgentRequest{{Role: engine.AgentSampler}, {Role: engine.AgentClient}, {Role: "spy", Node: "n"}} {
		if _, err := AgentPod(ns, session, img, 0, bad); err == nil {
			t.Errorf("AgentPod(%+v) made a pod", bad)
		}
	}
}

func nodeOfAffinity(p *corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
		return ""
	}
	return p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0]
}

// The sampler pod of a node is made once per session and reused; one that
// ended is replaced.
func TestSamplerPodReused(t *testing.T) {
	f := newFake(t)
	k, err := f.engine(t, plan.KubeSpec{}, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := engine.AgentRequest{Role: engine.AgentSampler, Node: "node-1"}
	p1, err := k.agentPodRunning(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := k.agentPodRunning(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Name != p2.Name || p1.UID != p2.UID {
		t.Errorf("two starts made pods %s (%s) and %s (%s)", p1.Name, p1.UID, p2.Name, p2.UID)
	}
	// It ended (the node rebooted, someone killed it): a new one.
	p2.Status.Phase = corev1.PodFailed
	if _, err := f.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, p2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p3, err := k.agentPodRunning(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if p3.UID == p2.UID || p3.Status.Phase != corev1.PodRunning {
		t.Errorf("a failed sampler pod was not replaced: %s %s", p3.UID, p3.Status.Phase)
	}
	// Without a REST config there is no exec: said, not a hang.
	if _, err := k.StartAgent(ctx, req); err == nil || !strings.Contains(err.Error(), "cannot exec") {
		t.Errorf("StartAgent without a REST config: %v", err)
	}
}

// An agent image that is not on the node is the not_run error that says
// how to load it.
func TestAgentImageNotOnNode(t *testing.T) {
	f := newFake(t)
	f.podState = func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "Container image \"ctrperf/pause:latest\" is not present with pull policy of Never"}}
	}
	k, err := f.engine(t, plan.KubeSpec{}, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.StartAgent(context.Background(), engine.AgentRequest{Role: engine.AgentSampler, Node: "node-2"})
	var missing *ImageNotOnNodeError
	if !errors.As(err, &missing) || !errors.Is(err, image.ErrMissing) || !strings.Contains(err.Error(), "make kube-images") {
		t.Errorf("StartAgent with the image missing: %v", err)
	}
}

func TestNodeOf(t *testing.T) {
	f := newFake(t)
	k, err := f.engine(t, plan.KubeSpec{}, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	st := &state{pods: []results.KubePod{{Service: "app", Name: "app-1", Node: "kube-node-2"}, {Service: "db", Name: "db-1", Node: "kube-node-1"}}}
	tg := &engine.Target{Private: st, Containers: []engine.Container{{Service: "app", Name: "app-1"}, {Service: "db", Name: "db-1"}}}
	if k.NodeOf(tg, "app") != "kube-node-2" || k.NodeOf(tg, "db") != "kube-node-1" || k.NodeOf(tg, "nope") != "" || k.NodeOf(nil, "app") != "" {
		t.Errorf("NodeOf: app %q, db %q", k.NodeOf(tg, "app"), k.NodeOf(tg, "db"))
	}
	// A target of several instances names their pods, whose deployment
	// record it does not hold: the pod says where it runs.
	if _, err := f.cs.CoreV1().Pods(k.ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-2", Namespace: k.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tg.Containers = append(tg.Containers, engine.Container{Service: "app-i2", Name: "app-2"})
	if got := k.NodeOf(tg, "app-i2"); got != "node-1" {
		t.Errorf("NodeOf(second instance) = %q", got)
	}
}

func TestAgentEndedQuotesStderr(t *testing.T) {
	tl := &tail{max: 16}
	tl.Write([]byte("0123456789"))
	tl.Write([]byte("Error: unknown flag: --proc-root"))
	if got := tl.String(); got != "flag: --proc-root"[1:] {
		t.Errorf("tail = %q", got)
	}
	err := agentEnded("ns", "ctrperf-agent-n", errors.New("command terminated with non-zero exit code"), "Error: unknown flag: --proc-root\n")
	if !strings.Contains(err.Error(), "make images && make kube-images") || !strings.Contains(err.Error(), "unknown flag: --proc-root") {
		t.Errorf("an old agent binary: %v", err)
	}
	if err := agentEnded("ns", "p", nil, ""); strings.Contains(err.Error(), "kube-images") {
		t.Errorf("a plain end: %v", err)
	}
}

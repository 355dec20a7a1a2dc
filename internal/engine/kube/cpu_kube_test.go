package kube

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/selfbin"
)

// labStaticNode is the lab's node with the static CPU manager (make
// kube-up's default; KUBE_STATIC_CPU_NODE names another).
func labStaticNode() string {
	if n := os.Getenv("KUBE_STATIC_CPU_NODE"); n != "" && n != "none" {
		return n
	}
	return "kube-node-2"
}

// TestProxyModeKube: the engine reads the lab's kube-proxy mode from a
// node's /proxyMode (iptables unless KUBE_PROXY_MODE says otherwise), and
// each node's CPU manager policy from its kubelet.
func TestProxyModeKube(t *testing.T) {
	parallelKube(t)
	requireKube(t)
	k := kubeEngine(t, testSession(t), plan.KubeSpec{})
	in, err := k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := os.Getenv("KUBE_PROXY_MODE")
	if want == "" {
		want = "iptables"
	}
	if in.Kube.ProxyMode != want || !strings.Contains(in.Kube.ProxyModeFrom, ":10249/proxyMode") {
		t.Errorf("kube-proxy mode %q from %q, want %q from a node's /proxyMode", in.Kube.ProxyMode, in.Kube.ProxyModeFrom, want)
	}
	static := labStaticNode()
	for _, n := range in.Kube.Nodes {
		want := "none"
		if n.Name == static {
			want = "static"
		}
		if n.CPUManager != want {
			t.Errorf("node %s: CPU manager %q, want %q", n.Name, n.CPUManager, want)
		}
	}
}

// TestStaticCPUManagerKube deploys, through the engine, a Burstable pod
// and then a Guaranteed one of one whole CPU on the node with the static
// CPU manager: the Burstable one may use every CPU of the node's shared
// pool, the Guaranteed one is pinned to exactly one CPU, not the reserved
// CPU 0. Without kubernetes.node, qos guaranteed lands on that node.
func TestStaticCPUManagerKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	static := labStaticNode()
	session := testSession(t)
	t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, NamespaceName(session), 2*time.Minute) })
	idle := func() engine.Service {
		return engine.Service{Name: "idle", Image: image.Resolve("ticketd"), Entrypoint: []string{image.SelfPath}, Command: []string{selfbin.Idle},
			Resources: engine.Resources{CPUs: 1, MemoryBytes: 64 << 20}}
	}
	start := time.Now()
	deploy := func(k *Kube, run string) (*engine.Target, string, string) {
		t.Helper()
		tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: session + "-" + run, Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{idle()}})
		if err != nil {
			t.Fatal(err)
		}
		pods := k.DeploymentInfo(tg).Kube.Pods
		if len(pods) != 1 {
			t.Fatalf("pods %+v", pods)
		}
		p := pods[0]
		t.Logf("%s: %+v", run, p)
		if p.Node != static {
			t.Errorf("%s pod on %s, want %s", run, p.Node, static)
		}
		if p.CPUSet == "" {
			t.Errorf("%s pod: no cpuset read (%s)", run, p.CPUSetNote)
		}
		return tg, p.QoS, p.CPUSet
	}

	kb := kubeEngine(t, session, plan.KubeSpec{QoS: "burstable", Node: static})
	tb, qos, cpus := deploy(kb, "burstable")
	if qos != "Burstable" || cpus != "0-1" {
		t.Errorf("Burstable pod: QoS %s, cpuset %q, want the whole shared pool 0-1", qos, cpus)
	}
	if err := kb.Teardown(ctx, tb); err != nil {
		t.Fatal(err)
	}

	kg := kubeEngine(t, session, plan.KubeSpec{QoS: "guaranteed"}) // no node: the static one
	tg, qos, cpus := deploy(kg, "guaranteed")
	if qos != "Guaranteed" || cpus == "0" || strings.ContainsAny(cpus, ",-") {
		t.Errorf("Guaranteed pod: QoS %s, cpuset %q, want exactly one CPU other than the reserved 0", qos, cpus)
	}
	if err := kg.Teardown(ctx, tg); err != nil {
		t.Fatal(err)
	}
	closeKube(t, kb)
	closeKube(t, kg)
	nothingLeft(t, cs, session)
	t.Logf("in %s", time.Since(start).Round(time.Millisecond))

	// A node without the static policy refuses a Guaranteed block.
	for _, n := range []string{"kube-node-1", "kube-node-2"} {
		if n == static {
			continue
		}
		_, err := New(ctx, Options{Spec: plan.KubeSpec{Kubeconfig: kubeconfigForTests(), QoS: "guaranteed", Node: n}, Session: session})
		if err == nil || !strings.Contains(err.Error(), "whose kubelet runs cpuManagerPolicy none") {
			t.Errorf("qos guaranteed on %s: %v", n, err)
		}
	}
}

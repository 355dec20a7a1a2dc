package kube

// Integration tests against a real cluster: the lab's (`make kube-up`,
// `make kube-images`), or the one $CTRPERF_KUBECONFIG names. Without one
// they skip, or fail under CTRPERF_REQUIRE_KUBE=1. Never a mock.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

const requireKubeEnv = "CTRPERF_REQUIRE_KUBE"

// kubeconfigForTests is the cluster the tests use.
func kubeconfigForTests() string {
	if p := os.Getenv("CTRPERF_KUBECONFIG"); p != "" {
		return p
	}
	return LabKubeconfig
}

// requireKube returns a client of the test cluster once it answers with a
// Ready node; without one the test skips, or fails under
// CTRPERF_REQUIRE_KUBE=1.
func requireKube(t *testing.T) kubernetes.Interface {
	t.Helper()
	miss := func(format string, a ...any) {
		t.Helper()
		if os.Getenv(requireKubeEnv) == "1" {
			t.Fatalf(format, a...)
		}
		t.Skipf(format, a...)
	}
	rc, _, server, err := ClientConfig(kubeconfigForTests(), "")
	if err != nil {
		miss("no cluster (make kube-up): %v", err)
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		miss("cluster %s: %v", server, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		miss("cluster %s does not answer: %v", server, err)
	}
	if err := checkNodes(nodes.Items, ""); err != nil {
		miss("cluster %s: %v", server, err)
	}
	return cs
}

func kubeEngine(t *testing.T, session string, spec plan.KubeSpec) *Kube {
	t.Helper()
	spec.Kubeconfig = kubeconfigForTests()
	k, err := New(context.Background(), Options{Spec: spec, Session: session})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	return k
}

// sessions counts the test sessions of this process: tests running in
// parallel must not get the same namespace from the same clock reading.
var sessions atomic.Int64

func testSession(t *testing.T) string {
	return fmt.Sprintf("kubetest-%x-%d", time.Now().UnixNano()&0xffffffff, sessions.Add(1))
}

// nothingLeft fails the test when the session's namespace or any PV of its
// runs is still in the cluster.
// closeKube ends the engine's session: its namespace goes.
func closeKube(t *testing.T, k *Kube) {
	t.Helper()
	if err := k.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

func nothingLeft(t *testing.T, cs kubernetes.Interface, session string) {
	t.Helper()
	ns := NamespaceName(session)
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s is still there", ns)
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{LabelSelector: labels.Managed + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.Annotations["ctrperf.namespace"] == ns {
			t.Errorf("persistent volume %s of %s is still there", pv.Name, ns)
		}
	}
}

// memcachedVersion asks memcached at addr for its version.
func memcachedVersion(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func memcachedService() engine.Service {
	return engine.Service{Name: "kv", Image: image.Resolve(image.DebianBase.Name),
		Command: []string{"memcached", "-l", "{{listen:kv}}", "-p", "{{port:kv:11211}}", "-U", "0", "-u", "nobody", "-m", "64"},
		Ports:   []int{11211}, Ready: &engine.ReadyCheck{Port: 11211, Timeout: 60 * time.Second}}
}

// TestNetworksKube deploys memcached in each network mode and talks to it
// from this machine on the endpoint's path; each teardown leaves nothing.
// The modes run side by side, each in a session (namespace) of its own.
func TestNetworksKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	for i, mode := range []plan.NetworkMode{plan.NetworkPodIP, plan.NetworkService, plan.NetworkNodePort, plan.NetworkHostNetwork} {
		t.Run(string(mode), func(t *testing.T) {
			parallelKube(t)
			session := testSession(t)
			k := kubeEngine(t, session, plan.KubeSpec{})
			t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, NamespaceName(session), 2*time.Minute) })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: fmt.Sprintf("%s-%03d", session, i), Network: mode, Data: plan.DataLayer, Services: []engine.Service{memcachedService()}})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := tg.Endpoint("kv", 11211)
			if err != nil {
				t.Fatal(err)
			}
			v, err := memcachedVersion(ep.Addr)
			if err != nil || !strings.HasPrefix(v, "VERSION ") {
				t.Errorf("memcached at %s: %q %v", ep.Addr, v, err)
			}
			in := k.DeploymentInfo(tg)
			t.Logf("%s: %s; pods %+v; kube-proxy %q from %s", mode, ep.Addr, in.Kube.Pods, in.Kube.ProxyMode, in.Kube.ProxyModeFrom)
			if len(in.Kube.Pods) != 1 || in.Kube.Pods[0].QoS != "BestEffort" {
				t.Errorf("pods %+v", in.Kube.Pods)
			}
			if err := k.Teardown(ctx, tg); err != nil {
				t.Fatal(err)
			}
			closeKube(t, k)
			nothingLeft(t, cs, session)
		})
	}
}

// TestDataKube deploys a sleeper on each data placement, writes through
// the data directory, and checks what backs it (tmpfs for memory); the
// node's directories of hostpath and local-pv are gone after teardown.
// The placements run side by side, each in a session of its own.
func TestDataKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	for i, data := range []plan.DataPlacement{plan.DataLayer, plan.DataEmptyDir, plan.DataEmptyDirMemory, plan.DataHostPath, plan.DataLocalPV} {
		t.Run(string(data), func(t *testing.T) {
			parallelKube(t)
			session := testSession(t)
			k := kubeEngine(t, session, plan.KubeSpec{Node: "kube-node-1"})
			t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, NamespaceName(session), 2*time.Minute) })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			runID := fmt.Sprintf("%s-%03d", session, i)
			s := engine.Service{Name: "io", Image: image.Resolve(image.DebianBase.Name), DataDir: "/data",
				Command: []string{"/bin/sh", "-c", "exec sleep infinity"}}
			tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: runID, Network: plan.NetworkPodIP, Data: data, Services: []engine.Service{s}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := k.Exec(ctx, tg, "io", []string{"/bin/sh", "-c", "mkdir -p /data && echo hello > /data/f && cat /data/f && awk '$2 == \"/data\" {print $3}' /proc/mounts"})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
			}
			out := strings.Fields(string(res.Stdout))
			t.Logf("%s: %q", data, out)
			if len(out) == 0 || out[0] != "hello" {
				t.Errorf("read back %q", out)
			}
			fsType := ""
			if len(out) > 1 {
				fsType = out[1]
			}
			switch data {
			case plan.DataLayer:
				if fsType != "" {
					t.Errorf("layer: /data is a mount (%s)", fsType)
				}
			case plan.DataEmptyDirMemory:
				if fsType != "tmpfs" {
					t.Errorf("emptydir-memory on %q, want tmpfs", fsType)
				}
			default:
				if fsType == "" || fsType == "tmpfs" {
					t.Errorf("%s on %q, want a disk's filesystem", data, fsType)
				}
			}
			dir := HostPathDir(k.Namespace(), runID, "io")
			if data == plan.DataHostPath || data == plan.DataLocalPV {
				// The lab's nodes share this machine's filesystem.
				if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "hello\n" {
					t.Errorf("the node's %s: %q %v", dir, b, err)
				}
			}
			if err := k.Teardown(ctx, tg); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is still on the node: %v", dir, err)
			}
			if _, err := os.Stat(filepath.Join(HostPathRoot, k.Namespace())); !os.IsNotExist(err) {
				t.Errorf("the session's directory on the node is still there: %v", err)
			}
			closeKube(t, k)
			nothingLeft(t, cs, session)
		})
	}
}

// TestImageNotOnNodeKube: an image the nodes do not have is ImageNotOnNode
// (image.ErrMissing: the runner records not_run), and nothing is left.
func TestImageNotOnNodeKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	session := testSession(t)
	k := kubeEngine(t, session, plan.KubeSpec{})
	s := memcachedService()
	s.Image = "ctrperf/not-loaded:never"
	_, err := k.Deploy(context.Background(), engine.DeploySpec{RunID: session + "-001", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{s}})
	var missing *ImageNotOnNodeError
	if err == nil || !strings.Contains(err.Error(), "make kube-images") || !asImageMissing(err, &missing) {
		t.Errorf("error %v", err)
	}
	closeKube(t, k)
	nothingLeft(t, cs, session)
}

// TestPendingKube: a pod no node can take fails after the pending timeout
// with the scheduler's reason.
func TestPendingKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	session := testSession(t)
	spec := plan.KubeSpec{Kubeconfig: kubeconfigForTests()}
	k, err := New(context.Background(), Options{Spec: spec, Session: session, PendingTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := memcachedService()
	s.Resources = plan.Resources{CPUs: 64, MemoryBytes: 64 << 20}
	_, err = k.Deploy(context.Background(), engine.DeploySpec{RunID: session + "-001", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{s}})
	if err == nil || !strings.Contains(err.Error(), "still Pending") || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("error %v", err)
	}
	closeKube(t, k)
	nothingLeft(t, cs, session)
}

// TestGatesKube: a wrong context and a kube-proxy mode the cluster does
// not run are Unavailable (not_run) with the reason.
func TestGatesKube(t *testing.T) {
	parallelKube(t)
	requireKube(t)
	_, err := New(context.Background(), Options{Spec: plan.KubeSpec{Kubeconfig: kubeconfigForTests(), Context: "nope"}, Session: "s"})
	if err == nil || !strings.Contains(err.Error(), `has no context "nope"`) {
		t.Errorf("wrong context: %v", err)
	}
	_, err = New(context.Background(), Options{Spec: plan.KubeSpec{Kubeconfig: kubeconfigForTests(), ProxyMode: "ipvs"}, Session: "s"})
	if err == nil || !strings.Contains(err.Error(), "CONFIG_IP_VS") {
		t.Errorf("ipvs: %v", err)
	}
}

// kubeBenchPlan is a small kv plan on the cluster for the signal tests.
func kubeBenchPlan(t *testing.T, duration string) string {
	p := filepath.Join(t.TempDir(), "kube-signal.yaml")
	src := fmt.Sprintf(`name: kube-signal
workload: kv
repetitions: 2
warmup: 1s
duration: %s
baseline: pod
configurations:
  - name: pod
    runtime: kubernetes
    kubernetes: {kubeconfig: %s}
`, duration, kubeconfigForTests())
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startBench starts `ctrperf bench run` of plan and waits until its
// session's namespace holds a running pod; it returns the command and the
// namespace.
func startBench(t *testing.T, cs kubernetes.Interface, bin, planFile string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, "bench", "run", planFile, "--out", filepath.Join(t.TempDir(), "out"), "--allow-concurrent", "--observe=false")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		nss, err := Namespaces(context.Background(), cs)
		if err == nil {
			for _, n := range nss {
				if n.PID != cmd.Process.Pid {
					continue
				}
				pods, err := cs.CoreV1().Pods(n.Name).List(context.Background(), metav1.ListOptions{})
				if err == nil && len(pods.Items) > 0 && pods.Items[0].Status.Phase == "Running" {
					return cmd, &out, n.Name
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Fatalf("no running pod of the bench run within 2 min:\n%s", out.String())
	return nil, nil, ""
}

// TestCtrlCKube: Ctrl-C mid-run deletes the session's namespace and waits
// for it; nothing of the session is left.
func TestCtrlCKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	bin := testenv.Ctrperf(t)
	cmd, out, ns := startBench(t, cs, bin, kubeBenchPlan(t, "60s"))
	time.Sleep(2 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130:\n%s", err, out.String())
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s outlived Ctrl-C:\n%s", ns, out.String())
	}
}

// TestKillThenCleanKube: after SIGKILL the session's namespace stays;
// `ctrperf clean` finds it by label and owner (the pid is gone) and
// removes it, while a live session's namespace is kept.
func TestKillThenCleanKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	bin := testenv.Ctrperf(t)
	// A live session's namespace, this test process's: clean keeps it.
	live := kubeEngine(t, testSession(t), plan.KubeSpec{})
	if err := live.ensureNamespace(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, live.Namespace(), 2*time.Minute) })

	cmd, out, ns := startBench(t, cs, bin, kubeBenchPlan(t, "60s"))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("after SIGKILL the namespace %s should still be there: %v\n%s", ns, err, out.String())
	}
	clean := exec.Command(bin, "clean")
	clean.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigForTests())
	b, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("ctrperf clean: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), ns) {
		t.Errorf("ctrperf clean did not say it removed %s:\n%s", ns, b)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s survived ctrperf clean:\n%s", ns, b)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), live.Namespace(), metav1.GetOptions{}); err != nil {
		t.Errorf("ctrperf clean removed the live session's namespace %s: %v\n%s", live.Namespace(), err, b)
	}
}

func asImageMissing(err error, target **ImageNotOnNodeError) bool {
	return errors.As(err, target) && errors.Is(err, image.ErrMissing)
}

// TestRBACForbiddenKube: a service account that may do nothing gets a
// not_run reason naming each verb and resource it lacks.
func TestRBACForbiddenKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	ctx := context.Background()
	ns := "ctrperf-rbactest-" + fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, ns, 2*time.Minute) })
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, _, err := ClientConfig(kubeconfigForTests(), "")
	if err != nil {
		t.Fatal(err)
	}
	sa := rest.AnonymousClientConfig(rc)
	sa.BearerToken = tok.Status.Token
	sacs, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(ctx, Options{Session: "rbactest", Client: sacs, Config: sa})
	var un *Unavailable
	if !errors.As(err, &un) || !strings.Contains(un.Reason, "RBAC forbids") || !strings.Contains(un.Reason, "create namespaces") || !strings.Contains(un.Reason, "create pods/exec") {
		t.Errorf("error %v", err)
	}
	t.Log(err)
}

// TestTerminatingNamespaceKube: a session namespace stuck terminating (a
// finalizer nobody removes) is waited for, then a clear error naming it;
// once it goes, the deploy works. The finalizer is on the namespace itself,
// as another controller's would be: once removed, the namespace goes at
// once (one on an object inside it would wait out the namespace
// controller's back-off, 8 s more, for the same check).
func TestTerminatingNamespaceKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	ctx := context.Background()
	session := testSession(t)
	spec := plan.KubeSpec{Kubeconfig: kubeconfigForTests()}
	k, err := New(ctx, Options{Spec: spec, Session: session, NamespaceTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.ensureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	finalizers := func(patch string) error {
		_, err := cs.CoreV1().Namespaces().Patch(ctx, k.Namespace(), types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":`+patch+`}}`), metav1.PatchOptions{})
		return err
	}
	if err := finalizers(`["ctrperf.test/hold"]`); err != nil {
		t.Fatal(err)
	}
	release := func() { _ = finalizers("null") }
	t.Cleanup(func() { release(); _ = DeleteNamespace(context.Background(), cs, k.Namespace(), 2*time.Minute) })
	if err := cs.CoreV1().Namespaces().Delete(ctx, k.Namespace(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = k.Deploy(ctx, engine.DeploySpec{RunID: session + "-001", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{memcachedService()}})
	if err == nil || !strings.Contains(err.Error(), "is terminating since") || !strings.Contains(err.Error(), "did not go within 5s") {
		t.Fatalf("error %v", err)
	}
	t.Log(err)
	if err := finalizers("null"); err != nil {
		t.Fatal(err)
	}
	// The namespace controller may not have emptied it yet: its time.
	if err := DeleteNamespace(ctx, cs, k.Namespace(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: session + "-002", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{memcachedService()}})
	if err != nil {
		t.Fatalf("after the namespace went: %v", err)
	}
	k.opt.NamespaceTimeout = 0 // the default again: a pod's deletion takes more than the 5 s this test gave the wait
	if err := k.Teardown(ctx, tg); err != nil {
		t.Fatal(err)
	}
	closeKube(t, k)
	nothingLeft(t, cs, session)
}

// The sampler agent on the node of a service pod: StartAgent makes the
// agent pod on kube-node-2 and execs `ctrperf agent` in it; through its
// streams the agent protocol samples the service pod's cgroup, found on
// that node by the pod's UID; it burns CPU under a limit, so its CPU and
// throttling are not zero. The teardown leaves nothing of the session.
func TestSamplerAgentKube(t *testing.T) {
	cs := requireKube(t)
	session := testSession(t)
	k := kubeEngine(t, session, plan.KubeSpec{Node: "kube-node-2"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	burn := engine.Service{Name: "burn", Image: image.Resolve(image.DebianBase.Name),
		Entrypoint: []string{"/bin/sh", "-c", "while :; do :; done"}, Resources: engine.Resources{CPUs: 0.2}}
	tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: session + "-r1", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{burn}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := k.Teardown(context.Background(), tg); err != nil {
			t.Error(err)
		}
		closeKube(t, k)
		nothingLeft(t, cs, session)
	}()
	node := k.NodeOf(tg, "burn")
	if node != "kube-node-2" {
		t.Fatalf("NodeOf(burn) = %q, want kube-node-2", node)
	}
	t0 := time.Now()
	conn, err := k.StartAgent(ctx, engine.AgentRequest{Role: engine.AgentSampler, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Node != node || conn.Pod != k.ns+"/"+SamplerPodName(node) {
		t.Errorf("agent on %s in %s", conn.Node, conn.Pod)
	}
	c, err := remote.NewClient(ctx, conn.Stdout, conn.Stdin, remote.ClientOptions{Name: conn.Pod, Session: session, Closer: closerFunc(conn.Close)})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	t.Logf("agent %s on %s answered in %s (pid %d, %s)", conn.Pod, conn.Node, time.Since(t0).Round(time.Millisecond), c.Hello.PID, c.Hello.Executable)
	o := remote.NewObserver(c, "k1", tg).SamplePods([]agent.PodCgroup{{Name: "burn", UID: tg.Containers[0].ID}})
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	s := o.Stop()
	if len(s.Unavailable) > 0 {
		t.Logf("unavailable: %v", s.Unavailable)
	}
	var cpu, throttled float64
	for _, smp := range s.Samples {
		cpu += smp.Containers["burn"].CPUPercent
		throttled += smp.Containers["burn"].ThrottledPeriods
		if smp.CPU["all"] == (results.CPUPercent{}) {
			t.Errorf("sample at %.1f s has no node CPU", smp.T)
		}
	}
	t.Logf("%d samples: burn %.1f%% CPU and %.0f throttled periods summed", len(s.Samples), cpu, throttled)
	if len(s.Samples) < 3 || cpu <= 0 || throttled <= 0 {
		t.Errorf("samples of the pod's cgroup: %d samples, CPU %.1f, throttled periods %.0f; want ≥3 samples with both above zero (%+v)", len(s.Samples), cpu, throttled, s.Unavailable)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("close: %v", err)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestInstancesHostPathKube: two instances of one session on hostpath,
// torn down in turn: the second's data is removed too (issue 35 item 2:
// the first's teardown took the namespace, and the second's helper pod got
// NotFound), and when the session closes nothing is left under
// HostPathRoot on the node and no namespace.
func TestInstancesHostPathKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	session := testSession(t)
	k := kubeEngine(t, session, plan.KubeSpec{Node: "kube-node-1"})
	t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, NamespaceName(session), 2*time.Minute) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := engine.Service{Name: "io", Image: image.Resolve(image.DebianBase.Name), DataDir: "/data",
		Command: []string{"/bin/sh", "-c", "exec sleep infinity"}}
	var tgs []*engine.Target
	for i := range 2 {
		tg, err := k.Deploy(ctx, engine.DeploySpec{RunID: fmt.Sprintf("%s-i%d", session, i), Network: plan.NetworkPodIP, Data: plan.DataHostPath, Services: []engine.Service{s}})
		if err != nil {
			t.Fatal(err)
		}
		tgs = append(tgs, tg)
		if res, err := k.Exec(ctx, tg, "io", []string{"/bin/sh", "-c", "echo hello > /data/f"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
		}
	}
	for _, tg := range tgs {
		if err := k.Teardown(ctx, tg); err != nil {
			t.Fatalf("teardown of %s: %v", tg.RunID, err)
		}
	}
	closeKube(t, k)
	// The lab's nodes share this machine's filesystem.
	if _, err := os.Stat(filepath.Join(HostPathRoot, k.Namespace())); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(filepath.Join(HostPathRoot, k.Namespace()))
		t.Errorf("%s is still on the node (%v): %v", filepath.Join(HostPathRoot, k.Namespace()), err, ents)
	}
	nothingLeft(t, cs, session)
}

// TestCleanOwnershipKube: `ctrperf clean` on the lab cluster keeps a
// namespace that carries ctrperf's label but that ctrperf did not make,
// even with --force; keeps a namespace of a host that is gone until
// --force, which removes it; and removes one of an earlier boot of this
// machine, whose pid means nothing now (issue 35 item 3). The three cases
// run side by side (each clean names its own sessions with --run): most of
// their time is the namespace controller's, deleting.
func TestCleanOwnershipKube(t *testing.T) {
	parallelKube(t)
	cs := requireKube(t)
	bin := testenv.Ctrperf(t)
	ctx := context.Background()
	self := SelfOwner()
	mk := func(t *testing.T, name, session string, o Owner) {
		t.Helper()
		ns := namespace(name, session, o)
		if o.PID == 0 { // no owner at all: a user's namespace, labelled
			ns.Annotations = nil
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = DeleteNamespace(context.Background(), cs, name, 2*time.Minute) })
	}
	exists := func(name string) bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	clean := func(t *testing.T, args ...string) string {
		t.Helper()
		c := exec.Command(bin, append([]string{"clean"}, args...)...)
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigForTests())
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("ctrperf clean %v: %v\n%s", args, err, b)
		}
		return string(b)
	}

	// A user's namespace named as they like, with ctrperf's label and a
	// dead owner's annotations copied from one of ctrperf's; and one named
	// like ctrperf's, labelled, without any owner.
	t.Run("not ctrperf's", func(t *testing.T) {
		t.Parallel()
		forged, bare := testSession(t), testSession(t)
		dead := self
		dead.PID, dead.StartTime = 1<<22+1, 1
		mk(t, "team-"+forged, forged, dead)
		mk(t, NamespaceName(bare), bare, Owner{})
		for _, s := range []string{forged, bare} {
			out := clean(t, "--force", "--run", s)
			if !strings.Contains(out, "is not one ctrperf made") {
				t.Errorf("clean --force --run %s did not say why it left the namespace:\n%s", s, out)
			}
		}
		if !exists("team-"+forged) || !exists(NamespaceName(bare)) {
			t.Fatal("clean --force removed a namespace ctrperf did not make")
		}
	})

	// A host that is gone: another machine's owner.
	t.Run("a host that is gone", func(t *testing.T) {
		t.Parallel()
		gone := testSession(t)
		mk(t, NamespaceName(gone), gone, Owner{Host: "gone-host", MachineID: "00000000000000000000000000000001", BootID: "b", PID: 4242, StartTime: 1})
		out := clean(t, "--run", gone)
		if !exists(NamespaceName(gone)) || !strings.Contains(out, "--force") {
			t.Fatalf("plain clean removed a namespace of another machine, or did not say how to:\n%s", out)
		}
		if out := clean(t, "--dry-run", "--run", gone); !strings.Contains(out, "live") || !strings.Contains(out, "gone-host") {
			t.Errorf("dry run does not list the namespace as live on gone-host:\n%s", out)
		}
		out = clean(t, "--force", "--run", gone)
		if exists(NamespaceName(gone)) {
			t.Errorf("clean --force left the namespace of a host that is gone:\n%s", out)
		}
	})

	// An earlier boot of this machine: the pid may be alive (this test's
	// own), it is another process now.
	t.Run("an earlier boot", func(t *testing.T) {
		t.Parallel()
		rebooted := testSession(t)
		earlier := self
		earlier.BootID = "00000000-0000-0000-0000-000000000000"
		mk(t, NamespaceName(rebooted), rebooted, earlier)
		out := clean(t, "--run", rebooted)
		if exists(NamespaceName(rebooted)) {
			t.Errorf("clean left the namespace of an earlier boot:\n%s", out)
		}
	})
}

package kubelab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The repository's root, from this package's directory.
const repo = "../.."

// leaveDownEnv set to 1 leaves the cluster down after TestLabClusterKube
// even when it was up before (CI, which takes it down next anyway).
const leaveDownEnv = "CTRPERF_KUBE_LEAVE_DOWN"

// requireCluster skips (or, with CTRPERF_REQUIRE_KUBE=1, fails) where the
// lab cluster cannot be made: not root, no bin/kube or bin/ctrperf.
func requireCluster(t *testing.T) {
	t.Helper()
	var why string
	switch {
	case os.Geteuid() != 0:
		why = "needs root"
	case !exists(filepath.Join(repo, "bin/kube")):
		why = "bin/kube is missing (make bin/kube)"
	case !exists(filepath.Join(repo, "bin/ctrperf")):
		why = "bin/ctrperf is missing (make build)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CTRPERF_REQUIRE_KUBE") == "1" {
		t.Fatalf("CTRPERF_REQUIRE_KUBE=1 but the lab cluster cannot be made: %s", why)
	}
	t.Skip(why)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// sh runs a command in the repository and returns its stdout; it fails the
// test with its output when it fails.
func sh(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repo
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return sh(t, 2*time.Minute, "bin/kube", append([]string{"kubectl", "--kubeconfig", Kubeconfig}, args...)...)
}

// TestLabClusterKube brings the lab cluster up (make kube-up), checks both
// nodes Ready, kube-proxy's mode, the FORWARD rules, a pod of ctrperf's own image on each node, host to pod, pod
// to pod across nodes and a Service's ClusterIP through kube-proxy, then
// takes it down (make kube-down) and finds nothing of it left on the
// machine. A cluster that was up before is brought up again at the end
// (others' tests use it), unless CTRPERF_KUBE_LEAVE_DOWN=1: .ci/run, whose
// teardown takes the cluster down next, sets it and runs this test after
// every other cluster test (make integration-kube), which spares it a
// second make kube-up and image import (about 100 s of CI's 2 cores).
func TestLabClusterKube(t *testing.T) {
	requireCluster(t)
	before, err := Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	wasUp := len(before) > 0
	t.Logf("before: %d objects of a cluster on the machine", len(before))
	imported := nodeImages()

	start := time.Now()
	sh(t, 10*time.Minute, "make", "--no-print-directory", "kube-up")
	t.Logf("make kube-up: %s", time.Since(start).Round(time.Millisecond))

	t.Run("NodesReady", func(t *testing.T) {
		out := kubectl(t, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		for _, n := range []string{"kube-node-1", "kube-node-2"} {
			if !strings.Contains(out, n+"=True") {
				t.Errorf("node %s not Ready:\n%s", n, out)
			}
		}
	})

	t.Run("ProxyMode", func(t *testing.T) {
		want := os.Getenv("KUBE_PROXY_MODE")
		if want == "" {
			want = "iptables"
		}
		for i, n := range []string{"kube-node-1", "kube-node-2"} {
			// kube-proxy's metrics port on the node's address, where
			// ctrperf reads it (make kube-up has waited for its healthz).
			url := fmt.Sprintf("http://%s%d:10249/proxyMode", NodeNet, 11+i)
			out, err := exec.Command("curl", "-sS", "-m", "5", url).CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != want {
				t.Errorf("kube-proxy on %s (%s): mode %q (%v), want %q", n, url, got, err, want)
			}
		}
		// And as ctrperf reports it.
		out := sh(t, time.Minute, "bin/ctrperf", "doctor")
		if !strings.Contains(out, "kube-proxy") || !regexp.MustCompile(`kube-proxy\s+`+want+` \(http://`).MatchString(out) {
			t.Errorf("ctrperf doctor does not report kube-proxy %s from a node's /proxyMode:\n%s", want, out)
		}
	})
	t.Run("ForwardRules", forwardRules)
	t.Run("PodsServicesAndPaths", func(t *testing.T) { podsAndPaths(t) })
	// kube-node-2 runs the static CPU manager unless told otherwise (as
	// make kube-up reads KUBE_STATIC_CPU_NODE: empty is kube-node-2).
	if node := os.Getenv("KUBE_STATIC_CPU_NODE"); node != "none" {
		if node == "" {
			node = "kube-node-2"
		}
		t.Run("GuaranteedPodPinned", func(t *testing.T) { guaranteedPinned(t, node) })
	}

	start = time.Now()
	sh(t, 5*time.Minute, "make", "--no-print-directory", "kube-down")
	t.Logf("make kube-down: %s", time.Since(start).Round(time.Millisecond))
	after, err := Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > 0 {
		t.Errorf("make kube-down left %d objects of the cluster:\n%s", len(after), strings.Join(after, "\n"))
	}
	sh(t, time.Minute, "make", "--no-print-directory", "kube-down") // a second down is a no-op
	if again, _ := Leftovers(); len(again) > 0 {
		t.Errorf("a second make kube-down left:\n%s", strings.Join(again, "\n"))
	}
	if wasUp && os.Getenv(leaveDownEnv) != "1" {
		// As it was: up, with the images its nodes had (others' tests use it).
		sh(t, 10*time.Minute, "make", "--no-print-directory", "kube-up")
		if len(imported) > 0 {
			sh(t, 10*time.Minute, "scripts/kube.sh", append([]string{"images"}, imported...)...)
		}
	}
}

// nodeImages lists the ctrperf images imported into kube-node-1's
// containerd that the Docker engine still has, as Docker names them, or
// nothing when containerd does not answer.
func nodeImages() []string {
	out, err := exec.Command("ctr", "-a", RunDir+"/kube-node-1/containerd.sock", "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return nil
	}
	var refs []string
	for _, l := range strings.Fields(string(out)) {
		ref, ok := strings.CutPrefix(l, "docker.io/")
		if !ok || !strings.HasPrefix(ref, "ctrperf/") || ref == "ctrperf/pause:latest" {
			continue
		}
		if exec.Command("docker", "image", "inspect", ref).Run() == nil { // still there to import again
			refs = append(refs, ref)
		}
	}
	return refs
}

// podsAndPaths runs ticketd (ctrperf's own FROM-scratch image, imported,
// imagePullPolicy Never) on each node, a ClusterIP Service in front of the
// one on kube-node-2, and dials them: from this machine to each pod IP, from
// the pod on kube-node-1 to the one on kube-node-2, and from this machine
// and from a pod to the Service.
func podsAndPaths(t *testing.T) {
	const image = "ctrperf/ticketd:latest"
	sh(t, 5*time.Minute, "bin/ctrperf", "images", "build", "ticketd")
	sh(t, 5*time.Minute, "scripts/kube.sh", "images", image)

	ns := fmt.Sprintf("ctrperf-kubetest-%d", os.Getpid())
	var manifest strings.Builder
	fmt.Fprintf(&manifest, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {app.kubernetes.io/managed-by: ctrperf}}\n", ns)
	for _, node := range []string{"kube-node-1", "kube-node-2"} {
		fmt.Fprintf(&manifest, `---
apiVersion: v1
kind: Pod
metadata: {name: web-%[1]s, namespace: %[2]s, labels: {app: web-%[1]s}}
spec:
  nodeName: %[1]s
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: ticketd
    image: %[3]s
    imagePullPolicy: Never
    args: [--listen, ":8080", --data-dir, /data, --seed-users, "1", --seed-projects, "1", --seed-tickets, "1", --hash-cost, "4"]
    ports: [{containerPort: 8080}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`, node, ns, image)
	}
	fmt.Fprintf(&manifest, `---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %s}
spec:
  selector: {app: web-kube-node-2}
  ports: [{port: 80, targetPort: 8080}]
`, ns)
	apply := exec.Command(filepath.Join(repo, "bin/kube"), "kubectl", "--kubeconfig", Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest.String())
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	defer kubectl(t, "delete", "namespace", ns, "--wait=false")

	if _, err := exec.Command(filepath.Join(repo, "bin/kube"), "kubectl", "--kubeconfig", Kubeconfig,
		"wait", "-n", ns, "--for=condition=Ready", "pod", "--all", "--timeout=120s").CombinedOutput(); err != nil {
		t.Fatalf("pods not Ready in 120 s: %v\n%s\n%s", err,
			kubectl(t, "get", "pods", "-n", ns, "-o", "wide"), kubectl(t, "get", "events", "-n", ns))
	}
	ip := map[string]string{}
	for _, node := range []string{"kube-node-1", "kube-node-2"} {
		ip[node] = kubectl(t, "get", "pod", "-n", ns, "web-"+node, "-o", "jsonpath={.status.podIP}")
		if on := kubectl(t, "get", "pod", "-n", ns, "web-"+node, "-o", "jsonpath={.spec.nodeName}"); on != node {
			t.Errorf("pod web-%s runs on %q", node, on)
		}
	}
	t.Logf("pod IPs: %v", ip)

	get := func(url string) error {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
	for node, addr := range ip {
		if err := get("http://" + addr + ":8080/login"); err != nil {
			t.Errorf("host to pod on %s: %v", node, err)
		}
	}

	// Pod on kube-node-1 to the pod on kube-node-2 and to the Service, with
	// ctrperf's own load generator (the image is the ctrperf binary).
	clusterIP := kubectl(t, "get", "service", "-n", ns, "web", "-o", "jsonpath={.spec.clusterIP}")
	for what, url := range map[string]string{
		"pod to pod across nodes": "http://" + ip["kube-node-2"] + ":8080/login",
		"pod to Service":          "http://" + clusterIP + "/login",
	} {
		if err := eventually(30*time.Second, func() error {
			out, err := exec.Command(filepath.Join(repo, "bin/kube"), "kubectl", "--kubeconfig", Kubeconfig,
				"exec", "-n", ns, "web-kube-node-1", "--",
				"/ctrperf", "load", "--concurrency", "1", "--ops", "3", "--warmup", "0s", url).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v\n%s", err, out)
			}
			return nil
		}); err != nil {
			t.Errorf("%s (%s): %v", what, url, err)
		}
	}
	// This machine to the Service: routed to kube-node-1, whose kube-proxy
	// sends it on to the pod on kube-node-2.
	if err := eventually(30*time.Second, func() error { return get("http://" + clusterIP + "/login") }); err != nil {
		t.Errorf("host to Service %s: %v", clusterIP, err)
	}
}

// eventually retries f every second until it succeeds or d has passed (a
// new Service's rules reach kube-proxy within a second or two).
func eventually(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// guaranteedPinned runs a Guaranteed pod (one whole CPU) on the node whose
// kubelet has cpuManagerPolicy: static (make kube-up
// KUBE_STATIC_CPU_NODE=...) and finds its container's cpuset holding the one
// CPU the CPU manager assigned it, not CPU 0 (reserved for the system).
func guaranteedPinned(t *testing.T, node string) {
	ns := fmt.Sprintf("ctrperf-kubetest-cpu-%d", os.Getpid())
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {app.kubernetes.io/managed-by: ctrperf}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: %[1]s}
spec:
  nodeName: %[2]s
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: idle
    image: ctrperf/ticketd:latest
    imagePullPolicy: Never
    command: [/ctrperf, __idle]
    resources:
      requests: {cpu: "1", memory: 64Mi}
      limits: {cpu: "1", memory: 64Mi}
`, ns, node)
	apply := exec.Command(filepath.Join(repo, "bin/kube"), "kubectl", "--kubeconfig", Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	defer kubectl(t, "delete", "namespace", ns, "--wait=false")
	if out, err := exec.Command(filepath.Join(repo, "bin/kube"), "kubectl", "--kubeconfig", Kubeconfig,
		"wait", "-n", ns, "--for=condition=Ready", "pod/pinned", "--timeout=60s").CombinedOutput(); err != nil {
		t.Fatalf("pod not Ready: %v\n%s\n%s", err, out, kubectl(t, "get", "events", "-n", ns))
	}
	if qos := kubectl(t, "get", "pod", "-n", ns, "pinned", "-o", "jsonpath={.status.qosClass}"); qos != "Guaranteed" {
		t.Fatalf("QoS class %q, want Guaranteed", qos)
	}
	uid := kubectl(t, "get", "pod", "-n", ns, "pinned", "-o", "jsonpath={.metadata.uid}")
	cpusets, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/cpuset/%s/%s/kubepods/pod%s/*/cpuset.cpus", CgroupRoot, node, uid))
	if len(cpusets) == 0 {
		t.Fatalf("no cpuset cgroup of pod %s under /sys/fs/cgroup/cpuset/%s/%s/kubepods", uid, CgroupRoot, node)
	}
	var pinned bool
	for _, f := range cpusets {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cpus := strings.TrimSpace(string(b))
		t.Logf("%s: %s", f, cpus)
		if cpus != "" && cpus != "0" && !strings.ContainsAny(cpus, ",-") {
			pinned = true // the application container: one CPU, not the reserved one
		}
	}
	if !pinned {
		t.Errorf("no container of the Guaranteed pod has one exclusive CPU (other than 0)")
	}
}

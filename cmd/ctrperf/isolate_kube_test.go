//go:build !nokube

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ctrperf/internal/engine/kube"
	"ctrperf/internal/isolate/manifest"
	"ctrperf/internal/labels"
)

// The lab cluster's nodes share this machine: their cgroups are under
// /ctrperf-kube/<node> in every hierarchy.
const labCgroups = "/sys/fs/cgroup/%s/ctrperf-kube"

// testLabel marks the pods of one test's controller.
const testLabel = "ctrperf.test"

func requireLabCluster(t *testing.T) kubernetes.Interface {
	t.Helper()
	miss := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CTRPERF_REQUIRE_KUBE") == "1" {
			t.Fatalf(format, a...)
		}
		t.Skipf(format, a...)
	}
	if os.Geteuid() != 0 {
		miss("needs root")
	}
	rc, _, server, err := kube.ClientConfig(kube.LabKubeconfig, "")
	if err != nil {
		miss("no lab cluster (make kube-up): %v", err)
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		miss("cluster %s: %v", server, err)
	}
	if _, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		miss("cluster %s does not answer: %v", server, err)
	}
	return cs
}

// cgroupOf finds a container's directory of controller ctl on the lab
// cluster (kubelet's cgroupfs driver: .../kubepods/<qos>/pod<uid>/<id>).
func cgroupOf(t *testing.T, ctl, id string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(fmt.Sprintf(labCgroups, ctl), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == id {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no %s cgroup of container %s", ctl, id)
	}
	return found
}

func readCg(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// waitFor polls cond every 200 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitOr(t, d, what, cond, nil)
}

// waitOr is waitFor that runs onFail (diagnostics) before failing.
func waitOr(t *testing.T, d time.Duration, what string, cond func() (bool, string), onFail func()) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(200 * time.Millisecond)
	}
	if onFail != nil {
		onFail()
	}
	t.Fatalf("%s: not within %s (%s)", what, d, last)
}

// testPod is a Burstable pod on node that opted in: hot spins a shell
// loop (the Debian base image) with 100m requested, entitled to 2 CPUs ×
// 100m / 600m = 0.33; quiet is ctrperf's pause with 500m.
func testPod(ns, name, node, test string, hot bool) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "ctrperf/pause:latest", ImagePullPolicy: corev1.PullNever,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}
	if hot {
		c.Image, c.Command = "ctrperf/debian-base:latest", []string{"/bin/sh", "-c", "while [ ! -e /tmp/cool ]; do :; done; exec sleep infinity"}
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
	}
	zero := int64(0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{labels.Isolate: "true", testLabel: test}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken: new(bool)}}
}

// TestIsolateDaemonSetKube deploys the controller as `isolate manifest`
// prints it on the lab cluster (both nodes: kube-node-2's kubelet runs the
// static CPU manager), with a hot and a quiet opted-in pod on each node,
// and checks: the hot pods are demoted (cpu.idle 1) and the quiet ones not;
// kube-node-2's controller writes no cpuset; `isolate status --kubeconfig`
// reads both nodes; a SIGKILLed controller's successor restores from its
// checkpoint; after the DaemonSet is deleted every value is back.
func TestIsolateDaemonSetKube(t *testing.T) {
	cs := requireLabCluster(t)
	ctx := context.Background()
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	o := manifest.Defaults()
	o.Namespace = "ctrperf-isotest-" + suffix
	o.CRISocket = "/run/ctrperf/kube/$(NODE_NAME)/containerd.sock"
	o.KubeletDir = "/var/lib/ctrperf/kube/nodes/$(NODE_NAME)/kubelet"
	o.StateDir = "/run/ctrperf/isolate-test-" + suffix + "/$(NODE_NAME)"
	// Only this test's pods: a bench run's opted-in pods may share the cluster.
	o.Args = []string{"--label", testLabel + "=" + suffix}
	nsObj, sa, ds, err := manifest.Objects(o)
	if err != nil {
		t.Fatal(err)
	}
	work := "ctrperf-isowork-" + suffix
	t.Cleanup(func() {
		for _, ns := range []string{o.Namespace, work} {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
		// The controllers restore on SIGTERM: their state stays until they are gone.
		for range 150 {
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), o.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = os.RemoveAll("/run/ctrperf/isolate-test-" + suffix)
	})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: work}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSA := func(ns string) {
		waitFor(t, 30*time.Second, "default ServiceAccount of "+ns, func() (bool, string) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	waitSA(work)
	type tenant struct {
		name, node string
		hot        bool
		id         string
	}
	tenants := []*tenant{{"hot-1", "kube-node-1", true, ""}, {"quiet-1", "kube-node-1", false, ""},
		{"hot-2", "kube-node-2", true, ""}, {"quiet-2", "kube-node-2", false, ""}}
	for _, tn := range tenants {
		if _, err := cs.CoreV1().Pods(work).Create(ctx, testPod(work, tn.name, tn.node, suffix, tn.hot), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range tenants {
		waitFor(t, 60*time.Second, tn.name+" running", func() (bool, string) {
			p, err := cs.CoreV1().Pods(work).Get(ctx, tn.name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return false, fmt.Sprint(err)
			}
			tn.id = strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
			return true, ""
		})
	}
	type cgVals struct{ idle, shares, cpus string }
	read := func(id string) cgVals {
		// Each tenant is its pod's only container: a demotion sets the
		// pod's cgroup (demote_cgroup: pod, the default).
		cpu := filepath.Dir(cgroupOf(t, "cpu", id))
		return cgVals{readCg(t, cpu, "cpu.idle"), readCg(t, cpu, "cpu.shares"), readCg(t, cgroupOf(t, "cpuset", id), "cpuset.cpus")}
	}
	before := map[string]cgVals{}
	for _, tn := range tenants {
		before[tn.name] = read(tn.id)
	}

	if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSA(o.Namespace)
	if _, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*tenant{}
	for _, tn := range tenants {
		byName[tn.name] = tn
	}
	demoted := func() (bool, string) {
		var why []string
		for _, tn := range tenants {
			v := read(tn.id)
			if want := map[bool]string{true: "1", false: "0"}[tn.hot]; v.idle != want {
				why = append(why, fmt.Sprintf("%s cpu.idle %s", tn.name, v.idle))
			}
		}
		return len(why) == 0, strings.Join(why, ", ")
	}
	waitFor(t, 90*time.Second, "hot pods demoted on both nodes, quiet ones not", demoted)
	// The static CPU manager's node: no cpuset of the controller's.
	for _, n := range []string{"hot-2", "quiet-2"} {
		if got := read(byName[n].id).cpus; got != before[n].cpus {
			t.Errorf("%s on the static node: cpuset %s, was %s: the controller wrote kubelet's cpuset", n, got, before[n].cpus)
		}
	}

	// One view of the fleet.
	// status.json is written every second: wait until both show the demotion.
	var fleet []NodeStatus
	waitFor(t, 60*time.Second, "both nodes' status through the API server, each with its hot pod demoted", func() (bool, string) {
		fleet, err = readFleet(ctx, cs, o.Namespace)
		if err != nil || len(fleet) != 2 {
			return false, fmt.Sprint(len(fleet), err)
		}
		for _, n := range fleet {
			if n.Status == nil {
				return false, n.Node + ": " + n.Error
			}
			demoted := 0
			for _, c := range n.Status.Containers {
				if c.Demoted {
					demoted++
				}
			}
			if demoted == 0 {
				return false, n.Node + ": nothing demoted yet"
			}
		}
		return true, ""
	})
	for _, n := range fleet {
		if n.Status.DemoteOnly != (n.Node == "kube-node-2") {
			t.Errorf("node %s: demote only %v", n.Node, n.Status.DemoteOnly)
		}
		hot := 0
		for _, c := range n.Status.Containers {
			if c.Demoted {
				hot++
				if !strings.HasPrefix(c.Name, work+"/hot-") || math.Abs(c.Entitlement-2*0.1/0.6) > 0.01 {
					t.Errorf("node %s: %s demoted, entitled to %.2f", n.Node, c.Name, c.Entitlement)
				}
			}
		}
		if hot != 1 {
			t.Errorf("node %s: %d demoted, want its hot pod: %+v", n.Node, hot, n.Status.Containers)
			if b, err := cs.CoreV1().Pods(o.Namespace).GetLogs(n.Pod, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
				t.Logf("the controller's log on %s:\n%s", n.Node, b)
			}
		}
	}

	// SIGKILL the controller of kube-node-1: the next one restores from
	// its checkpoint, then demotes again.
	pid := controllerPID(t, "/run/ctrperf/isolate-test-"+suffix+"/kube-node-1")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "a new controller on kube-node-1 that restored the checkpoint", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=kube-node-1"})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		b, err := cs.CoreV1().Pods(o.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "restoring its originals first"), string(b)
	})
	waitOr(t, 60*time.Second, "hot pods demoted again", demoted, func() {
		pods, _ := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=kube-node-1"})
		for _, p := range pods.Items {
			b, _ := cs.CoreV1().Pods(o.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Logf("the controller's log on kube-node-1 (pod %s, %+v):\n%s", p.Name, p.Status.ContainerStatuses, b)
		}
	})

	// hot-1 cools (its loop ends): it is undemoted, its class its own again.
	cool := exec.Command("../../bin/kube", "kubectl", "--kubeconfig", kube.LabKubeconfig, "-n", work, "exec", "hot-1", "--", "touch", "/tmp/cool")
	if out, err := cool.CombinedOutput(); err != nil {
		t.Fatalf("kubectl exec: %v: %s", err, out)
	}
	waitFor(t, 30*time.Second, "hot-1 undemoted once it cooled", func() (bool, string) {
		v := read(byName["hot-1"].id)
		return v == before["hot-1"], fmt.Sprintf("%+v, was %+v", v, before["hot-1"])
	})
	byName["hot-1"].hot = false // from here on it is a quiet one

	// Delete the DaemonSet: every value is back.
	fg := metav1.DeletePropagationForeground
	if err := cs.AppsV1().DaemonSets(o.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the controller's pods gone", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
	})
	for _, tn := range tenants {
		if got := read(tn.id); got != before[tn.name] {
			t.Errorf("%s after the DaemonSet was deleted: %+v, was %+v", tn.name, got, before[tn.name])
		}
	}
}

// controllerPID is the PID of the controller that holds stateDir (its
// owner record), read from the node through the hostPath.
func controllerPID(t *testing.T, stateDir string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "the controller's status in "+stateDir, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(stateDir, "status.json"))
		if err != nil {
			return false, err.Error()
		}
		var s struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.PID <= 1 {
			return false, fmt.Sprint(err)
		}
		pid = s.PID
		return true, ""
	})
	return pid
}

package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runningPod(uid, cid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", ContainerID: "containerd://" + cid}}}}
}

// TestPodCPUSet reads a pod's container cpuset where the node's cgroups
// are this machine's (a cgroup v1 fixture as the lab's: cgroupfs under the
// kubelet's cgroupRoot), for each QoS class's path and systemd's, and says
// why not elsewhere.
func TestPodCPUSet(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "cpuset"), 0o755)
	os.MkdirAll(filepath.Join(root, "cpu"), 0o755)
	fs := kernel.NewFS(kernel.Roots{Cgroup: root})
	lab := KubeletConfig{CPUManagerPolicy: "static", CgroupRoot: "/ctrperf-kube/kube-node-2", CgroupDriver: "cgroupfs"}
	writeFile(t, filepath.Join(root, "cpuset/ctrperf-kube/kube-node-2/kubepods/pod11-aa/c0ffee/cpuset.cpus"), "1\n")
	writeFile(t, filepath.Join(root, "cpuset/ctrperf-kube/kube-node-2/kubepods/burstable/pod22-bb/beef/cpuset.cpus"), "0-1\n")
	writeFile(t, filepath.Join(root, "cpuset/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod33_cc.slice/cri-containerd-fade.scope/cpuset.cpus"), "0\n")

	for _, tc := range []struct {
		name     string
		kc       KubeletConfig
		known    bool
		uid, cid string
		cpus     string
		note     string
	}{
		{"guaranteed, pinned", lab, true, "11-aa", "c0ffee", "1", ""},
		{"burstable, shared", lab, true, "22-bb", "beef", "0-1", ""},
		{"systemd driver", KubeletConfig{CgroupDriver: "systemd", CgroupRoot: "/"}, true, "33-cc", "fade", "0", ""},
		{"another machine's node", lab, true, "44-dd", "dead", "", "the node's cgroups are not on this machine (no cpuset cgroup of pod 44-dd"},
		{"kubelet unread", KubeletConfig{}, false, "11-aa", "c0ffee", "", "cgroupRoot was unread"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpus, note := podCPUSet(fs, tc.kc, tc.known, runningPod(tc.uid, tc.cid))
			if cpus != tc.cpus || (tc.note == "" && note != "") || !strings.Contains(note, tc.note) {
				t.Errorf("cpus %q note %q, want %q and a note with %q", cpus, note, tc.cpus, tc.note)
			}
		})
	}
}

// TestGuaranteedPlacement: qos guaranteed goes to the nodes whose kubelet
// runs the static CPU manager, refuses a named node that does not, and is
// not_run where none does; each node's policy is in the engine's Info.
func TestGuaranteedPlacement(t *testing.T) {
	policies := map[string]string{"node-1": "none", "node-2": "static"}
	read := func(_ context.Context, n string) (KubeletConfig, error) {
		p, ok := policies[n]
		if !ok {
			return KubeletConfig{}, errors.New("forbidden")
		}
		return KubeletConfig{CPUManagerPolicy: p, CgroupRoot: "/ctrperf-kube/" + n, CgroupDriver: "cgroupfs"}, nil
	}
	open := func(f *fakeCluster, spec plan.KubeSpec) (*Kube, error) {
		return New(context.Background(), Options{Spec: spec, Session: "s-1", Client: f.cs, Owner: Owner{Host: "h", PID: 1},
			ProxyModeProbe: func(context.Context, string) (string, error) { return "iptables", nil }, ReadKubelet: read,
			Kernel: kernel.NewFS(kernel.Roots{Cgroup: t.TempDir()})})
	}
	f := newFake(t)
	f.podState = func(p *corev1.Pod) { p.Status.ContainerStatuses[0].ContainerID = "containerd://abc" }
	k, err := open(f, plan.KubeSpec{QoS: "guaranteed"})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := k.Info(context.Background())
	if got := in.Kube.Nodes[0].CPUManager + "," + in.Kube.Nodes[1].CPUManager; got != "none,static" {
		t.Errorf("nodes' CPU manager policies %q", got)
	}
	spec := engine.DeploySpec{RunID: "r1", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{kvService()}}
	spec.Services[0].Resources = engine.Resources{CPUs: 1, MemoryBytes: 64 << 20}
	tg, err := k.Deploy(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.cs.CoreV1().Pods(k.ns).Get(context.Background(), PodName("r1", "kv"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if v := terms[0].MatchFields[0].Values; len(v) != 1 || v[0] != "node-2" {
		t.Errorf("Guaranteed pod may go to %v, want the static node only", v)
	}
	di := k.DeploymentInfo(tg)
	if pod := di.Kube.Pods[0]; pod.QoS != "Guaranteed" || pod.CPUSet != "" || !strings.Contains(pod.CPUSetNote, "not on this machine") {
		t.Errorf("pod record %+v", pod)
	}
	if _, err := open(f, plan.KubeSpec{QoS: "guaranteed", Node: "node-1"}); err == nil || !strings.Contains(err.Error(), "node node-1 (kubernetes.node), whose kubelet runs cpuManagerPolicy none") {
		t.Errorf("named node without static policy: %v", err)
	}
	if _, err := open(f, plan.KubeSpec{QoS: "guaranteed", Node: "node-2"}); err != nil {
		t.Errorf("named static node: %v", err)
	}
	policies["node-2"] = "none"
	if _, err := open(f, plan.KubeSpec{QoS: "guaranteed"}); err == nil || !strings.Contains(err.Error(), "no node's kubelet runs the static CPU manager (node-1 none, node-2 none)") {
		t.Errorf("no static node: %v", err)
	}
	delete(policies, "node-1")
	delete(policies, "node-2")
	if _, err := open(f, plan.KubeSpec{QoS: "guaranteed"}); err != nil {
		t.Errorf("policies unreadable: placement left to the plan, got %v", err)
	}
}

// TestSettleCPUSets: after a deploy that pinned a Guaranteed pod, the
// run's other pods on that node are waited for until the CPU manager's
// reconcile loop has moved them off its CPU (recorded as they are then),
// or recorded with a note when it does not within the period.
func TestSettleCPUSets(t *testing.T) {
	for _, moves := range []bool{true, false} {
		t.Run(map[bool]string{true: "reconciled", false: "never reconciled"}[moves], func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "cpuset"), 0o755)
			kc := KubeletConfig{CPUManagerPolicy: "static", CgroupRoot: "/k/node-1", CgroupDriver: "cgroupfs", CPUManagerReconcilePeriod: "100ms"}
			f := newFake(t)
			f.podState = func(p *corev1.Pod) { p.Status.ContainerStatuses[0].ContainerID = "containerd://c-" + string(p.UID) }
			k, err := New(context.Background(), Options{Session: "s-1", Client: f.cs, Owner: Owner{Host: "h", PID: 1},
				ProxyModeProbe: func(context.Context, string) (string, error) { return "iptables", nil },
				ReadKubelet:    func(context.Context, string) (KubeletConfig, error) { return kc, nil },
				Kernel:         kernel.NewFS(kernel.Roots{Cgroup: root})})
			if err != nil {
				t.Fatal(err)
			}
			// Deployed last first: hot (uid-1, BestEffort) starts on the
			// whole pool; quiet (uid-2, Guaranteed) is pinned to CPU 1.
			hotFile := filepath.Join(root, "cpuset/k/node-1/kubepods/besteffort/poduid-1/c-uid-1/cpuset.cpus")
			writeFile(t, hotFile, "0-1\n")
			writeFile(t, filepath.Join(root, "cpuset/k/node-1/kubepods/poduid-2/c-uid-2/cpuset.cpus"), "1\n")
			if moves {
				time.AfterFunc(300*time.Millisecond, func() { os.WriteFile(hotFile, []byte("0\n"), 0o644) })
			}
			quiet := engine.Service{Name: "quiet", Image: "ctrperf/ticketd:latest", Resources: engine.Resources{CPUs: 1, MemoryBytes: 64 << 20}}
			hot := engine.Service{Name: "hot", Image: "ctrperf/ticketd:latest"}
			start := time.Now()
			tg, err := k.Deploy(context.Background(), engine.DeploySpec{RunID: "r1", Network: plan.NetworkPodIP, Data: plan.DataLayer, Services: []engine.Service{quiet, hot}})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			pods := k.DeploymentInfo(tg).Kube.Pods
			if len(pods) != 2 || pods[0].Service != "hot" || pods[1].CPUSet != "1" || pods[1].QoS != "Guaranteed" {
				t.Fatalf("pods %+v", pods)
			}
			if moves {
				if pods[0].CPUSet != "0" || pods[0].CPUSetNote != "" || took > 2*time.Second {
					t.Errorf("hot pod %+v after %s, want cpuset 0 once reconciled", pods[0], took)
				}
			} else if pods[0].CPUSet != "0-1" || !strings.Contains(pods[0].CPUSetNote, "still on CPUs 1, pinned to a Guaranteed pod of the node") {
				t.Errorf("hot pod %+v, want a note that it still shares CPU 1", pods[0])
			}
		})
	}
}

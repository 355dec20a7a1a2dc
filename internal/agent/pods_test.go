package agent_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/observe"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
)

// cgroupTree makes a fixture cgroup root with the given directories in
// every listed v1 hierarchy (or in the unified root when none is listed).
func cgroupTree(t *testing.T, hierarchies []string, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	if len(hierarchies) == 0 {
		if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory io\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		hierarchies = []string{""}
	}
	for _, h := range hierarchies {
		for _, d := range append([]string{"."}, dirs...) {
			if err := os.MkdirAll(filepath.Join(root, h, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestKubepodsRoot(t *testing.T) {
	v1 := kernel.Layout{Mode: kernel.Hybrid}
	v2 := kernel.Layout{Mode: kernel.V2}
	for _, c := range []struct {
		desc   string
		layout kernel.Layout
		self   string
		want   string
		err    error
	}{
		{"the lab: cgroupfs below a cgroupRoot per node", v1,
			"12:cpu,cpuacct:/ctrperf-kube/kube-node-2/kubepods/besteffort/podab-12/c0ffee\n0::/\n", "/ctrperf-kube/kube-node-2/kubepods", nil},
		{"cgroupfs at the root, Guaranteed", v1, "3:cpuacct:/kubepods/podab-12/c0ffee\n", "/kubepods", nil},
		{"systemd driver on v2", v2,
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_12.slice/cri-containerd-c0ffee.scope\n", "/kubepods.slice", nil},
		{"v2 reads the unified line even with v1 lines", v2, "3:cpuacct:/\n0::/kubepods/besteffort/pod1/c\n", "/kubepods", nil},
		{"an agent over SSH runs in no pod", v1, "3:cpuacct:/user.slice\n0::/user.slice\n", "", agent.ErrNotInPod},
		{"a name that only starts with kubepods is no kubepods", v1, "3:cpuacct:/kubepods-test/x\n", "", agent.ErrNotInPod},
	} {
		t.Run(c.desc, func(t *testing.T) {
			self, err := kernel.ParseProcCgroup(strings.NewReader(c.self))
			if err != nil {
				t.Fatal(err)
			}
			got, err := agent.KubepodsRoot(c.layout, self)
			if !errors.Is(err, c.err) || got != c.want {
				t.Errorf("KubepodsRoot = %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
}

func TestResolvePods(t *testing.T) {
	const uid = "0d1e-77"
	for _, c := range []struct {
		desc        string
		hierarchies []string
		kubepods    string
		dirs        []string
		want        string
	}{
		{"cgroupfs, besteffort (the lab)", []string{"cpuacct", "memory", "unified"}, "/ctrperf-kube/kube-node-2/kubepods",
			[]string{"ctrperf-kube/kube-node-2/kubepods/besteffort/pod" + uid}, "/ctrperf-kube/kube-node-2/kubepods/besteffort/pod" + uid},
		{"cgroupfs, Guaranteed", []string{"cpuacct"}, "/kubepods", []string{"kubepods/pod" + uid}, "/kubepods/pod" + uid},
		{"cgroupfs, burstable", []string{"cpuacct"}, "/kubepods", []string{"kubepods/burstable/pod" + uid}, "/kubepods/burstable/pod" + uid},
		{"systemd on v2, burstable", nil, "/kubepods.slice",
			[]string{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d1e_77.slice"},
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d1e_77.slice"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			fs := kernel.NewFS(kernel.Roots{Cgroup: cgroupTree(t, c.hierarchies, c.dirs...)})
			got, err := agent.ResolvePods(fs.Cgroups(), c.kubepods, []agent.PodCgroup{{Name: "app", UID: uid}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != (observe.Container{Name: "app", CgroupPath: c.want}) {
				t.Errorf("ResolvePods = %+v, want app at %s", got, c.want)
			}
		})
	}
}

// A pod of another node (the lab's nodes share one cgroup tree) is not
// found below this node's kubepods: an error naming where it looked.
func TestResolvePodsOfAnotherNode(t *testing.T) {
	root := cgroupTree(t, []string{"cpuacct"}, "ctrperf-kube/kube-node-1/kubepods/besteffort/podaa", "ctrperf-kube/kube-node-2/kubepods/besteffort/podbb")
	fs := kernel.NewFS(kernel.Roots{Cgroup: root})
	got, err := agent.ResolvePods(fs.Cgroups(), "/ctrperf-kube/kube-node-2/kubepods", []agent.PodCgroup{{Name: "db", UID: "aa"}, {Name: "app", UID: "bb"}})
	if err == nil || !strings.Contains(err.Error(), "pod db (uid aa) has no cgroup on this node") || !strings.Contains(err.Error(), "kube-node-2/kubepods/besteffort/podaa") {
		t.Errorf("err = %v", err)
	}
	if len(got) != 1 || got[0].Name != "app" {
		t.Errorf("resolved = %+v, want app only", got)
	}
}

// serveWith runs an agent with opt over pipes and says hello with co.
func serveWith(t *testing.T, opt agent.Options, co remote.ClientOptions) (*remote.Client, error) {
	t.Helper()
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	opt.Log = io.Discard
	go func() { _ = agent.Serve(context.Background(), ar, aw, opt); aw.Close() }()
	co.Name, co.Closer, co.Heartbeat = "pod", cw, -1
	c, err := remote.NewClient(context.Background(), cr, cw, co)
	if err != nil {
		cw.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, nil
}

// observe.start with pods: the agent finds them below the kubepods of its
// own cgroup (a fixture /proc/<pid>/cgroup) and samples them with the
// containers it was given.
func TestObservePodsOnTheAgentsNode(t *testing.T) {
	cg := cgroupTree(t, []string{"cpuacct", "memory"}, "n/kubepods/besteffort/podself", "n/kubepods/burstable/pod42")
	proc := t.TempDir()
	pidDir := filepath.Join(proc, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir, "cgroup"), []byte("4:memory:/n/kubepods/besteffort/podself/c1\n3:cpuacct:/n/kubepods/besteffort/podself/c1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []observe.Container
	opt := agent.Options{
		Kernel: kernel.NewFS(kernel.Roots{Proc: proc, Cgroup: cg}),
		Observer: func(cs []observe.Container, _ time.Duration, on func(results.Sample)) agent.Observer {
			got = cs
			return &fakeObserver{onSample: on}
		},
	}
	c, err := serveWith(t, opt, remote.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := remote.NewObserver(c, "run-1", &engine.Target{Containers: []engine.Container{{Service: "side", CgroupPath: "/docker/x"}}}).
		SamplePods([]agent.PodCgroup{{Name: "app", UID: "42"}})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []observe.Container{{Name: "side", CgroupPath: "/docker/x"}, {Name: "app", CgroupPath: "/n/kubepods/burstable/pod42"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("sampled %+v, want %+v", got, want)
	}
	o.Stop()

	// A pod that is not on this node fails the start, naming it.
	o = remote.NewObserver(c, "run-2", &engine.Target{}).SamplePods([]agent.PodCgroup{{Name: "db", UID: "43"}})
	if err := o.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "pod db (uid 43) has no cgroup on this node") {
		t.Errorf("start with a pod elsewhere: %v", err)
	}
}

// A caller that names its build is refused by an agent of another build,
// with the version code and both builds named; the same build is answered.
func TestHelloRefusesAnotherBuild(t *testing.T) {
	opt := agent.Options{Build: func() (string, error) { return "aaaaaaaaaaaaaaaaaaaa", nil }}
	_, err := serveWith(t, opt, remote.ClientOptions{Build: "bbbbbbbbbbbbbbbbbbbb"})
	if !errors.Is(err, &agent.Error{Code: agent.CodeVersion}) || !strings.Contains(err.Error(), "aaaaaaaaaaaa") || !strings.Contains(err.Error(), "bbbbbbbbbbbb") {
		t.Errorf("hello from another build: %v", err)
	}
	c, err := serveWith(t, opt, remote.ClientOptions{Build: "aaaaaaaaaaaaaaaaaaaa"})
	if err != nil || c.Hello.Build != "aaaaaaaaaaaaaaaaaaaa" {
		t.Errorf("hello from the same build: %v (%+v)", err, c)
	}
	// A caller that names no build is not checked (SSH hosts get a copy of
	// this very binary).
	if _, err := serveWith(t, opt, remote.ClientOptions{}); err != nil {
		t.Errorf("hello without a build: %v", err)
	}
}

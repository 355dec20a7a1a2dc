//go:build !nokube

package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"ctrperf/internal/kernel"
)

// fakeCRI is a node's CRI runtime: sandboxes with labels, containers with
// a verbose info (pid, OCI resources), call counts and an err field.
type fakeCRI struct {
	pods   []*runtimeapi.PodSandbox
	ctrs   []*runtimeapi.Container
	info   map[string]criInfo
	err    error
	calls  map[string]int
	events chan *runtimeapi.ContainerEventResponse
}

func (f *fakeCRI) count(m string) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[m]++
}

func (f *fakeCRI) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.count("ListPodSandbox")
	if f.err != nil {
		return nil, f.err
	}
	var out []*runtimeapi.PodSandbox
	for _, p := range f.pods {
		if filter.GetState() != nil && p.State != filter.GetState().State {
			continue
		}
		ok := true
		for k, v := range filter.GetLabelSelector() {
			ok = ok && p.Labels[k] == v
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeCRI) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.count("ListContainers")
	if f.err != nil {
		return nil, f.err
	}
	var out []*runtimeapi.Container
	for _, c := range f.ctrs {
		if filter.GetState() == nil || c.State == filter.GetState().State {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeCRI) ContainerStatus(_ context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.count("ContainerStatus")
	for _, c := range f.ctrs {
		if c.Id != id {
			continue
		}
		resp := &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: c.State}}
		if in, ok := f.info[id]; ok && verbose {
			b, _ := json.Marshal(in)
			resp.Info = map[string]string{"info": string(b)}
		}
		return resp, nil
	}
	return nil, status.Error(codes.NotFound, "no container "+id)
}

func (f *fakeCRI) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if f.events == nil {
		return status.Error(codes.Unimplemented, "no events")
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-f.events:
			ch <- e
		}
	}
}

func info(pid int, shares uint64, quota int64, period uint64) criInfo {
	var in criInfo
	in.PID = pid
	in.RuntimeSpec.Linux.Resources.CPU.Shares = shares
	in.RuntimeSpec.Linux.Resources.CPU.Quota = quota
	in.RuntimeSpec.Linux.Resources.CPU.Period = period
	return in
}

// criNode is a node with three pods: two opted in (one Burstable with a
// 500m request, one limit-only at 2 CPUs), one not; the fixture /proc has
// each init's cgroups as kubelet's cgroupfs driver names them.
func criNode(t *testing.T) (*fakeCRI, kernel.FS) {
	t.Helper()
	proc := t.TempDir()
	cg := map[int]string{
		101: "/kubepods/burstable/poda/ctr-quiet",
		102: "/kubepods/burstable/podb/ctr-hot",
		103: "/kubepods/besteffort/podc/ctr-other",
	}
	for pid, path := range cg {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("12:cpuset:%s\n5:cpu,cpuacct:%s\n0::%s\n", path, path, path)
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	in := map[string]string{LabelIsolate: "true"}
	f := &fakeCRI{
		pods: []*runtimeapi.PodSandbox{
			{Id: "sb-a", State: ready, Labels: in, Metadata: &runtimeapi.PodSandboxMetadata{Name: "quiet-0", Namespace: "shop"}},
			{Id: "sb-b", State: ready, Labels: in, Metadata: &runtimeapi.PodSandboxMetadata{Name: "hot-0", Namespace: "shop"}},
			{Id: "sb-c", State: ready, Labels: map[string]string{"app": "x"}, Metadata: &runtimeapi.PodSandboxMetadata{Name: "other", Namespace: "shop"}},
		},
		ctrs: []*runtimeapi.Container{
			{Id: "ctr-quiet", PodSandboxId: "sb-a", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "web"}},
			{Id: "ctr-hot", PodSandboxId: "sb-b", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "batch"}},
			{Id: "ctr-other", PodSandboxId: "sb-c", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "x"}},
		},
		info: map[string]criInfo{
			"ctr-quiet": info(101, 512, -1, 100000),
			"ctr-hot":   info(102, 2048, 200000, 100000),
			"ctr-other": info(103, 2, 0, 0),
		},
	}
	cgroot := t.TempDir() // v1: a mount per controller
	for _, ctl := range []string{"cpu", "cpuset", "cpuacct"} {
		if err := os.MkdirAll(filepath.Join(cgroot, ctl), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f, kernel.NewFS(kernel.Roots{Proc: proc, Cgroup: cgroot})
}

func TestCRIRuntimeMembership(t *testing.T) {
	f, kfs := criNode(t)
	r := &CRIRuntime{Client: f, Kernel: kfs}
	ms, err := r.Managed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Managed{}
	for _, m := range ms {
		got[m.ID] = m
	}
	if len(got) != 2 {
		t.Fatalf("managed %v, want the two labelled pods' containers", ms)
	}
	if m := got["ctr-quiet"]; m.Name != "shop/quiet-0/web" || m.PID != 101 || m.Request != 0.5 {
		t.Errorf("quiet container %+v, want shop/quiet-0/web, pid 101, request 0.5", m)
	}
	if m := got["ctr-hot"]; m.PID != 102 || m.Request != 2 {
		t.Errorf("hot container %+v, want pid 102, request 2", m)
	}
	// A tick between relists costs no call.
	before := fmt.Sprint(f.calls)
	if _, err := r.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(f.calls); after != before {
		t.Errorf("a tick called the runtime: %s -> %s", before, after)
	}
	// The cgroup comes from the init's /proc/PID/cgroup, checked to be its own.
	dir, err := r.Dir(context.Background(), "ctr-hot", "cpu")
	if err != nil || !strings.HasSuffix(dir, "/kubepods/burstable/podb/ctr-hot") {
		t.Errorf("cpu dir of ctr-hot %q, %v", dir, err)
	}
	// All takes every running pod.
	all := &CRIRuntime{Client: f, Kernel: kfs, All: true}
	if ms, err := all.Managed(context.Background()); err != nil || len(ms) != 3 {
		t.Errorf("--all managed %d containers (%v), want 3", len(ms), err)
	}
}

func TestCRIRuntimeChurnAndErrors(t *testing.T) {
	f, kfs := criNode(t)
	r := &CRIRuntime{Client: f, Kernel: kfs, Relist: 1} // relist at every call
	if _, err := r.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A failed list forgets nothing and is an error.
	f.err = errors.New("connection refused")
	if _, err := r.Managed(context.Background()); err == nil {
		t.Errorf("a failed list was no error")
	}
	f.err = nil
	// The hot pod is deleted: it leaves the set.
	f.ctrs = f.ctrs[:1]
	ms, err := r.Managed(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ID != "ctr-quiet" {
		t.Errorf("after the delete: %v, %v", ms, err)
	}
	// A gone container's Dir says gone, not a failure.
	if _, err := r.Dir(context.Background(), "ctr-hot", "cpu"); !gone(err) {
		t.Errorf("Dir of a deleted container: %v, want gone", err)
	}
	// A PID whose cgroup is not the container's (reused) is refused.
	f.ctrs = append(f.ctrs, &runtimeapi.Container{Id: "ctr-new", PodSandboxId: "sb-b", State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	f.info["ctr-new"] = info(103, 1024, 0, 0)
	ms, _ = r.Managed(context.Background())
	for _, m := range ms {
		if m.ID == "ctr-new" {
			t.Errorf("a container whose PID is in another's cgroup was managed: %+v", m)
		}
	}
	// A runtime without verbose info is named, not guessed.
	delete(f.info, "ctr-new")
	if _, _, _, err := r.inspect(context.Background(), "ctr-new"); err == nil || !strings.Contains(err.Error(), "no init PID") {
		t.Errorf("no verbose info: %v", err)
	}
}

func TestCRIRuntimeEventMarksDirty(t *testing.T) {
	f, kfs := criNode(t)
	f.events = make(chan *runtimeapi.ContainerEventResponse)
	r := &CRIRuntime{Client: f, Kernel: kfs}
	if _, err := r.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := r.Events(ctx)
	f.events <- &runtimeapi.ContainerEventResponse{ContainerId: "ctr-hot", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}
	<-ch
	n := f.calls["ListContainers"]
	if _, err := r.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.calls["ListContainers"] != n+1 {
		t.Errorf("an event did not bring a relist")
	}
}

func TestRequestedCPUs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		shares uint64
		quota  int64
		period uint64
		want   float64
	}{
		{"burstable 500m", 512, -1, 100000, 0.5},
		{"guaranteed 2", 2048, 200000, 100000, 2},
		{"besteffort", 2, 0, 0, 0},
		{"limit only on a runtime that got no shares", 0, 150000, 100000, 1.5},
		{"nothing", 0, 0, 0, 0},
	} {
		if got := RequestedCPUs(tt.shares, tt.quota, tt.period); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestEntitlementFromRequest(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Container
		want float64
	}{
		{"request: its weighted share", Container{Request: 0.5}, 2 * 0.5 / 1.0},
		{"label wins", Container{CPUs: 1, Request: 0.5}, 1},
		{"no request: fair share", Container{}, 2.0 / 4},
		{"request above the machine", Container{Request: 8}, 2},
	} {
		if got := Entitlement(tt.c, 2, 4, 1.0, 0); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Two Burstable pods with the same small request (kube-cpu.yaml's
	// 100m): the one at fifteen times its request turns hot, the one at
	// twice it does not (it is entitled to half the machine, as cpu.shares
	// gives it under contention).
	cs := []Container{{ID: "hot", Request: 0.1}, {ID: "quiet", Request: 0.1}}
	p := DefaultParams()
	var st State
	var d Decision
	for range p.HotAfter {
		d = Decide(flat(2), p, st, cs, map[string]float64{"hot": 1.5, "quiet": 0.19}, map[string]float64{"quiet": 0.1})
		st = d.State
	}
	if !st["hot"].Hot || st["quiet"].Hot {
		t.Errorf("hot %v quiet %v: want the pod above its request hot", st["hot"].Hot, st["quiet"].Hot)
	}
}

func TestDemoteOnlyWritesNoCPUSet(t *testing.T) {
	for _, pol := range Policies {
		p := DefaultParams()
		p.Policy, p.DemoteOnly, p.Demote = pol, true, true
		cs := []Container{{ID: "a"}, {ID: "b"}}
		var st State
		var d Decision
		for range 3 {
			d = Decide(flat(4), p, st, cs, map[string]float64{"a": 2, "b": 0.1}, nil)
			st = d.State
		}
		for id, pl := range d.Placements {
			if !pl.CPUs.IsEmpty() || pl.Pinned {
				t.Errorf("%s: %s placed on %s with demote_only", pol, id, pl.CPUs)
			}
		}
		if !d.Placements["a"].Demote {
			t.Errorf("%s: the hot container was not demoted", pol)
		}
	}
	p := DefaultParams()
	p.Policy, p.DemoteOnly = PolicyPaper, true
	if err := p.Validate(); err == nil {
		t.Errorf("demote_only with a policy that does not demote was accepted")
	}
}

func TestKubeletCPUManagerPolicy(t *testing.T) {
	dir := t.TempDir()
	if p, err := KubeletCPUManagerPolicy(dir); err != nil || p != "none" {
		t.Errorf("no state file: %q, %v", p, err)
	}
	os.WriteFile(filepath.Join(dir, "cpu_manager_state"), []byte(`{"policyName":"static","defaultCpuSet":"0","checksum":1}`), 0o644)
	if p, err := KubeletCPUManagerPolicy(dir); err != nil || p != "static" {
		t.Errorf("static: %q, %v", p, err)
	}
	os.WriteFile(filepath.Join(dir, "cpu_manager_state"), []byte(`{`), 0o644)
	if _, err := KubeletCPUManagerPolicy(dir); err == nil {
		t.Errorf("a broken state file was no error")
	}
}

func TestCRIRuntimeLabels(t *testing.T) {
	f, kfs := criNode(t)
	f.pods[0].Labels = map[string]string{LabelIsolate: "true", "ctrperf.run": "r1"}
	f.pods[1].Labels = map[string]string{LabelIsolate: "false", "ctrperf.run": "r1"}
	for _, tt := range []struct {
		labels []string
		all    bool
		want   int
	}{
		{[]string{"ctrperf.run=r1"}, false, 1},
		{[]string{"ctrperf.run"}, false, 1},
		{[]string{"ctrperf.run=r2"}, false, 0},
		{nil, true, 2}, // --all, but ctrperf.isolate=false still opts out
	} {
		r := &CRIRuntime{Client: f, Kernel: kfs, Labels: tt.labels, All: tt.all}
		if ms, err := r.Managed(context.Background()); err != nil || len(ms) != tt.want {
			t.Errorf("labels %v all %v: %d managed (%v), want %d", tt.labels, tt.all, len(ms), err, tt.want)
		}
	}
}

// The controller's open usage and pressure files: a pread from the start
// sees the value change, a removed file is dropped and read again when it
// reappears (a container restarted under its id), a gone container's
// files are closed.
func TestStatFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpuacct.usage")
	write := func(s string) {
		if err := os.WriteFile(path+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	parse := kernel.ParseCPUUsage
	// Every read is counted: a sample is one pread per file.
	preads := 0
	s := StatFiles{pread: func(fd int, p []byte, off int64) (int, error) { preads++; return unix.Pread(fd, p, off) }}
	write("100\n")
	if v, err := s.read("c1", dir, "cpuacct.usage", parse); err != nil || v != 100 {
		t.Fatalf("first read %v, %v", v, err)
	}
	if preads != 1 {
		t.Errorf("a sample took %d preads of the file, want 1", preads)
	}
	// The same file rewritten in place: a pread from 0 sees the new value.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("250\n")
	f.Close()
	if v, err := s.read("c1", dir, "cpuacct.usage", parse); err != nil || v != 250 {
		t.Errorf("after a change %v, %v", v, err)
	}
	// Replaced (a new cgroup at the same path): the old file still reads
	// the old content until it fails; a removed one is an error, then a
	// fresh open finds the new one.
	os.Remove(path)
	s.Forget("c1")
	if _, err := s.read("c1", dir, "cpuacct.usage", parse); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removed file: %v", err)
	}
	write("7\n")
	if v, err := s.read("c1", dir, "cpuacct.usage", parse); err != nil || v != 7 {
		t.Errorf("reappeared: %v, %v", v, err)
	}
	if len(s.files["c1"]) != 1 {
		t.Errorf("open files %v", s.files)
	}
	s.Forget("c1")
	if len(s.files) != 0 {
		t.Errorf("forget left %v", s.files)
	}
	if _, err := kernel.PressureSomeTotal([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=351528147\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n")); err != nil {
		t.Error(err)
	}
	if v, _ := kernel.PressureSomeTotal([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=351528147\n")); v != 351528147*time.Microsecond {
		t.Errorf("some total %v", v)
	}
	for _, bad := range []string{"", "full total=3\n", "some total=x\n", "some total=-1\n"} {
		if _, err := kernel.PressureSomeTotal([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCRIRuntimePodLevel(t *testing.T) {
	f, kfs := criNode(t)
	r := &CRIRuntime{Client: f, Kernel: kfs, PodLevel: true}
	if _, err := r.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	for ctl, suffix := range map[string]string{"cpu": "/kubepods/burstable/podb", "cpuacct": "/kubepods/burstable/podb/ctr-hot", "cpuset": "/kubepods/burstable/podb/ctr-hot"} {
		for range 2 { // resolved, then cached
			dir, err := r.Dir(context.Background(), "ctr-hot", ctl)
			if err != nil || !strings.HasSuffix(dir, suffix) {
				t.Errorf("%s dir %q, %v: want ...%s", ctl, dir, err, suffix)
			}
		}
	}
	// A pod that runs two containers: each demotes its own cgroup, never
	// the shared pod's (two restores of one file would take each other's
	// write for the original).
	f2, kfs2 := criNode(t)
	f2.ctrs = append(f2.ctrs, &runtimeapi.Container{Id: "ctr-side", PodSandboxId: "sb-b", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "side"}})
	f2.info["ctr-side"] = info(102, 2048, 200000, 100000)
	r2 := &CRIRuntime{Client: f2, Kernel: kfs2, PodLevel: true}
	if _, err := r2.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dir, err := r2.Dir(context.Background(), "ctr-hot", "cpu"); err != nil || !strings.HasSuffix(dir, "/podb/ctr-hot") {
		t.Errorf("a shared pod's container: cpu dir %q, %v: want its own ...podb/ctr-hot", dir, err)
	}
	if dir, err := r2.Dir(context.Background(), "ctr-quiet", "cpu"); err != nil || !strings.HasSuffix(dir, "/burstable/poda") {
		t.Errorf("a pod's only container: cpu dir %q, %v: want its pod ...poda", dir, err)
	}
	if _, err := podDir("/sys/fs/cgroup/cpu/docker/abc", "abc"); err == nil {
		t.Errorf("a Docker container's parent taken for a pod")
	}
}

// TestStartCRIRefusesWeight: on a Kubernetes node the weights are
// kubelet's, so a weight demotion is refused before anything starts.
func TestStartCRIRefusesWeight(t *testing.T) {
	_, err := StartCRI(context.Background(), nil, Options{Params: Params{Policy: PolicyShield, DemoteClass: DemoteWeight}})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Key != "demote_class" {
		t.Fatalf("StartCRI with demote_class weight: %v, want a demote_class error", err)
	}
}

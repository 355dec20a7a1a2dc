package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

type fakeRuntime struct {
	ms  []Managed
	err error
}

func (f *fakeRuntime) Managed(context.Context) ([]Managed, error) { return f.ms, f.err }

// fakeUsage advances each container's cumulative CPU by rate × step.
type fakeUsage struct {
	total map[string]time.Duration
	err   error
}

func (f *fakeUsage) CPUTime(_ context.Context, m Managed) (time.Duration, error) {
	return f.total[m.ID], f.err
}

type fakeCPUs struct {
	sets    map[string]string
	writes  int
	err     error
	readErr map[string]error
}

func (f *fakeCPUs) CPUs(_ context.Context, id string) (string, error) {
	if err := f.readErr[id]; err != nil {
		return "", err
	}
	s, ok := f.sets[id]
	if !ok {
		return "", fmt.Errorf("%s: %w", id, ErrContainerGone)
	}
	return s, nil
}

func (f *fakeCPUs) SetCPUs(_ context.Context, id string, c cpuset.CPUSet) error {
	if f.err != nil {
		return f.err
	}
	if _, ok := f.sets[id]; !ok {
		return fmt.Errorf("%s: %w", id, ErrContainerGone)
	}
	if c.IsEmpty() {
		return errors.New("empty cpuset written")
	}
	f.writes++
	f.sets[id] = c.String()
	return nil
}

// fakeClass models a v1 cpu cgroup: cpu.idle and cpu.shares, where leaving
// the idle class resets the shares to 1024 and an idle group refuses a
// weight, as the kernel does.
type fakeClass struct {
	cls    map[string]CPUClass
	writes int
}

func (f *fakeClass) Class(_ context.Context, id string) (CPUClass, error) {
	c, ok := f.cls[id]
	if !ok {
		return CPUClass{}, fmt.Errorf("%s: %w", id, ErrContainerGone)
	}
	return c, nil
}

func (f *fakeClass) SetClass(_ context.Context, id string, c CPUClass) error {
	cur, ok := f.cls[id]
	if !ok {
		return fmt.Errorf("%s: %w", id, ErrContainerGone)
	}
	f.writes++
	if c.Idle >= 0 && c.Idle != cur.Idle {
		cur.Idle = c.Idle
		if c.Idle == 1 {
			cur.Weight = 3
		} else {
			cur.Weight = 1024
		}
	}
	if c.Idle != 1 {
		if cur.Idle == 1 {
			return errors.New("EINVAL: an idle group has no weight")
		}
		cur.Weight = c.Weight
	}
	f.cls[id] = cur
	return nil
}

type fakeIRQ struct {
	aff     map[int]string
	refuse  map[int]bool
	history map[int][]string
}

func (f *fakeIRQ) Affinity(irq int) (cpuset.CPUSet, error) { return cpuset.Parse(f.aff[irq]) }
func (f *fakeIRQ) SetAffinity(irq int, c cpuset.CPUSet) (cpuset.CPUSet, error) {
	if f.refuse[irq] {
		return cpuset.New(0), fmt.Errorf("IRQ %d: %w", irq, ErrIRQNotMoved)
	}
	f.aff[irq] = c.String()
	f.history[irq] = append(f.history[irq], c.String())
	return c, nil
}

type fakeRPS struct{ masks map[string]map[string]string }

func (f *fakeRPS) Masks(dev string) (map[string]string, error) {
	m, ok := f.masks[dev]
	if !ok {
		return nil, fmt.Errorf("no dev %s: %w", dev, os.ErrNotExist)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}
func (f *fakeRPS) SetMask(dev, q, mask string) error {
	if _, ok := f.masks[dev]; !ok {
		return fmt.Errorf("no dev %s: %w", dev, os.ErrNotExist)
	}
	f.masks[dev][q] = mask
	return nil
}

type rig struct {
	c     *Controller
	now   time.Time
	rt    *fakeRuntime
	use   *fakeUsage
	cpus  *fakeCPUs
	class *fakeClass
	irq   *fakeIRQ
	rps   *fakeRPS
	log   *bytes.Buffer
	ckpt  string
	start map[string]string
	reg   *prometheus.Registry
}

func newRig(t *testing.T, policy Policy, dry bool) *rig {
	t.Helper()
	return newRigWith(t, Params{Policy: policy, HotAfter: 3}, dry)
}

// newRigWith is newRig with other parameters.
func newRigWith(t *testing.T, params Params, dry bool) *rig {
	t.Helper()
	r := &rig{now: time.Unix(1_700_000_000, 0), log: &bytes.Buffer{}, reg: prometheus.NewRegistry()}
	r.rt = &fakeRuntime{ms: []Managed{{ID: "a", Name: "tenant-a", PID: 101}, {ID: "b", Name: "tenant-b", PID: 102}, {ID: "c", Name: "tenant-c", PID: 103}}}
	r.use = &fakeUsage{total: map[string]time.Duration{}}
	r.cpus = &fakeCPUs{sets: map[string]string{"a": "0-3", "b": "0-3", "c": "0-3"}}
	shares := func(w int64) CPUClass { return CPUClass{Idle: 0, Weight: w, WeightFile: "cpu.shares"} }
	r.class = &fakeClass{cls: map[string]CPUClass{"a": shares(512), "b": shares(1024), "c": shares(1024)}}
	r.irq = &fakeIRQ{aff: map[int]string{38: "0-3", 39: "0-3", 41: "2"}, refuse: map[int]bool{41: true}, history: map[int][]string{}}
	r.rps = &fakeRPS{masks: map[string]map[string]string{"vetha": {"rx-0": "0"}, "vethb": {"rx-0": "0"}, "vethc": {"rx-0": "0"}}}
	r.ckpt = filepath.Join(t.TempDir(), "checkpoint.json")
	r.start = map[string]string{}
	for k, v := range r.cpus.sets {
		r.start[k] = v
	}
	irqs := []IRQ{{38, "virtio2-input.0"}, {39, "virtio2-output.0"}, {41, "virtio3-rx"}}
	veth := func(pid int) (string, error) {
		return map[int]string{101: "vetha", 102: "vethb", 103: "vethc"}[pid], nil
	}
	c, err := New(Config{Params: params, CheckpointPath: r.ckpt, DryRun: dry, NCPU: 4}, flat(4), r.rt, r.use, r.cpus,
		WithIRQ(r.irq, func() ([]IRQ, error) { return irqs, nil }), WithRPS(r.rps, veth), WithDemoter(r.class),
		WithClock(func() time.Time { return r.now }), WithDecisionLog(r.log), WithMetrics(NewMetrics(r.reg)))
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

// step advances the clock by 1 s with the given CPU use per container and runs a step.
func (r *rig) step(t *testing.T, use map[string]float64) {
	t.Helper()
	r.now = r.now.Add(time.Second)
	for id, u := range use {
		r.use.total[id] += time.Duration(u * float64(time.Second))
	}
	if err := r.c.Step(context.Background()); err != nil && !errors.Is(err, ErrIRQNotMoved) {
		t.Fatalf("step: %v", err)
	}
}

func TestControllerHotTenantAndRestore(t *testing.T) {
	for _, pol := range []Policy{PolicyPaper, PolicyStrict} {
		t.Run(string(pol), func(t *testing.T) {
			r := newRig(t, pol, false)
			quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
			r.step(t, quiet)
			if r.cpus.sets["a"] != "1" || r.cpus.sets["b"] != "2" || r.cpus.sets["c"] != "3" {
				t.Fatalf("dedicated sets %v", r.cpus.sets)
			}
			// a turns hot: saturates its CPU for three samples.
			hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
			for i := 0; i < 2; i++ {
				r.step(t, hot)
				if r.cpus.sets["a"] != "1" {
					t.Fatalf("a moved after %d saturated samples", i+1)
				}
			}
			r.step(t, hot)
			want := map[Policy]string{PolicyPaper: "0-3", PolicyStrict: "0-1"}[pol]
			if r.cpus.sets["a"] != want {
				t.Fatalf("hot a has %s, want %s", r.cpus.sets["a"], want)
			}
			if r.cpus.sets["b"] != "2" || r.cpus.sets["c"] != "3" {
				t.Fatalf("quiet tenants moved: %v", r.cpus.sets)
			}
			// IRQs went to the shared pool; 41 refused and skipped, not retried.
			if got := r.irq.aff[38]; got != "0" && got != "1" {
				t.Errorf("IRQ 38 on %s, want a pool CPU", got)
			}
			if !strings.Contains(r.log.String(), `"irq_skipped"`) {
				t.Errorf("refused IRQ not reported:\n%s", r.log.String())
			}
			// RPS masks point at the pool ({0,1} = 3 after a turned hot).
			if r.rps.masks["vethb"]["rx-0"] != "3" {
				t.Errorf("vethb rps %s, want 3", r.rps.masks["vethb"]["rx-0"])
			}
			// The checkpoint on disk holds the originals.
			cp, err := LoadCheckpoint(r.ckpt)
			if err != nil || cp == nil {
				t.Fatalf("checkpoint: %v %v", cp, err)
			}
			if cp.CPUSets["a"] != "0-3" || cp.IRQs["38"] != "0-3" || cp.RPS["vetha/rx-0"] != "0" {
				t.Errorf("checkpoint originals %+v", cp)
			}
			// Stop: everything back exactly, checkpoint gone.
			if err := r.c.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			for id, v := range r.start {
				if r.cpus.sets[id] != v {
					t.Errorf("%s restored to %s, want %s", id, r.cpus.sets[id], v)
				}
			}
			if r.irq.aff[38] != "0-3" || r.irq.aff[39] != "0-3" || r.irq.aff[41] != "2" {
				t.Errorf("IRQs not restored: %v", r.irq.aff)
			}
			for dev, m := range r.rps.masks {
				if m["rx-0"] != "0" {
					t.Errorf("%s rps not restored: %s", dev, m["rx-0"])
				}
			}
			if _, err := os.Stat(r.ckpt); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("checkpoint left after restore: %v", err)
			}
		})
	}
}

// reactions returns how many reactions the metrics observed and their sum.
func (r *rig) reactions(t *testing.T) (n uint64, sum float64) {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ctrperf_isolate_reaction_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no ctrperf_isolate_reaction_seconds")
	return 0, 0
}

func TestControllerReactionMetric(t *testing.T) {
	for _, tc := range []struct {
		policy Policy
		dry    bool
		want   uint64
	}{{PolicyPaper, false, 1}, {PolicyShield, false, 1}, {PolicyPaper, true, 0}} {
		t.Run(fmt.Sprintf("%s dry %v", tc.policy, tc.dry), func(t *testing.T) {
			r := newRig(t, tc.policy, tc.dry)
			quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
			r.step(t, quiet)
			r.step(t, quiet)
			// A saturated sample, then calm: the streak breaks off, no reaction.
			r.step(t, map[string]float64{"a": 1, "b": 0.2, "c": 0.2})
			r.step(t, quiet)
			if n, _ := r.reactions(t); n != 0 {
				t.Fatalf("%d reactions to a streak that broke off", n)
			}
			// Saturated from the interval that starts now: three samples
			// of 1 s (HotAfter 3), then the change: 3 s.
			hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
			for range 6 {
				r.step(t, hot)
			}
			n, sum := r.reactions(t)
			if n != tc.want || (n == 1 && sum != 3) {
				t.Errorf("%d reactions summing %v s, want %d of 3 s", n, sum, tc.want)
			}
		})
	}
}

func TestControllerIRQRotation(t *testing.T) {
	r := newRig(t, PolicyStrict, false)
	r.rt.ms = r.rt.ms[:1] // one tenant: pool is {0,2,3}
	for i := 0; i < 25; i++ {
		r.step(t, map[string]float64{"a": 0.1})
	}
	// 25 s at a 10 s period: initial placement plus two rotations.
	got := strings.Join(r.irq.history[38], " ")
	if got != "0 2 3" {
		t.Errorf("IRQ 38 rotation %q, want \"0 2 3\"", got)
	}
	if h := strings.Join(r.irq.history[39], " "); h != "2 3 0" {
		t.Errorf("IRQ 39 rotation %q, want spread over the pool \"2 3 0\"", h)
	}
}

func TestControllerDryRunWritesNothing(t *testing.T) {
	r := newRig(t, PolicyPaper, true)
	for i := 0; i < 5; i++ {
		r.step(t, map[string]float64{"a": 1, "b": 0.1, "c": 0.1})
	}
	if r.cpus.writes != 0 || len(r.irq.history) != 0 || r.rps.masks["vetha"]["rx-0"] != "0" {
		t.Errorf("dry run wrote: cpus %d, irq %v, rps %v", r.cpus.writes, r.irq.history, r.rps.masks)
	}
	if _, err := os.Stat(r.ckpt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote a checkpoint")
	}
	var sawHot bool
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("decision log line %q: %v", line, err)
		}
		if !e.DryRun {
			t.Errorf("event without dry_run: %s", line)
		}
		sawHot = sawHot || e.Kind == "hot"
	}
	if !sawHot {
		t.Errorf("dry run did not log the decision to mark a hot:\n%s", r.log.String())
	}
}

func TestControllerCrashReconcile(t *testing.T) {
	r := newRig(t, PolicyPaper, false)
	r.step(t, map[string]float64{"a": 0.1, "b": 0.1, "c": 0.1})
	// The process dies here: a new controller finds the checkpoint.
	cp, err := LoadCheckpoint(r.ckpt)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint after crash: %v %v", cp, err)
	}
	if err := RestoreCheckpoint(context.Background(), cp, Actuators{CPUs: r.cpus, Class: r.class, IRQ: r.irq, RPS: r.rps}, func(Event) {}); err != nil {
		t.Fatal(err)
	}
	for id, v := range r.start {
		if r.cpus.sets[id] != v {
			t.Errorf("%s reconciled to %s, want %s", id, r.cpus.sets[id], v)
		}
	}
	// A corrupt checkpoint is refused, not half-applied.
	b, _ := os.ReadFile(r.ckpt)
	if err := os.WriteFile(r.ckpt, bytes.Replace(b, []byte(`"0-3"`), []byte(`"0"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(r.ckpt); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("tampered checkpoint: %v, want ErrCorruptCheckpoint", err)
	}
}

func TestControllerChurnForgetsGoneContainers(t *testing.T) {
	r := newRig(t, PolicyStrict, false)
	r.step(t, map[string]float64{"a": 0.1, "b": 0.1, "c": 0.1})
	// b is removed.
	r.rt.ms = []Managed{r.rt.ms[0], r.rt.ms[2]}
	delete(r.cpus.sets, "b")
	r.step(t, map[string]float64{"a": 0.1, "c": 0.1})
	cp, _ := LoadCheckpoint(r.ckpt)
	if _, ok := cp.CPUSets["b"]; ok {
		t.Errorf("checkpoint keeps removed container b")
	}
	if s := r.c.Status(); len(s.Containers) != 2 {
		t.Errorf("status has %d containers, want 2", len(s.Containers))
	}
	// A write failure is reported, not fatal, and nothing empty is written.
	r.cpus.err = errors.New("EBUSY")
	r.rt.ms = append(r.rt.ms, Managed{ID: "d", Name: "tenant-d"})
	r.cpus.sets["d"] = "0-3"
	r.now = r.now.Add(time.Second)
	if err := r.c.Step(context.Background()); err == nil || !strings.Contains(err.Error(), "EBUSY") {
		t.Errorf("write failure not reported: %v", err)
	}
}

// A cgroup removed between the listing and the read: v1's kernfs answers
// ENODEV for a file opened in a cgroup being removed (TestChurnDocker met
// it in CI). That is churn, not a controller error.
func TestControllerCgroupRemovedMidReadIsChurn(t *testing.T) {
	r := newRig(t, PolicyStrict, false)
	r.step(t, map[string]float64{"a": 0.1, "b": 0.1, "c": 0.1})
	r.cpus.readErr = map[string]error{"b": fmt.Errorf("read cpuset.cpus in /sys/fs/cgroup/cpuset/docker/b: %w", syscall.ENODEV)}
	r.step(t, map[string]float64{"a": 0.1, "b": 0.1, "c": 0.1})
	if strings.Contains(r.log.String(), `"kind":"error"`) {
		t.Errorf("a removed cgroup was reported as an error:\n%s", r.log.String())
	}
	// ENODEV from an IRQ or a device is not a container's churn.
	if gone(fmt.Errorf("write smp_affinity_list: %w", syscall.EIO)) {
		t.Errorf("EIO taken for a gone container")
	}
}

func TestLockOneWriter(t *testing.T) {
	p := t.TempDir()
	f, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Lock(p); err == nil || !strings.Contains(err.Error(), "one writer") {
		t.Errorf("second lock: %v", err)
	}
}

func TestParseInterruptNames(t *testing.T) {
	f, err := os.Open("testdata/interrupts-virtio-2cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := kernel.ParseInterrupts(f)
	if err != nil {
		t.Fatal(err)
	}
	irqs := interruptNames(all)
	re := regexp.MustCompile(DefaultIRQPattern)
	var nic []string
	for _, irq := range irqs {
		if re.MatchString(irq.Name) {
			nic = append(nic, fmt.Sprintf("%d:%s", irq.Num, irq.Name))
		}
	}
	want := "34:virtio4-input 38:virtio2-input.0 39:virtio2-output.0 41:virtio3-rx 42:virtio3-tx"
	if strings.Join(nic, " ") != want {
		t.Errorf("NIC IRQs %q, want %q", strings.Join(nic, " "), want)
	}
}

func TestProcIRQAndSysRPSOnFixtureRoot(t *testing.T) {
	root := t.TempDir()
	w := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w(filepath.Join(root, "irq/38/smp_affinity_list"), "0-1\n")
	w(filepath.Join(root, "irq/38/effective_affinity_list"), "0\n")
	kfs := kernel.NewFS(kernel.Roots{Proc: root, Sys: root})
	p := ProcIRQ{Kernel: kfs}
	if got, err := p.Affinity(38); err != nil || got.String() != "0-1" {
		t.Fatalf("affinity %s %v", got, err)
	}
	// A fixture kernel that keeps the IRQ on CPU 0: writing 1 is detected as not moved.
	if _, err := p.SetAffinity(38, cpuset.New(1)); !errors.Is(err, ErrIRQNotMoved) {
		t.Errorf("unmoved IRQ: %v", err)
	}
	if _, err := p.SetAffinity(38, cpuset.New()); err == nil {
		t.Errorf("empty affinity accepted")
	}
	w(filepath.Join(root, "class/net/veth1/queues/rx-0/rps_cpus"), "0\n")
	w(filepath.Join(root, "class/net/veth1/queues/tx-0/xps_cpus"), "0\n")
	s := SysRPS{Kernel: kfs, NCPU: 2}
	if err := s.Set("veth1", cpuset.New(0)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Masks("veth1"); m["rx-0"] != "1" || len(m) != 1 {
		t.Errorf("masks %v", m)
	}
	// HostVeth: container's eth0 iflink 7 is host ifindex 7 = veth1.
	w(filepath.Join(root, "proc/55/root/sys/class/net/eth0/iflink"), "7\n")
	w(filepath.Join(root, "class/net/veth1/ifindex"), "7\n")
	w(filepath.Join(root, "class/net/eth0/ifindex"), "2\n")
	if dev, err := HostVeth(kernel.NewFS(kernel.Roots{Proc: filepath.Join(root, "proc"), Sys: root}), 55); err != nil || dev != "veth1" {
		t.Errorf("host veth %q %v", dev, err)
	}
	if _, err := HostVeth(kernel.NewFS(kernel.Roots{Proc: filepath.Join(root, "proc"), Sys: root}), 56); err == nil {
		t.Errorf("missing container accepted")
	}
}

func TestContainerCgroup(t *testing.T) {
	tests := []struct {
		desc, path, id string
		want           bool
	}{
		{"cgroupfs driver", "/docker/abc123", "abc123", true},
		{"systemd driver", "/system.slice/docker-abc123.scope", "abc123", true},
		{"root cgroup of a reused pid", "/", "abc123", false},
		{"another container", "/docker/def456", "abc123", false},
		{"empty", "", "abc123", false},
	}
	for _, tc := range tests {
		if got := ContainerCgroup(tc.path, tc.id); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// A veth that goes away with its container is gone, not an error: its
// queue's directory missing, or the device unregistered while its rps_cpus
// was being written (ENODEV, as kernel.WriteFile wraps it); any other
// failure is an error.
func TestRPSDeviceGone(t *testing.T) {
	s := rpsSetting(&fakeRPS{})
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{fmt.Errorf("no dev vetha: %w", os.ErrNotExist), true},
		{fmt.Errorf("failed to write %q to rps_cpus in /sys/class/net/vetha/queues/rx-0: %w", "3", syscall.ENODEV), true},
		{fmt.Errorf("failed to write %q to rps_cpus in /sys/class/net/vetha/queues/rx-0: %w", "3", syscall.EACCES), false},
		{errors.New("some other failure"), false},
	} {
		if got := s.gone(c.err); got != c.gone {
			t.Errorf("gone(%v) = %v, want %v", c.err, got, c.gone)
		}
	}
}

package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

// crashedRig is a shield controller that demoted a, pinned b and c, moved
// IRQs 38 and 39 and the veths' RPS masks, and then died: its checkpoint
// is read back from disk.
func crashedRig(t *testing.T) (*rig, *Checkpoint) {
	t.Helper()
	r := newRig(t, PolicyShield, false)
	r.step(t, map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2})
	for range 4 {
		r.step(t, map[string]float64{"a": 1, "b": 0.2, "c": 0.2})
	}
	if r.class.cls["a"].Idle != 1 || r.cpus.sets["b"] != "2" || r.irq.aff[38] == "0-3" || r.rps.masks["vetha"]["rx-0"] != "3" {
		t.Fatalf("controller did not change what the test needs: class %v, cpusets %v, IRQs %v, RPS %v", r.class.cls, r.cpus.sets, r.irq.aff, r.rps.masks)
	}
	cp, err := LoadCheckpoint(r.ckpt)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint after the crash: %v %v", cp, err)
	}
	return r, cp
}

// current is every value the test looks at, keyed like the events.
func (r *rig) current() map[string]string {
	out := map[string]string{}
	for id, cl := range r.class.cls {
		out["class "+id] = cl.String()
	}
	for id, s := range r.cpus.sets {
		out["cpuset "+id] = s
	}
	for n, s := range r.irq.aff {
		out["irq "+strconv.Itoa(n)] = s
	}
	for dev, m := range r.rps.masks {
		out["rps "+dev+"/rx-0"] = m["rx-0"]
	}
	return out
}

// eventKey names the value an event is about, like current's keys.
func eventKey(e Event) string {
	switch {
	case e.Device != "":
		return "rps " + e.Device
	case e.Container != "":
		if strings.Contains(e.New, "=") { // idle=0 cpu.shares=1024
			return "class " + e.Container
		}
		return "cpuset " + e.Container
	default:
		return "irq " + strconv.Itoa(e.IRQ)
	}
}

func TestRestoreLeavesChangedValuesAlone(t *testing.T) {
	shares := func(w int64) CPUClass { return CPUClass{Idle: 0, Weight: w, WeightFile: "cpu.shares"} }
	// What a full restore puts back: the rig's values before the controller.
	originals := map[string]string{
		"class a": shares(512).String(), "class b": shares(1024).String(), "class c": shares(1024).String(),
		"cpuset a": "0-3", "cpuset b": "0-3", "cpuset c": "0-3",
		"irq 38": "0-3", "irq 39": "0-3", "irq 41": "2",
		"rps vetha/rx-0": "0", "rps vethb/rx-0": "0", "rps vethc/rx-0": "0",
	}
	tests := []struct {
		desc string
		// change runs after the crash, before the restore.
		change func(r *rig)
		// oldFormat rewrites the checkpoint as version 2 (originals only).
		oldFormat bool
		// want: values that differ from the originals after the restore.
		want      map[string]string
		gone      []string // removed by change
		leftAlone []string
	}{
		{desc: "every value still the controller's: all put back", change: func(*rig) {}},
		{
			desc:   "docker update --cpu-shares of the demoted container (after leaving the idle class): left alone",
			change: func(r *rig) { r.class.cls["a"] = shares(768) },
			want:   map[string]string{"class a": shares(768).String()}, leftAlone: []string{"class a"},
		},
		{
			desc:   "docker update --cpuset-cpus of a pinned container: left alone, the other put back",
			change: func(r *rig) { r.cpus.sets["b"] = "0-1" },
			want:   map[string]string{"cpuset b": "0-1"}, leftAlone: []string{"cpuset b"},
		},
		{
			desc: "irqbalance moved an IRQ: left alone",
			change: func(r *rig) {
				r.irq.aff[38] = "3"
			},
			want: map[string]string{"irq 38": "3"}, leftAlone: []string{"irq 38"},
		},
		{
			desc:   "an operator changed an RPS mask: left alone",
			change: func(r *rig) { r.rps.masks["vethb"]["rx-0"] = "f" },
			want:   map[string]string{"rps vethb/rx-0": "f"}, leftAlone: []string{"rps vethb/rx-0"},
		},
		{
			desc:   "the written mask printed with its padding is still the controller's: put back",
			change: func(r *rig) { r.rps.masks["vetha"]["rx-0"] = "00000003" },
		},
		{
			desc:   "a value already back to its original: nothing to do",
			change: func(r *rig) { r.cpus.sets["c"] = "0,1,2,3" },
			want:   map[string]string{"cpuset c": "0,1,2,3"},
		},
		{
			desc: "a container gone since: skipped",
			change: func(r *rig) {
				delete(r.cpus.sets, "b")
				delete(r.class.cls, "a")
				delete(r.rps.masks, "vethb")
			},
			gone: []string{"class a", "cpuset b", "rps vethb/rx-0"},
		},
		{
			desc:      "a version 2 checkpoint does not say what was written: everything put back, as before",
			oldFormat: true,
			change: func(r *rig) {
				r.class.cls["a"] = shares(768)
				r.irq.aff[38] = "3"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r, cp := crashedRig(t)
			if tt.oldFormat {
				cp.Version, cp.Written = 2, Written{}
				if err := cp.Save(r.ckpt); err != nil {
					t.Fatal(err)
				}
				var err error
				if cp, err = LoadCheckpoint(r.ckpt); err != nil {
					t.Fatalf("version 2 checkpoint: %v", err)
				}
			}
			tt.change(r)
			var events []Event
			err := RestoreCheckpoint(context.Background(), cp, Actuators{CPUs: r.cpus, Class: r.class, IRQ: r.irq, RPS: r.rps}, func(e Event) { events = append(events, e) })
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			got := r.current()
			for k, orig := range originals {
				want, changed := tt.want[k]
				if !changed {
					want = orig
				}
				if _, exists := got[k]; !exists {
					if !slices.Contains(tt.gone, k) {
						t.Errorf("%s is gone", k)
					}
					continue
				}
				if got[k] != want {
					t.Errorf("%s is %q after the restore, want %q", k, got[k], want)
				}
			}
			var left []string
			for _, e := range events {
				if e.Kind != "left_alone" {
					continue
				}
				left = append(left, eventKey(e))
				if !strings.HasPrefix(e.Reason, ReasonLeftAlone) {
					t.Errorf("left_alone event %+v: reason does not start with %q", e, ReasonLeftAlone)
				}
			}
			sort.Strings(left)
			if strings.Join(left, ",") != strings.Join(tt.leftAlone, ",") {
				t.Errorf("left alone %q, want %q (events %+v)", left, tt.leftAlone, events)
			}
		})
	}
}

// failingIRQ is an IRQ setter whose writes fail with err and change nothing.
type failingIRQ struct {
	aff map[int]string
	err error
}

func (f *failingIRQ) Affinity(irq int) (cpuset.CPUSet, error) { return cpuset.Parse(f.aff[irq]) }
func (f *failingIRQ) SetAffinity(irq int, _ cpuset.CPUSet) (cpuset.CPUSet, error) {
	return cpuset.New(), fmt.Errorf("write /proc/irq/%d/smp_affinity_list: %w", irq, f.err)
}

// TestIRQNotMovedKeepsItsCheckpoint: a write to smp_affinity_list that
// landed while the effective affinity stays (a kernel that moves it at the
// next interrupt, or never) changed the IRQ: its original stays in the
// checkpoint and a restore after a crash puts it back. A write that failed
// changed nothing and leaves no entry.
func TestIRQNotMovedKeepsItsCheckpoint(t *testing.T) {
	tests := []struct {
		desc string
		// irq builds the setter over a fixture proc root whose IRQ 38
		// has smp_affinity_list 0-3.
		irq      func(t *testing.T, proc string) IRQSetter
		wantKept bool
	}{
		{
			desc: "write landed, effective affinity still on CPU 1",
			irq: func(t *testing.T, proc string) IRQSetter {
				writeFile(t, filepath.Join(proc, "irq/38/effective_affinity_list"), "1\n")
				return ProcIRQ{Kernel: kernel.NewFS(kernel.Roots{Proc: proc})}
			},
			wantKept: true,
		},
		{
			desc:     "write refused (EIO, a managed IRQ)",
			irq:      func(*testing.T, string) IRQSetter { return &failingIRQ{aff: map[int]string{38: "0-3"}, err: unix.EIO} },
			wantKept: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			proc := t.TempDir()
			affPath := filepath.Join(proc, "irq/38/smp_affinity_list")
			writeFile(t, affPath, "0-3\n")
			setter := tt.irq(t, proc)
			ckpt := filepath.Join(t.TempDir(), "checkpoint.json")
			cpus := &fakeCPUs{sets: map[string]string{"a": "0-3"}}
			c, err := New(Config{Params: Params{Policy: PolicyPaper}, CheckpointPath: ckpt, NCPU: 4}, flat(4),
				&fakeRuntime{ms: []Managed{{ID: "a", Name: "tenant-a"}}}, &fakeUsage{total: map[string]time.Duration{}}, cpus,
				WithIRQ(setter, func() ([]IRQ, error) { return []IRQ{{38, "virtio2-input.0"}}, nil }))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Step(context.Background()); err != nil && !errors.Is(err, ErrIRQNotMoved) {
				t.Fatalf("step: %v", err)
			}
			if s := c.Status(); s.Skipped[38] == "" {
				t.Fatalf("IRQ 38 not skipped: %+v", s)
			}
			// The controller dies here.
			cp, err := LoadCheckpoint(ckpt)
			if err != nil || cp == nil {
				t.Fatalf("checkpoint: %v %v", cp, err)
			}
			orig, kept := cp.IRQs["38"]
			if kept != tt.wantKept || (kept && orig != "0-3") {
				t.Fatalf("checkpoint IRQs %v (written %v), want IRQ 38 kept %v with its original 0-3", cp.IRQs, cp.Written.IRQs, tt.wantKept)
			}
			if err := RestoreCheckpoint(context.Background(), cp, Actuators{CPUs: cpus, IRQ: setter}, func(Event) {}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if got, _ := os.ReadFile(affPath); strings.TrimSpace(string(got)) != "0-3" {
				t.Errorf("smp_affinity_list %q after the restore, want the original 0-3", got)
			}
		})
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSteeringLockOneWriter: IRQ affinity and RPS masks are the machine's,
// so two controllers with different state directories, or a restore beside
// a live one, cannot both write them.
func TestSteeringLockOneWriter(t *testing.T) {
	steering := t.TempDir()
	first, err := LockSteering(steering, kernel.FS{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		try  func() error
	}{
		{"a second controller's steering lock", func() error {
			o, err := LockSteering(steering, kernel.FS{})
			if err == nil {
				o.Close()
			}
			return err
		}},
		{"a restore of another state directory whose checkpoint holds an IRQ", func() error {
			state := t.TempDir()
			cp := NewCheckpoint(time.Now())
			cp.RememberIRQ(38, "0-3")
			cp.WriteIRQ(38, "0-3", "1")
			if err := cp.Save(filepath.Join(state, "checkpoint.json")); err != nil {
				t.Fatal(err)
			}
			_, err := RestoreStateDir(context.Background(), nil, state, kernel.NewFS(kernel.Roots{Sys: t.TempDir()}), func(Event) {}, WithSteeringDir(steering))
			if _, statErr := os.Stat(filepath.Join(state, "checkpoint.json")); statErr != nil {
				t.Errorf("checkpoint not kept after a refused restore: %v", statErr)
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := tt.try()
			if !errors.Is(err, ErrSteeringHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
				t.Errorf("got %v, want ErrSteeringHeld naming the holder (pid %d)", err, os.Getpid())
			}
		})
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := LockSteering(steering, kernel.FS{})
	if err != nil {
		t.Fatalf("lock after the holder released it: %v", err)
	}
	again.Close()
}

// TestDemoteClassWeight: with demote_class weight a hot container gets
// the lowest cpu.shares and stays in the normal class, and cooling down
// restores its own weight; with the default it gets cpu.idle=1.
func TestDemoteClassWeight(t *testing.T) {
	for _, tc := range []struct {
		class DemoteClass
		want  CPUClass
	}{
		// New takes auto (and the zero value) as idle; Start and StartCRI
		// resolve auto first. The fake reads an idle group's weight as the
		// kernel does.
		{"", CPUClass{Idle: 1, Weight: 3, WeightFile: "cpu.shares"}},
		{DemoteAuto, CPUClass{Idle: 1, Weight: 3, WeightFile: "cpu.shares"}},
		{DemoteIdle, CPUClass{Idle: 1, Weight: 3, WeightFile: "cpu.shares"}},
		{DemoteWeight, CPUClass{Idle: 0, Weight: 2, WeightFile: "cpu.shares"}},
	} {
		t.Run(string(tc.class), func(t *testing.T) {
			r := newRigWith(t, Params{Policy: PolicyShield, HotAfter: 3, DemoteClass: tc.class}, false)
			r.step(t, map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2})
			for range 4 {
				r.step(t, map[string]float64{"a": 1, "b": 0.2, "c": 0.2})
			}
			if got := r.class.cls["a"]; got != tc.want {
				t.Fatalf("hot a's class %v, want %v", got, tc.want)
			}
			for range 12 {
				r.step(t, map[string]float64{"a": 0.05, "b": 0.2, "c": 0.2})
			}
			if got, want := r.class.cls["a"], (CPUClass{Idle: 0, Weight: 512, WeightFile: "cpu.shares"}); got != want {
				t.Fatalf("cooled a's class %v, want its own %v", got, want)
			}
		})
	}
}

func TestCPUClassDemoted(t *testing.T) {
	v1 := func(idle int, w int64) CPUClass { return CPUClass{Idle: idle, Weight: w, WeightFile: "cpu.shares"} }
	v2 := func(idle int, w int64) CPUClass { return CPUClass{Idle: idle, Weight: w, WeightFile: "cpu.weight"} }
	for _, tc := range []struct {
		name        string
		c           CPUClass
		weight      bool
		want        CPUClass
		isDemoted   bool // c itself
		wantDemoted bool // c.Demoted(weight)
	}{
		{"v1 idle", v1(0, 1024), false, v1(1, 1024), false, true},
		{"v1 weight", v1(0, 1024), true, v1(0, 2), false, true},
		{"v2 weight", v2(0, 100), true, v2(0, 1), false, true},
		{"no cpu.idle", v1(-1, 1024), false, v1(-1, 2), false, true},
		{"no cpu.idle, weight", v2(-1, 100), true, v2(-1, 1), false, true},
		{"idle by its owner, weight asked", v1(1, 1024), true, v1(1, 2), true, true},
		{"lowest weight, idle asked", v1(0, 2), false, v1(1, 2), false, true},
		{"lowest weight, weight asked", v1(0, 2), true, v1(0, 2), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Demoted(tc.weight); got != tc.want {
				t.Errorf("Demoted(%v) = %v, want %v", tc.weight, got, tc.want)
			}
			if got := tc.c.IsDemoted(tc.weight); got != tc.isDemoted {
				t.Errorf("IsDemoted(%v) = %v, want %v", tc.weight, got, tc.isDemoted)
			}
			if got := tc.c.Demoted(tc.weight).IsDemoted(tc.weight); got != tc.wantDemoted {
				t.Errorf("Demoted(%v).IsDemoted = %v, want %v", tc.weight, got, tc.wantDemoted)
			}
		})
	}
}

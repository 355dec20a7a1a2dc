package isolate

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// flakyClass is fakeClass whose writes of one cpu.idle value fail.
type flakyClass struct {
	*fakeClass
	failIdle int
	err      error
}

func (f *flakyClass) SetClass(ctx context.Context, id string, c CPUClass) error {
	if c.Idle == f.failIdle {
		return f.err
	}
	return f.fakeClass.SetClass(ctx, id, c)
}

// flakyRPS is fakeRPS whose writes fail.
type flakyRPS struct {
	*fakeRPS
	err error
}

func (f *flakyRPS) SetMask(string, string, string) error { return f.err }

// swapActuators gives the rig's controller other actuators.
func (r *rig) swapActuators(f func(a *Actuators)) {
	f(&r.c.act)
	r.c.set = newSettings(r.c.act)
}

// writeFailures reads ctrperf_isolate_write_failures_total by kind.
func (r *rig) writeFailures(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "ctrperf_isolate_write_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestWriteFailuresCountedAlike: every kind of checkpointed write that
// fails is counted in ctrperf_isolate_write_failures_total and logged, by
// the one write routine (an undemote that failed, or an IRQ write that
// failed with anything but a refusal, used to go uncounted).
func TestWriteFailuresCountedAlike(t *testing.T) {
	ebusy := unix.EBUSY
	quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
	hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
	hotThenCalm := append([]map[string]float64{quiet, hot, hot, hot}, repeat(quiet, 11)...)
	failClass := func(idle int) func(r *rig) {
		return func(r *rig) {
			r.swapActuators(func(a *Actuators) { a.Class = &flakyClass{fakeClass: r.class, failIdle: idle, err: ebusy} })
		}
	}
	tests := []struct {
		desc    string
		policy  Policy
		steps   []map[string]float64
		breakAt int // the step before which breakIt runs
		breakIt func(r *rig)
		kind    string // the metric's label
		event   string // the event kind logged
	}{
		{desc: "a cpuset write", policy: PolicyStrict, steps: []map[string]float64{quiet},
			breakIt: func(r *rig) { r.cpus.err = ebusy }, kind: "cpuset", event: "error"},
		{desc: "a demotion", policy: PolicyShield, steps: hotThenCalm[:4], breakIt: failClass(1), kind: "class", event: "error"},
		{desc: "an undemotion", policy: PolicyShield, steps: hotThenCalm, breakAt: 4, breakIt: failClass(0), kind: "class", event: "error"},
		{desc: "an IRQ write that fails with EBUSY", policy: PolicyStrict, steps: []map[string]float64{quiet},
			breakIt: func(r *rig) {
				r.swapActuators(func(a *Actuators) {
					a.IRQ = &failingIRQ{aff: map[int]string{38: "0-3", 39: "0-3", 41: "2"}, err: ebusy}
				})
			}, kind: "irq", event: "error"},
		{desc: "an IRQ the kernel keeps where it is", policy: PolicyStrict, steps: []map[string]float64{quiet},
			breakIt: func(*rig) {}, kind: "irq", event: "irq_skipped"},
		{desc: "an RPS write", policy: PolicyStrict, steps: []map[string]float64{quiet},
			breakIt: func(r *rig) { r.swapActuators(func(a *Actuators) { a.RPS = &flakyRPS{fakeRPS: r.rps, err: ebusy} }) },
			kind:    "rps", event: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := newRig(t, tt.policy, false)
			for i, use := range tt.steps {
				if i == tt.breakAt {
					tt.breakIt(r)
				}
				r.now = r.now.Add(time.Second)
				for id, u := range use {
					r.use.total[id] += time.Duration(u * float64(time.Second))
				}
				_ = r.c.Step(context.Background()) // the failures are reported, not fatal
			}
			if got := r.writeFailures(t)[tt.kind]; got < 1 {
				t.Errorf("write failures of kind %s: %v, want at least 1 (all: %v)\n%s", tt.kind, got, r.writeFailures(t), r.log.String())
			}
			if !strings.Contains(r.log.String(), fmt.Sprintf(`"kind":%q`, tt.event)) {
				t.Errorf("no %s event:\n%s", tt.event, r.log.String())
			}
		})
	}
}

// TestDryRunDecidesAsARealRun: a dry run logs the decisions a real run
// makes and applies, event for event (its writes are kept in memory, not
// made): no drift it caused itself at every step, a demoted container
// undemoted once, what a stop would restore.
func TestDryRunDecidesAsARealRun(t *testing.T) {
	idleWeight := regexp.MustCompile(`idle=1 cpu.shares=\d+`)
	quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
	hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
	steps := append(append([]map[string]float64{quiet, quiet}, repeat(hot, 4)...), repeat(quiet, 12)...)
	for _, policy := range Policies {
		t.Run(string(policy), func(t *testing.T) {
			logs := map[bool][]Event{}
			for _, dry := range []bool{false, true} {
				r := newRig(t, policy, dry)
				r.irq.refuse = nil // a dry run cannot know what the kernel refuses
				for _, use := range steps {
					r.step(t, use)
				}
				if err := r.c.Restore(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
					var e Event
					if err := json.Unmarshal([]byte(line), &e); err != nil {
						t.Fatal(err)
					}
					// An idle group's weight is the kernel's own (CPUClass.Same):
					// a dry run cannot know it.
					e.DryRun, e.Old, e.New = false, idleWeight.ReplaceAllString(e.Old, "idle=1"), idleWeight.ReplaceAllString(e.New, "idle=1")
					logs[dry] = append(logs[dry], e)
				}
			}
			real, dry := logs[false], logs[true]
			for i := range max(len(real), len(dry)) {
				var r, d Event
				if i < len(real) {
					r = real[i]
				}
				if i < len(dry) {
					d = dry[i]
				}
				if r != d {
					t.Errorf("event %d: real run %+v, dry run %+v", i, r, d)
				}
			}
		})
	}
}

// TestBackToItsOwnWithoutOriginal: a container whose cpuset already was
// its placement was never written, so it has no original; when its
// placement becomes its own again (shield: hot) there is nothing to put
// back. It used to fail every step writing an empty cpuset.
func TestBackToItsOwnWithoutOriginal(t *testing.T) {
	tests := []struct {
		desc, initial string
		wantWrites    int // writes to a's cpuset
	}{
		{desc: "its own cpuset is its placement: never written", initial: "1", wantWrites: 0},
		{desc: "placed, then back to its own", initial: "0-3", wantWrites: 2},
	}
	quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
	hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := newRig(t, PolicyShield, false)
			r.cpus.sets["a"] = tt.initial
			writes := 0
			for _, use := range append([]map[string]float64{quiet}, repeat(hot, 4)...) {
				before := r.cpus.sets["a"]
				r.step(t, use)
				if r.cpus.sets["a"] != before {
					writes++
				}
			}
			if got := r.cpus.sets["a"]; got != tt.initial || writes != tt.wantWrites {
				t.Errorf("a's cpuset %q after %d writes, want its own %q after %d", got, writes, tt.initial, tt.wantWrites)
			}
			if strings.Contains(r.log.String(), `"kind":"error"`) {
				t.Errorf("errors logged:\n%s", r.log.String())
			}
		})
	}
}

// TestMovedFromItsPlacementIsRestored: a container whose cpuset already
// was its placement (never written) and that is moved later (paper: hot,
// released to every CPU) has its own cpuset put back by a stop. Its
// original went unrecorded, and the stop left it on every CPU.
func TestMovedFromItsPlacementIsRestored(t *testing.T) {
	quiet := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.2}
	hot := map[string]float64{"a": 1, "b": 0.2, "c": 0.2}
	for _, policy := range []Policy{PolicyPaper, PolicyStrict} {
		t.Run(string(policy), func(t *testing.T) {
			r := newRig(t, policy, false)
			r.cpus.sets["a"] = "1" // its placement as a quiet container
			for _, use := range append([]map[string]float64{quiet}, repeat(hot, 4)...) {
				r.step(t, use)
			}
			if r.cpus.sets["a"] == "1" {
				t.Fatalf("hot a was not moved: %v", r.cpus.sets)
			}
			if err := r.c.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := r.cpus.sets["a"]; got != "1" {
				t.Errorf("a's cpuset %q after the stop, want its own \"1\"", got)
			}
		})
	}
}

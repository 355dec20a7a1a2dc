package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/vm"
	"ctrperf/internal/workload"
)

// hostAndGuest is a plan of two repetitions of a configuration "bare" on
// the host and one "guest" on runtime rt.
func hostAndGuest(rt string) string {
	return `name: unit
workload: benchfake
repetitions: 2
warmup: 0s
duration: 1ms
baseline: bare
configurations:
  - name: bare
    runtime: host
  - name: guest
    runtime: ` + rt + "\n"
}

// vmProvider is Engines for runtime vm and the fake for the rest.
type vmProvider struct {
	*fakeProvider
	real *Engines
}

func (p vmProvider) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	if rt == engine.RuntimeVM {
		return p.real.Engine(ctx, rt, spec)
	}
	return p.fakeProvider.Engine(ctx, rt, spec)
}

// TestRuntimeVMNotRun: where no stock guest boots under KVM, every run of
// a vm configuration with accel kvm (the default) is not_run with
// doctor's reason for the machine, asked once, never a number, and no
// guest is booted; the other configurations run.
func TestRuntimeVMNotRun(t *testing.T) {
	p := parsePlan(t, hostAndGuest("vm"), plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	asked := 0
	const why = "KVM here is PVM (module kvm_pvm, /dev/kvm API 12: ...), which runs only guest kernels built for PVM"
	booted := 0
	prov := vmProvider{fakeProvider: &fakeProvider{}, real: &Engines{RunID: "vmtest", VM: func(context.Context) string { asked++; return why },
		VMMachine: func(string) (*vm.Machine, error) { booted++; return nil, errors.New("no guest") }}}
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 2 || sum.NotRun != 2 || sum.Failed != 0 {
		t.Fatalf("summary ok=%d not_run=%d failed=%d, want 2 2 0", sum.OK, sum.NotRun, sum.Failed)
	}
	for _, rec := range readRecords(t, out) {
		if rec.Config != "guest" {
			continue
		}
		if rec.Status != results.StatusNotRun || rec.Result != nil || rec.Emulated || !strings.Contains(rec.Error, "vm with accel kvm: "+why) {
			t.Errorf("guest run %d: status %s result %v error %q; want not_run with doctor's reason", rec.Index, rec.Status, rec.Result, rec.Error)
		}
	}
	if asked != 1 || booted != 0 {
		t.Errorf("doctor's reason asked %d times, want once (remembered); %d guests booted, want none", asked, booted)
	}
	// accel tcg is not refused by KVM's reason: the machine is asked for
	// (and here has no guest to give).
	_, _, err = (&Engines{VM: func(context.Context) string { return why }, VMMachine: func(string) (*vm.Machine, error) { booted++; return nil, errors.New("no QEMU") }}).
		Engine(context.Background(), engine.RuntimeVM, engine.EngineSpec{VM: plan.VMSpec{Accel: "tcg"}})
	if err == nil || booted != 1 || !strings.Contains(err.Error(), "vm with accel tcg: no QEMU") || !errors.As(err, new(runtimeUnavailable)) {
		t.Errorf("Engines with accel tcg and no machine: %v (machine asked %d times)", err, booted)
	}
}

// TestUnavailableRuntimeNotRun: a runtime the provider says cannot run here
// at all (runtimeUnavailable) is not_run with its words alone, whichever
// runtime it is: the runner asks the error, not the runtime's name.
func TestUnavailableRuntimeNotRun(t *testing.T) {
	tests := []struct {
		desc string
		err  error
		want string
	}{
		{"unavailable: its words alone", runtimeUnavailable("no such runtime on this machine: see doctor"), "no such runtime on this machine: see doctor"},
		{"any other failure: the engine named", errors.New("socket refused"), "engine docker (default) unavailable: socket refused"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := parsePlan(t, hostAndGuest("docker"), plan.Options{})
			out := filepath.Join(t.TempDir(), "out")
			prov := &fakeProvider{err: map[string]error{engine.EngineSpec{}.Key(): tc.err}}
			if _, err := Run(context.Background(), p, Options{Out: out, Engines: prov,
				Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }}); err != nil {
				t.Fatal(err)
			}
			for _, rec := range readRecords(t, out) {
				if rec.Config == "guest" && (rec.Status != results.StatusNotRun || rec.Error != tc.want) {
					t.Errorf("guest: %s %q, want not_run %q", rec.Status, rec.Error, tc.want)
				}
			}
		})
	}
}

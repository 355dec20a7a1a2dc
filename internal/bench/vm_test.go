package bench

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
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

// relayedEngine is the fake engine of a runtime whose relay is in the
// path (a guest on QEMU's user-mode network).
type relayedEngine struct {
	*fakeEngine
	np *results.NetPath
}

func (e relayedEngine) Path(*engine.Target) *results.NetPath { return e.np }

type relayedProvider struct {
	*fakeProvider
	np *results.NetPath
}

func (p relayedProvider) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	eng, info, err := p.fakeProvider.Engine(ctx, rt, spec)
	if rt != engine.RuntimeDocker || err != nil {
		return eng, info, err
	}
	return relayedEngine{fakeEngine: eng.(*fakeEngine), np: p.np}, info, nil
}

// TestRelayedPathRecorded: an engine that says a relay of its own is in
// the path (engine.RelayedPath) has every record of its runs say so, in
// the record's path and a note; an engine that says nil, and the others,
// leave the records without a path.
func TestRelayedPathRecorded(t *testing.T) {
	for _, tc := range []struct {
		desc string
		np   *results.NetPath
	}{
		{"a relay in the path", &results.NetPath{Kind: results.PathRelayed, Via: plan.RelayNote, SUTAddr: "10.0.2.15", LoadAddr: "127.0.0.1", Dialled: []string{"127.0.0.1:40000"}}},
		{"no relay", nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := parsePlan(t, hostAndGuest("docker"), plan.Options{})
			out := filepath.Join(t.TempDir(), "out")
			if _, err := Run(context.Background(), p, Options{Out: out, Engines: relayedProvider{fakeProvider: &fakeProvider{}, np: tc.np},
				Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }}); err != nil {
				t.Fatal(err)
			}
			for _, rec := range readRecords(t, out) {
				if rec.Result == nil {
					t.Fatalf("%s: no result (%s %s)", rec.Config, rec.Status, rec.Error)
				}
				relayed := rec.Config == "guest" && tc.np != nil
				noted := slices.ContainsFunc(rec.Result.Notes, func(n string) bool { return strings.HasPrefix(n, "path: "+plan.RelayNote) })
				if got := rec.Result.Path != nil && rec.Result.Path.Kind == results.PathRelayed; got != relayed || noted != relayed {
					t.Errorf("%s: path %+v, notes %q; want relayed %v", rec.Config, rec.Result.Path, rec.Result.Notes, relayed)
				}
			}
		})
	}
}

// guestEngine is the fake engine of a runtime whose services run on a
// machine of their own (a VM guest).
type guestEngine struct {
	*fakeEngine
	host results.HostInfo
}

func (e guestEngine) Host() results.HostInfo { return e.host }

type guestProvider struct {
	*fakeProvider
	host results.HostInfo
}

func (p guestProvider) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	eng, info, err := p.fakeProvider.Engine(ctx, rt, spec)
	if rt != engine.RuntimeDocker || err != nil {
		return eng, info, err
	}
	return guestEngine{fakeEngine: eng.(*fakeEngine), host: p.host}, info, nil
}

// TestGuestRecordedAsHost: OUT/env.json lists the machine of an engine
// that is one of its own (engine.GuestHost: a VM guest) among its hosts,
// with its kernel, vCPUs, memory and accelerator; a plan without one has
// no hosts.
func TestGuestRecordedAsHost(t *testing.T) {
	guest := results.HostInfo{Roles: []string{results.RoleSUT}, RunHost: results.RunHost{Name: "ctrperf-vm-s-0", Hostname: "ctrperf-guest"},
		Kernel: "6.1.0-56-amd64", CPUs: 1, MemTotal: 1 << 30,
		Engine: &engine.Info{Runtime: "vm", VM: &results.VMInfo{Accel: "tcg", Emulated: true, VCPUs: 1, MemoryBytes: 1 << 30}}}
	for _, tc := range []struct {
		desc string
		prov EngineProvider
		want []string
	}{
		{"a guest", guestProvider{fakeProvider: &fakeProvider{}, host: guest}, []string{"ctrperf-vm-s-0"}},
		{"no guest", &fakeProvider{}, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := parsePlan(t, hostAndGuest("docker"), plan.Options{})
			out := filepath.Join(t.TempDir(), "out")
			if _, err := Run(context.Background(), p, Options{Out: out, Engines: tc.prov,
				Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }}); err != nil {
				t.Fatal(err)
			}
			doc, err := readEnvDoc(filepath.Join(out, EnvFile))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, h := range doc.Hosts {
				names = append(names, h.Name)
				if h.Kernel != guest.Kernel || h.CPUs != 1 || h.MemTotal != 1<<30 || h.Engine == nil || h.Engine.VM == nil || h.Engine.VM.Accel != "tcg" {
					t.Errorf("host %+v (engine %+v): not the guest's facts", h, h.Engine)
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("env.json's hosts %v, want %v", names, tc.want)
			}
		})
	}
}

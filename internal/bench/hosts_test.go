package bench

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/observe"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/sshdest"
	"ctrperf/internal/workload"
)

// farHosts are agents served in this process, one per destination and
// session, behind a HostDialer: the SSH transport's stand-in.
type farHosts struct {
	mu       sync.Mutex
	dials    map[string]int
	cut      map[string]func() // ends the current session to a host
	deployed map[string][]string
	torn     map[string][]string
	docker   map[string]bool
	// drive runs on the load host's agent.
	drive func(ctx context.Context, env workload.Env) (*results.Measurement, error)
}

type farEngine struct {
	f    *farHosts
	host string
}

func (e *farEngine) Info(context.Context) (engine.Info, error) { return engine.Info{Name: "far"}, nil }
func (e *farEngine) Ping(context.Context) error                { return nil }
func (e *farEngine) Deploy(_ context.Context, s engine.DeploySpec) (*engine.Target, error) {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	e.f.deployed[e.host] = append(e.f.deployed[e.host], s.RunID)
	return &engine.Target{RunID: s.RunID, Network: s.Network}, nil
}
func (e *farEngine) Exec(context.Context, *engine.Target, string, []string) (engine.ExecResult, error) {
	return engine.ExecResult{}, nil
}
func (e *farEngine) Teardown(_ context.Context, t *engine.Target) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	if !slices.Contains(e.f.torn[e.host], t.RunID) {
		e.f.torn[e.host] = append(e.f.torn[e.host], t.RunID)
	}
	return nil
}
func (e *farEngine) Close(context.Context) error { return nil }

type farEngines struct{ e *farEngine }

func (p farEngines) Engine(_ context.Context, rt engine.Runtime, _ engine.EngineSpec) (engine.Engine, engine.Info, error) {
	return p.e, engine.Info{Runtime: string(rt), Name: "far"}, nil
}
func (farEngines) Close(context.Context) error { return nil }

type farWorkload struct{ f *farHosts }

func (farWorkload) Name() string                                       { return "benchfake" }
func (farWorkload) Decode(workload.Knobs) (any, any, error)            { return nil, nil, nil }
func (farWorkload) Services(workload.Config) ([]engine.Service, error) { return nil, nil }
func (w farWorkload) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	env.Started()
	return w.f.drive(ctx, env)
}

func (f *farHosts) dial(ctx context.Context, d plan.Dest, o remote.SSHOptions) (*remote.Host, error) {
	f.mu.Lock()
	f.dials[d.Raw]++
	f.mu.Unlock()
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	opt := agent.Options{
		Facts: func(context.Context) results.Machine {
			return results.Machine{Hostname: "far-" + d.Raw, BootID: "one-kernel"}
		},
		Docker: func(context.Context) (*results.EngineInfo, error) {
			if f.docker[d.Raw] {
				return &results.EngineInfo{Runtime: "docker", Name: "default"}, nil
			}
			return nil, errors.New("docker engine at unix:///var/run/docker.sock does not answer")
		},
		Engines: farEngines{&farEngine{f: f, host: d.Raw}},
		Observer: func([]observe.Container, time.Duration, func(results.Sample)) agent.Observer {
			return &fakeObserver{}
		},
		Workload: func(string) (workload.Workload, error) { return farWorkload{f}, nil },
		Net:      farNet{addr: farAddr(d.Raw)},
		Log:      io.Discard,
	}
	go func() { _ = agent.Serve(context.Background(), ar, aw, opt); aw.Close() }()
	c, err := remote.NewClient(ctx, cr, cw, remote.ClientOptions{Name: d.Raw, Session: o.Session, Heartbeat: -1, Closer: cw})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.cut[d.Raw] = func() { cw.Close(); cr.Close() }
	f.mu.Unlock()
	return &remote.Host{Client: c, Dest: d, Resolved: sshdest.Resolved{HostName: farAddr(d.Raw).String(), User: "root", Port: 22}}, nil
}

// farAddr is a far host's address on a network of its own (198.18.9.0/24).
func farAddr(name string) netip.Addr {
	var h byte
	for _, c := range name {
		h = h*31 + byte(c)
	}
	return netip.AddrFrom4([4]byte{198, 18, 9, h%250 + 2})
}

// farNet is a far host's network: every peer is reached from addr.
type farNet struct{ addr netip.Addr }

func (n farNet) Source(netip.Addr) (netip.Addr, string, error) { return n.addr, "eth0", nil }
func (farNet) AddRoute(string, engine.RunRoute) error          { return nil }
func (farNet) RemoveRoutes(string) ([]string, error)           { return nil, nil }
func (farNet) AdmitCounts(context.Context, string) (engine.AdmitCounts, error) {
	return engine.AdmitCounts{Chain: "CTRPERF-ADMIT-far"}, nil
}

const hostsPlanYAML = `
name: unit
workload: benchfake
hosts: {sut: sut1, load: load1}
repetitions: 2
warmup: 0s
duration: 1ms
seed: 3
baseline: bare
configurations:
  - name: bare
    runtime: host
  - name: published
    runtime: docker
`

func TestHostsRunThroughTheirAgents(t *testing.T) {
	p := parsePlan(t, hostsPlanYAML, plan.Options{})
	f := &farHosts{dials: map[string]int{}, cut: map[string]func(){}, deployed: map[string][]string{}, torn: map[string][]string{},
		docker: map[string]bool{"sut1": true}}
	var drives int
	f.drive = func(ctx context.Context, env workload.Env) (*results.Measurement, error) {
		f.mu.Lock()
		drives++
		first := drives == 2 // the second run, whichever configuration it is
		cut := f.cut["sut1"]
		f.mu.Unlock()
		if first {
			// The SSH connection to the SUT host drops mid-run.
			cut()
			time.Sleep(300 * time.Millisecond)
		}
		return measurement(100), nil
	}
	out := filepath.Join(t.TempDir(), "out")
	prov := &fakeProvider{}
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: prov, HostDialer: f.dial,
		Observers:   func(*engine.Target) Observer { return &fakeObserver{} },
		Workload:    func(string) (workload.Workload, error) { return &fakeWorkload{}, nil },
		EngineCheck: 10 * time.Millisecond, EngineGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(prov.deployed) != 0 {
		t.Errorf("deployed on this machine: %v", prov.deployed)
	}
	recs := readRecords(t, out)
	failed := 0
	for _, r := range recs {
		if r.Hosts == nil || r.Hosts.SUT.Hostname != "far-sut1" || r.Hosts.Load.Hostname != "far-load1" || r.Hosts.SUT.Dest != "root@"+farAddr("sut1").String()+":22" {
			t.Errorf("%s: hosts %+v", r.RunID, r.Hosts)
		}
		switch r.Status {
		case results.StatusFailed:
			failed++
			t.Logf("failed run: %s", r.Error)
			if !strings.Contains(r.Error, "sut1") {
				t.Errorf("%s failed with %q: want the SUT host's dropped connection", r.RunID, r.Error)
			}
		case results.StatusOK:
			if !slices.Contains(r.Result.Notes, "load generated on load1 (far-load1)") {
				t.Errorf("%s notes %v", r.RunID, r.Result.Notes)
			}
		default:
			t.Errorf("%s: %s %s", r.RunID, r.Status, r.Error)
		}
	}
	if failed != 1 || sum.OK != 3 {
		t.Errorf("%d failed, %d ok: want the run whose connection dropped failed and the plan gone on", failed, sum.OK)
	}
	if f.dials["sut1"] < 2 {
		t.Errorf("sut1 dialled %d times: want a new session after the drop", f.dials["sut1"])
	}
	// Everything deployed on the SUT host was torn down there (by the
	// runner or by the dropped session's watchdog); nothing on the load host.
	slices.Sort(f.deployed["sut1"])
	slices.Sort(f.torn["sut1"])
	if len(f.deployed["sut1"]) != 4 || !slices.Equal(f.deployed["sut1"], f.torn["sut1"]) || len(f.deployed["load1"]) != 0 {
		t.Errorf("deployed %v, torn down %v", f.deployed, f.torn)
	}
	env, err := results.ReadEnv(out)
	if err != nil || env == nil || len(env.Hosts) != 2 {
		t.Fatalf("env.json hosts: %+v, %v", env, err)
	}
	for _, h := range env.Hosts {
		if h.Clock == nil || h.Clock.Samples == 0 || h.BootID != "one-kernel" || len(h.Roles) != 1 {
			t.Errorf("env host %+v", h)
		}
	}
	if !results.SameKernel(env.Hosts) {
		t.Error("two hosts of one boot id are not seen as one kernel")
	}
}

func TestNoDockerOnTheSUTHostIsNotRun(t *testing.T) {
	p := parsePlan(t, hostsPlanYAML, plan.Options{})
	f := &farHosts{dials: map[string]int{}, cut: map[string]func(){}, deployed: map[string][]string{}, torn: map[string][]string{},
		docker: map[string]bool{}, drive: func(context.Context, workload.Env) (*results.Measurement, error) { return measurement(1), nil }}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: &fakeProvider{}, HostDialer: f.dial,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readRecords(t, out) {
		want := results.StatusOK
		if r.Config == "published" {
			want = results.StatusNotRun
			if !strings.Contains(r.Error, "sut1") || !strings.Contains(r.Error, "does not answer") {
				t.Errorf("not_run reason %q", r.Error)
			}
		}
		if r.Status != want {
			t.Errorf("%s (%s): %s %s, want %s", r.RunID, r.Config, r.Status, r.Error, want)
		}
	}
	if sum.NotRun != 2 || sum.OK != 2 {
		t.Errorf("summary %+v", sum)
	}
}

func TestUnreachableHostIsNotRunWithItsReason(t *testing.T) {
	p := parsePlan(t, hostsPlanYAML, plan.Options{})
	out := filepath.Join(t.TempDir(), "out")
	dial := func(context.Context, plan.Dest, remote.SSHOptions) (*remote.Host, error) {
		return nil, errors.New("unknown host key: sut1: run with --accept-new-host-key: " + remote.ErrUnknownHostKey.Error())
	}
	// Wrapped as the transport does.
	wrapped := func(ctx context.Context, d plan.Dest, o remote.SSHOptions) (*remote.Host, error) {
		_, err := dial(ctx, d, o)
		return nil, errors.Join(remote.ErrUnknownHostKey, err)
	}
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: &fakeProvider{}, HostDialer: wrapped,
		Workload: func(string) (workload.Workload, error) { return &fakeWorkload{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.NotRun != 4 {
		t.Errorf("summary %+v", sum)
	}
	for _, r := range readRecords(t, out) {
		if !strings.Contains(r.Error, "--accept-new-host-key") {
			t.Errorf("%s: %q", r.RunID, r.Error)
		}
	}
}

package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
)

// Engine is runtime vm: one booted guest, whose agent deploys the
// services as processes of the guest (the host runtime there, through
// remote.Engine, as on a plan's SUT host), served on the guest's address,
// which the load on this machine dials over the tap. The guest boots
// when the engine opens and stops when it closes: once per configuration
// and bench run, not per run, as bare metal is not rebooted between runs
// either (each run's services are deployed and torn down in it, its page
// cache carries over like the host's), and a boot (tens of seconds under
// emulation) would otherwise be a large share of every run.
//
// With vm.docker the services are containers of the guest's Docker
// engine instead (seed 003's "container in VM"): the agent deploys them
// there as on a remote host with Docker (remote.Engine with runtime
// docker), each a container of the image the workload names for a
// container (the Debian base where it names none), shipped into the
// guest by docker save | load on a disk attached for it (ship.go; never
// pulled), running
// the service's command with the guest's ctrperf bound in, on the
// guest's network (ContainerSpec).
type Engine struct {
	g    *Guest
	eng  *remote.Engine
	info engine.Info
	// image is what the guest's containers run (vm.docker).
	image string
}

var _ engine.Engine = (*Engine)(nil)

// Open boots the guest spec asks for on m. Accel kvm where no stock guest
// boots is the caller's to refuse first (doctor's reason).
func Open(ctx context.Context, m *Machine, spec plan.VMSpec, clientOpts remote.ClientOptions) (*Engine, engine.Info, error) {
	d := spec.Defaulted()
	g, err := m.Boot(ctx, Config{VCPUs: d.VCPUs, Memory: d.Memory, Accel: d.Accel, Network: d.Network, Disk: d.Disk, Docker: d.Docker}, clientOpts)
	if err != nil {
		return nil, engine.Info{}, err
	}
	e := &Engine{g: g, eng: remote.NewEngine(g.Client, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)}
	e.info = engine.Info{Runtime: string(engine.RuntimeVM), Name: fmt.Sprintf("vm-%s-%dcpu-%s", d.Accel, d.VCPUs, plan.FormatMemory(d.Memory)),
		VM: &results.VMInfo{Accel: d.Accel, Emulated: d.Accel == AccelTCG, VCPUs: d.VCPUs, MemoryBytes: d.Memory, Network: d.Network, Disk: d.Disk,
			Kernel: g.Client.Hello.Facts.Kernel, QEMU: qemuVersion(m.QEMU), Address: g.GuestIP.Addr().String(), BootSeconds: g.Booted.Seconds()}}
	if d.Docker {
		in := g.Client.Hello.Engine
		if in == nil {
			err := fmt.Errorf("guest %s: %w: %s%s", g.Name, errNoGuestEngine, g.Client.Hello.EngineError, g.consoleSays())
			return nil, engine.Info{}, errors.Join(err, g.Shutdown(context.WithoutCancel(ctx)))
		}
		e.eng = remote.NewEngine(g.Client, agent.EngineRef{Runtime: engine.RuntimeDocker}, m.Images, remote.WithShipper(g))
		e.image = orDefault(m.ContainerImage, ContainerImage)
		e.info.Name += "-docker"
		e.info.Version, e.info.StorageDriver, e.info.BackingFS, e.info.DataRoot = in.Version, in.StorageDriver, in.BackingFS, in.DataRoot
		e.info.VM.Docker = true
	}
	return e, e.info, nil
}

// ContainerImage is the image a guest's containers run (vm.docker): the
// Debian base, whose programs the guest's services run as processes
// without Docker too, so that the two rows differ by the container alone.
var ContainerImage = image.DebianBase.Ref()

// ContainerSpec is spec, written for processes of a guest (the workloads
// write the host runtime's spec for runtime vm), as containers of its
// Docker engine: each service a container of its image (the one the
// workload names for a container, such as the command workload's
// app.image; image where it names none) running its command (the host's
// argv where it has one), the guest's ctrperf bound in (the agent puts
// its path where the command names ctrperf), all on the guest's network
// (--network host there), the data as placed (a bind of the guest's
// disk, or a tmpfs).
func ContainerSpec(spec engine.DeploySpec, image string) engine.DeploySpec {
	spec.Network = engine.NetworkHost
	spec.Services = slices.Clone(spec.Services)
	for i := range spec.Services {
		s := &spec.Services[i]
		argv := s.HostCommand
		if len(argv) == 0 {
			argv = s.Command
		}
		if s.Image == "" {
			s.Image = image
		}
		s.HostCommand = nil
		s.Entrypoint, s.Command = nil, nil
		if len(argv) > 0 {
			// The entrypoint too: the image's CMD (bash) is not the
			// service.
			s.Entrypoint, s.Command = slices.Clone(argv[:1]), slices.Clone(argv[1:])
		}
		s.HostFiles = append(slices.Clone(s.HostFiles), GuestBinary)
	}
	return spec
}

// qemuVersion is the first line of `qemu-system-x86_64 --version`.
func qemuVersion(qemu string) string {
	out, err := exec.Command(qemu, "--version").Output()
	if err != nil {
		return qemu
	}
	l, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(l)
}

// Host is the guest as a host of the plan (env.json's hosts): its kernel,
// vCPUs and memory as its agent reported them, and its engine's VM facts
// (accelerator, emulated, network, disk).
func (e *Engine) Host() results.HostInfo {
	f := e.g.Client.Hello.Facts
	info := e.info
	return results.HostInfo{Roles: []string{results.RoleSUT}, RunHost: results.RunHost{Name: e.g.Name, Hostname: f.Hostname},
		BootID: f.BootID, Kernel: f.Kernel, Machine: f.Machine, CPUModel: f.CPUModel, CPUs: f.CPUs, MemTotal: f.MemTotal, Engine: &info}
}

// Guest is the engine's guest.
func (e *Engine) Guest() *Guest { return e.g }

// Info is the guest as it booted.
func (e *Engine) Info(context.Context) (engine.Info, error) { return e.info, nil }

// Ping says whether the guest still runs and its agent answers.
func (e *Engine) Ping(ctx context.Context) error {
	if !e.g.Alive() {
		return fmt.Errorf("%w: guest %s: QEMU exited%s", engine.ErrUnreachable, e.g.Name, e.g.consoleSays())
	}
	return e.eng.Ping(ctx)
}

// Deploy deploys spec in the guest, its front service served on the
// guest's address for this machine's end of the tap, the only way in; on
// the user-mode network for QEMU's forwards, each endpoint then a port of
// 127.0.0.1 that QEMU relays to it. With disk: virtiofs the services'
// data directories are on the directory shared into the guest.
func (e *Engine) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	if err := engine.ValidateSpec(engine.RuntimeVM, spec); err != nil {
		return nil, err
	}
	spec.Reach = &engine.Reach{Addr: e.g.GuestIP.Addr(), From: e.g.HostIP, Sole: true}
	if e.info.VM.Disk == DiskVirtiofs {
		spec.DataRoot = GuestDataDir
	}
	if e.info.VM.Docker {
		spec = ContainerSpec(spec, e.image)
	}
	t, err := e.eng.Deploy(ctx, spec)
	if err != nil {
		return nil, err
	}
	t.Runtime = engine.RuntimeVM
	if e.g.Network == NetworkUser {
		for i, ep := range t.Endpoints {
			ap, err := netip.ParseAddrPort(ep.Addr)
			if err != nil {
				return t, fmt.Errorf("endpoint %s of %s: %w", ep.Addr, ep.Service, err)
			}
			host, err := e.g.Forward(ctx, t.RunID, int(ap.Port()))
			if err != nil {
				return t, err
			}
			t.Endpoints[i].Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(host))
		}
	}
	return t, nil
}

// Path is how the load reaches the guest's services when a relay of
// QEMU's is in the way (the user-mode network), nil when nothing of
// ctrperf's is (the tap: this machine's network stack to the guest's).
func (e *Engine) Path(t *engine.Target) *results.NetPath {
	if e.g.Network != NetworkUser {
		return nil
	}
	np := &results.NetPath{Kind: results.PathRelayed, Via: plan.RelayNote, SUTAddr: e.g.GuestIP.Addr().String(), LoadAddr: "127.0.0.1"}
	for _, ep := range t.Endpoints {
		np.Dialled = append(np.Dialled, ep.Addr)
	}
	return np
}

// Exec runs argv in a service of the guest.
func (e *Engine) Exec(ctx context.Context, t *engine.Target, service string, argv []string) (engine.ExecResult, error) {
	return e.eng.Exec(ctx, t, service, argv)
}

// Teardown removes the run's services in the guest.
func (e *Engine) Teardown(ctx context.Context, t *engine.Target) error {
	if !e.g.Alive() {
		return nil // the guest and all of it are gone
	}
	return errors.Join(e.g.Unforward(ctx, t.RunID), e.eng.Teardown(ctx, t))
}

// Close shuts the guest down (see Guest.Shutdown).
func (e *Engine) Close(ctx context.Context) error { return e.g.Shutdown(ctx) }

// Observer samples the guest (its /proc, its cgroups) through its agent,
// times counted from now (about when the run's observer clock starts).
func (e *Engine) Observer(t *engine.Target) engine.RunObserver {
	return remote.NewObserver(e.g.Client, t.RunID, t).From(time.Now())
}

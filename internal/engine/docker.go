package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
)

// Default locations of what the engines create on the host.
const (
	DefaultBindRoot = "/var/lib/ctrperf/bind" // bind placements: <root>/<run>/<svc>
	DefaultRunDir   = "/run/ctrperf"          // locks and host-runtime state
	defaultReady    = 60 * time.Second
	// stepTimeout bounds one Docker API call of a deploy. Calls are not
	// cancelled by the run's context: an object in flight when the user hits
	// Ctrl-C would be created after the cleanup looked for it.
	stepTimeout = 2 * time.Minute
)

// Docker deploys services as containers through the Docker Engine API. It
// works with any SDK client: the default engine or a private one.
type Docker struct {
	cli           client.APIClient
	rt            Runtime
	name          string
	private       bool
	userlandProxy *bool
	closer        func(context.Context) error
	bindRoot      string
	kernel        kernel.FS
	runDir        string
	iptables      iptablesRunner
	// hostPID maps a pid the engine reports to the host's (a nested
	// engine's pids are in its container's namespace); nil: the same.
	hostPID func(pid int) (int, error)
	// acceptForwarded: see WithAcceptForwarded.
	acceptForwarded bool
}

var _ Engine = (*Docker)(nil)

// DockerOption configures a Docker engine.
type DockerOption func(*Docker)

// WithRuntime says which runtime's Docker-compatible API cli speaks
// (podman's service): targets and Info carry it, and the deployment is
// checked against its networks and data placements (default docker).
func WithRuntime(rt Runtime) DockerOption { return func(d *Docker) { d.rt = rt } }

// WithAcceptForwarded says that the engine's NAT does not accept new
// forwarded connections to a published port: rootful podman's netavark
// accepts only the replies in FORWARD, and beside Docker, whose FORWARD
// policy is DROP, a client that is not this host's own stack (the client
// namespace of published-external, a load host) never reaches the
// container. The run's admit chain then accepts exactly that client's
// connections to the published endpoints (admit.go), and teardown and
// clean remove it with the run.
func WithAcceptForwarded() DockerOption { return func(d *Docker) { d.acceptForwarded = true } }

// WithEngineName names the engine in Info ("default" unless set).
func WithEngineName(name string) DockerOption { return func(d *Docker) { d.name = name } }

// WithPrivateEngine marks the engine as started by ctrperf; Close calls stop.
func WithPrivateEngine(stop func(context.Context) error) DockerOption {
	return func(d *Docker) { d.private, d.closer = true, stop }
}

// WithUserlandProxy records the daemon's --userland-proxy setting for Info
// (the Engine API does not report it).
func WithUserlandProxy(on bool) DockerOption { return func(d *Docker) { d.userlandProxy = &on } }

// WithBindRoot changes where bind placements live (default DefaultBindRoot).
func WithBindRoot(dir string) DockerOption { return func(d *Docker) { d.bindRoot = dir } }

// WithKernel changes where the kernel's file systems are read (default the
// real ones).
func WithKernel(fs kernel.FS) DockerOption { return func(d *Docker) { d.kernel = fs } }

// WithHostPID maps the pids the engine reports to the host's: a dockerd in
// a container reports its containers' pids in that container's namespace.
func WithHostPID(f func(pid int) (int, error)) DockerOption {
	return func(d *Docker) { d.hostPID = f }
}

// WithRunDir changes where locks are kept (default DefaultRunDir).
func WithRunDir(dir string) DockerOption { return func(d *Docker) { d.runDir = dir } }

// NewDocker returns an engine deploying through cli.
func NewDocker(cli client.APIClient, opts ...DockerOption) *Docker {
	d := &Docker{cli: cli, rt: RuntimeDocker, name: "default", bindRoot: DefaultBindRoot, kernel: kernel.DefaultFS(), runDir: DefaultRunDir, iptables: execIPTables}
	for _, o := range opts {
		o(d)
	}
	return d
}

// dockerState is the Docker engine's bookkeeping in Target.Private.
type dockerState struct {
	network string
	ext     *externalNet
}

// Client is the Engine API client the engine deploys through (the isolate
// controller of a bench run manages the run's containers with it).
func (d *Docker) Client() client.APIClient { return d.cli }

// Info reports the daemon's version and storage.
func (d *Docker) Info(ctx context.Context) (Info, error) {
	res, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("docker engine %s: info: %w", d.name, err)
	}
	in := res.Info
	out := Info{Runtime: string(d.rt), Name: d.name, Version: in.ServerVersion, StorageDriver: in.Driver,
		DataRoot: in.DockerRootDir, UserlandProxy: d.userlandProxy, Private: d.private}
	for _, kv := range in.DriverStatus {
		if len(kv) == 2 && kv[0] == "Backing Filesystem" {
			out.BackingFS = kv[1]
		}
	}
	return out, nil
}

// Ping asks the engine for an answer within ctx.
func (d *Docker) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker engine %s: ping: %w", d.name, err)
	}
	return nil
}

// ErrUnreachable marks an error of an engine that is not there to answer;
// engines other than Docker (and fakes) wrap it, Docker's SDK has its own.
var ErrUnreachable = errors.New("engine unreachable")

// Unreachable says whether err is an engine call that found no engine on
// the other end: the socket refuses connections or is gone, or the
// connection broke mid-request (EOF, reset), as when dockerd dies or
// restarts. A slow engine (a deadline) is not unreachable.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrUnreachable) || client.IsErrConnectionFailed(err)
}

// Close stops a private engine; the default engine is left alone.
func (d *Docker) Close(ctx context.Context) error {
	if d.closer == nil {
		return nil
	}
	return d.closer(ctx)
}

// Deploy creates the run's network, volumes and containers, last service
// first, waiting for each to be ready. On any error (and on cancellation)
// it removes everything it created before returning.
func (d *Docker) Deploy(ctx context.Context, spec DeploySpec) (t *Target, err error) {
	if err := ValidateSpec(d.rt, spec); err != nil {
		return nil, err
	}
	if err := d.checkImages(ctx, spec.Services); err != nil {
		return nil, err
	}
	// Teardown works by label, so a second deploy under a live run id would
	// take the first one down with it on failure: refuse before creating.
	if left, err := cleanDocker(ctx, d.cli, spec.RunID, true, nil); err != nil {
		return nil, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	} else if len(left) > 0 {
		return nil, fmt.Errorf("deploy %s: the run id is already in use on docker engine %s (%s); use a new run id or `ctrperf clean --run %s`", spec.RunID, d.name, strings.Join(left, ", "), spec.RunID)
	}
	st := &dockerState{network: NetworkName(spec.RunID)}
	t = &Target{RunID: spec.RunID, Runtime: d.rt, Network: spec.Network, Private: st}
	defer func() {
		if err != nil {
			if terr := d.Teardown(ctx, t); terr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, terr)
			}
			t = nil
		}
	}()

	hostNet := spec.Network == NetworkHost
	var b Bindings
	if hostNet {
		b, err = hostBindings(spec.Services, dockerArgv, func(s Service) string { return s.DataDir })
		if err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
		b.reach(spec)
	} else {
		b = Bindings{}
		for _, s := range spec.Services {
			b[s.Name] = ServiceBinding{Host: ObjectName(spec.RunID, s.Name), PortsIdentity: true, DataDir: s.DataDir}
		}
	}

	if err := b.Check(spec.Services, dockerArgv); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}

	step := func() (context.Context, context.CancelFunc) { return lifecycle.Detached(ctx, stepTimeout) }
	// Another dockerd starting on this host (a private engine) flushes and
	// recreates the shared DOCKER chains; a network created in that window
	// fails with "Chain 'DOCKER' does not exist". Docker rolls the network
	// back, so trying again a moment later is safe.
	for attempt := 0; ; attempt++ {
		sctx, cancel := step()
		_, err = d.cli.NetworkCreate(sctx, st.network, client.NetworkCreateOptions{Driver: "bridge", Labels: RunLabels(spec.RunID)})
		cancel()
		if err == nil || attempt >= 5 || !iptablesChainRace(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	if err != nil {
		return t, fmt.Errorf("deploy %s: create network %s: %w", spec.RunID, st.network, err)
	}
	if spec.Network == NetworkPublishedExternal && !spec.Reach.Valid() { // with Reach: the load host is the external client
		if err := ctx.Err(); err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, context.Cause(ctx))
		}
		st.ext, err = setupExternal(spec.RunID, d.runDir)
		if err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
		t.Dial = st.ext.Dial
		t.Netns = st.ext.Netns
		if d.acceptForwarded {
			if err := admitNamespace(ctx, d.iptables, spec.RunID, st.ext.PeerIP); err != nil {
				return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
			}
		}
	}

	for i := len(spec.Services) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return t, fmt.Errorf("deploy %s: stopped before service %q: %w", spec.RunID, spec.Services[i].Name, context.Cause(ctx))
		}
		if err := d.deployService(ctx, t, spec, i, b); err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
	}
	if err := admitClients(ctx, d.iptables, spec, t, d.acceptForwarded); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	return t, nil
}

// ImageMissingError is a deployment's image that the engine does not
// have. ctrperf never pulls, so the configuration cannot run until someone
// builds or loads it there.
type ImageMissingError struct {
	Image, Service, Engine string
}

func (e *ImageMissingError) Error() string {
	return fmt.Sprintf("image %q of service %q is not on docker engine %s (ctrperf never pulls): %s", e.Image, e.Service, e.Engine, missingImageAdvice(e.Image))
}

func (d *Docker) checkImages(ctx context.Context, services []Service) error {
	seen := map[string]bool{}
	for _, s := range services {
		if seen[s.Image] {
			continue
		}
		seen[s.Image] = true
		if _, err := d.cli.ImageInspect(ctx, s.Image); err != nil {
			if cerrdefs.IsNotFound(err) {
				return &ImageMissingError{Image: s.Image, Service: s.Name, Engine: d.name}
			}
			return fmt.Errorf("inspect image %q of service %q: %w", s.Image, s.Name, err)
		}
	}
	return nil
}

// dockerArgv is everything of a service's container process that may hold
// templates: the entrypoint override and the command.
func dockerArgv(s Service) []string {
	return append(append([]string(nil), s.Entrypoint...), s.Command...)
}

// missingImageAdvice says how to get an image onto the engine: ctrperf's
// own are built by `ctrperf images build`, anyone else's by `docker build`
// or `docker load`.
func missingImageAdvice(ref string) string {
	if strings.HasPrefix(ref, NamePrefix+"/") {
		return "run `ctrperf images build`"
	}
	return fmt.Sprintf("build it with `docker build -t %s DIR` or load a saved copy with `docker load -i FILE.tar`", ref)
}

// containerConfigs builds what ContainerCreate gets for service i. Pure
// except for the bind directory's path, so it is tested without Docker.
func containerConfigs(spec DeploySpec, i int, b Bindings, bindRoot string, ext *externalNet) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
	s := spec.Services[i]
	cmd, err := b.ExpandAll(s.Command)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("service %q command: %w", s.Name, err)
	}
	env, err := b.ExpandEnv(s.Env)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("service %q: %w", s.Name, err)
	}
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range RunLabels(spec.RunID) {
		labels[k] = v
	}
	labels[LabelService] = s.Name
	entry, err := b.ExpandAll(s.Entrypoint)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("service %q entrypoint: %w", s.Name, err)
	}
	cfg := &container.Config{Image: s.Image, Entrypoint: entry, Cmd: cmd, Env: envList(env), Labels: labels, User: s.User}
	hc := &container.HostConfig{}
	hc.CpusetCpus = s.Resources.CPUSet
	hc.CPUShares = s.Resources.CPUShares
	hc.NanoCPUs = int64(s.Resources.CPUs * 1e9)
	hc.Memory = s.Resources.MemoryBytes
	hc.Privileged = s.Privileged
	if spec.DataRoot != "" {
		bindRoot = spec.DataRoot
	}
	if s.DataDir != "" {
		switch spec.Data {
		case DataVolume:
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: ObjectName(spec.RunID, s.Name), Target: s.DataDir})
		case DataBind:
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(bindRoot, spec.RunID, s.Name), Target: s.DataDir})
		case DataTmpfs:
			hc.Tmpfs = map[string]string{s.DataDir: ""}
		}
	}
	for _, f := range s.HostFiles {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: f, Target: f, ReadOnly: true})
	}
	var nc *network.NetworkingConfig
	if spec.Network == NetworkHost {
		hc.NetworkMode = "host"
	} else {
		netName := NetworkName(spec.RunID)
		hc.NetworkMode = container.NetworkMode(netName)
		nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			netName: {Aliases: []string{s.Name}},
		}}
		if i == 0 && (spec.Network == NetworkPublished || spec.Network == NetworkPublishedExternal) {
			hostIP := netip.AddrFrom4([4]byte{127, 0, 0, 1})
			if spec.Reach.Valid() {
				// Where the load host's packets arrive: Docker DNATs them
				// there (docker-proxy serves only this host's own
				// connections).
				hostIP = spec.Reach.Addr
			} else if spec.Network == NetworkPublishedExternal {
				if ext == nil {
					return nil, nil, nil, errors.New("published-external without a client namespace")
				}
				hostIP = ext.HostIP
			}
			cfg.ExposedPorts = network.PortSet{}
			hc.PortBindings = network.PortMap{}
			for _, p := range s.Ports {
				port, _ := network.PortFrom(uint16(p), network.TCP)
				cfg.ExposedPorts[port] = struct{}{}
				// HostPort "" lets the daemon pick a free port atomically.
				hc.PortBindings[port] = []network.PortBinding{{HostIP: hostIP, HostPort: ""}}
			}
		}
	}
	return cfg, hc, nc, nil
}

func (d *Docker) deployService(ctx context.Context, t *Target, spec DeploySpec, i int, b Bindings) error {
	s := spec.Services[i]
	st := t.Private.(*dockerState)
	name := ObjectName(spec.RunID, s.Name)
	step := func() (context.Context, context.CancelFunc) { return lifecycle.Detached(ctx, stepTimeout) }

	if s.DataDir != "" {
		switch spec.Data {
		case DataVolume:
			labels := RunLabels(spec.RunID)
			labels[LabelService] = s.Name
			sctx, cancel := step()
			_, err := d.cli.VolumeCreate(sctx, client.VolumeCreateOptions{Name: name, Labels: labels})
			cancel()
			if err != nil {
				return fmt.Errorf("service %q: create volume %s: %w", s.Name, name, err)
			}
		case DataBind:
			root := d.bindRoot
			if spec.DataRoot != "" {
				root = spec.DataRoot
			}
			// The leaf is world-writable, as the image may run as any user
			// (mysql, nobody); its parents are closed (see makeDataDir).
			if _, err := makeDataDir(root, spec.RunID, s.Name, dataLeafOpen); err != nil {
				return fmt.Errorf("service %q: bind directory: %w", s.Name, err)
			}
		}
	}
	cfg, hc, nc, err := containerConfigs(spec, i, b, d.bindRoot, st.ext)
	if err != nil {
		return err
	}
	sctx, cancel := step()
	created, err := d.cli.ContainerCreate(sctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, NetworkingConfig: nc, Name: name})
	cancel()
	if err != nil {
		return fmt.Errorf("service %q: create container %s from %s: %w", s.Name, name, s.Image, err)
	}
	c := Container{ID: created.ID, Name: name, Service: s.Name}
	t.Containers = append(t.Containers, c)
	idx := len(t.Containers) - 1

	sctx, cancel = step()
	_, err = d.cli.ContainerStart(sctx, created.ID, client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("service %q: start container %s: %w", s.Name, name, err)
	}
	sctx, cancel = step()
	inr, err := d.cli.ContainerInspect(sctx, created.ID, client.ContainerInspectOptions{})
	in := inr.Container
	cancel()
	if err != nil {
		return fmt.Errorf("service %q: inspect container %s: %w", s.Name, name, err)
	}
	if in.State != nil {
		c.PID = in.State.Pid
		if d.hostPID != nil && c.PID > 0 {
			if hp, err := d.hostPID(c.PID); err == nil {
				c.PID = hp
			} else {
				c.PID = 0 // no host pid: no per-container figures, never another process's
			}
		}
		if !in.State.Running {
			return fmt.Errorf("service %q (%s): container exited with status %d right after start%s", s.Name, name, in.State.ExitCode, d.logTail(ctx, created.ID, 20))
		}
	}
	if in.NetworkSettings != nil {
		if ep := in.NetworkSettings.Networks[st.network]; ep != nil {
			if ep.IPAddress.IsValid() {
				c.IP = ep.IPAddress.String()
			}
		}
	}
	if c.PID > 0 {
		// The container may already have died; readiness reports that.
		if cg, err := CgroupPath(d.kernel, c.PID); err == nil {
			c.CgroupPath = cg
		}
	}
	t.Containers[idx] = c

	direct := func(port int) (string, error) {
		if spec.Network == NetworkHost {
			p, err := b[s.Name].port(s.Name, port)
			if err != nil {
				return "", err
			}
			return net.JoinHostPort(b.listenHost(s.Name), strconv.Itoa(p)), nil
		}
		if c.IP == "" {
			return "", fmt.Errorf("container %s has no IP on %s", name, st.network)
		}
		return net.JoinHostPort(c.IP, strconv.Itoa(port)), nil
	}
	if i == 0 {
		for _, p := range s.Ports {
			var addr string
			switch spec.Network {
			case NetworkHost, NetworkContainerIP:
				addr, err = direct(p)
			case NetworkPublished, NetworkPublishedExternal:
				addr, err = publishedAddr(in, p)
			}
			if err != nil {
				return fmt.Errorf("service %q port %d: %w", s.Name, p, err)
			}
			t.Endpoints = append(t.Endpoints, Endpoint{Service: s.Name, Port: p, Addr: addr})
			if spec.Network == NetworkPublished && !spec.Reach.Valid() && (d.userlandProxy == nil || *d.userlandProxy) {
				if err := d.keepOnProxy(ctx, spec.RunID, addr); err != nil {
					return fmt.Errorf("service %q port %d: %w", s.Name, p, err)
				}
			}
		}
	}
	if s.Ready == nil {
		return nil
	}
	port := s.Ready.Port
	if port == 0 && len(s.Ports) > 0 {
		port = s.Ports[0]
	}
	var addr string
	dial := (&net.Dialer{}).DialContext
	if ep, err := t.Endpoint(s.Name, port); i == 0 && err == nil {
		addr, dial = ep.Addr, t.Dialer() // the path the load will take
	} else if addr, err = direct(port); err != nil {
		return fmt.Errorf("service %q ready check: %w", s.Name, err)
	}
	alive := func(ctx context.Context) error {
		inr, err := d.cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		in := inr.Container
		if in.State != nil && !in.State.Running {
			return fmt.Errorf("container exited with status %d", in.State.ExitCode)
		}
		return nil
	}
	if err := waitReady(ctx, *s.Ready, addr, dial, alive); err != nil {
		return fmt.Errorf("service %q (%s) not ready on %s: %w%s", s.Name, name, addr, err, d.logTail(ctx, created.ID, 20))
	}
	return nil
}

// keepOnProxy makes sure host traffic to a loopback port that docker-proxy
// serves reaches docker-proxy even while another dockerd's rules would DNAT
// it (see docker_iptables.go).
func (d *Docker) keepOnProxy(ctx context.Context, runID, addr string) error {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("published port %q: %w", portStr, err)
	}
	if !dockerProxyServes(d.kernel, port) {
		return nil // the daemon's proxy is off: NAT is the configuration
	}
	ictx, cancel := lifecycle.Detached(ctx, 30*time.Second)
	defer cancel()
	if err := addLoopbackRule(ictx, d.iptables, runID, port); err != nil {
		return fmt.Errorf("keep 127.0.0.1:%d on docker-proxy: %w", port, err)
	}
	return nil
}

// publishedAddr is the host address the daemon bound a published port to.
func publishedAddr(in container.InspectResponse, port int) (string, error) {
	if in.NetworkSettings == nil {
		return "", errors.New("no network settings")
	}
	p, _ := network.PortFrom(uint16(port), network.TCP)
	bs := in.NetworkSettings.Ports[p]
	if len(bs) == 0 || bs[0].HostPort == "" {
		return "", fmt.Errorf("port %d/tcp was not published", port)
	}
	return net.JoinHostPort(bs[0].HostIP.String(), bs[0].HostPort), nil
}

// logTail returns the last lines of a container's output, formatted to end
// an error message, or "" when there are none.
func (d *Docker) logTail(ctx context.Context, id string, lines int) string {
	lctx, cancel := lifecycle.Detached(ctx, 10*time.Second)
	defer cancel()
	rc, err := d.cli.ContainerLogs(lctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(lines)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && out.Len() == 0 {
		return ""
	}
	s := strings.TrimSpace(out.String())
	if s == "" {
		return "; the container printed nothing"
	}
	return "; last output:\n" + s
}

// waitReady polls until the ready check passes, the service dies, or the
// check's timeout (or ctx) ends.
func waitReady(ctx context.Context, rc ReadyCheck, addr string, dial func(context.Context, string, string) (net.Conn, error), alive func(context.Context) error) error {
	timeout := rc.Timeout
	if timeout <= 0 {
		timeout = defaultReady
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	var last error
	for {
		last = probe(ctx, hc, rc, addr, dial)
		if last == nil {
			return nil
		}
		if alive != nil {
			if err := alive(ctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("%w (last probe: %v)", err, last)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("no answer within %v (last probe: %v)", timeout, last)
			}
			return fmt.Errorf("%w (last probe: %v)", context.Cause(ctx), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, hc *http.Client, rc ReadyCheck, addr string, dial func(context.Context, string, string) (net.Conn, error)) error {
	if rc.HTTPPath == "" {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := dial(pctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		return heldOpen(c)
	}
	path := rc.HTTPPath
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// heldOpenWait is how long a TCP ready check waits for the far end to
// close a connection it accepted.
const heldOpenWait = 150 * time.Millisecond

// heldOpen tells a service that accepted a connection from docker-proxy,
// which accepts on a published port before anything listens behind it
// and then closes at once: a connection closed (or reset) within
// heldOpenWait is no service yet; one held open, or that sent a greeting,
// is.
func heldOpen(c net.Conn) error {
	if err := c.SetReadDeadline(time.Now().Add(heldOpenWait)); err != nil {
		return nil // no deadlines on this connection: the connect has to do
	}
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("connected, but the far end closed at once (%v): nothing listens behind it yet (docker-proxy accepts for a published port before the service does)", err)
}

// Exec runs argv in a service's container (docker exec) and waits for it.
// A non-zero exit is in the result, not an error.
func (d *Docker) Exec(ctx context.Context, t *Target, service string, argv []string) (ExecResult, error) {
	c, err := findContainer(t, service)
	if err != nil {
		return ExecResult{}, err
	}
	ex, err := d.cli.ExecCreate(ctx, c.ID, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %v in %s: create: %w", argv, c.Name, err)
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %v in %s: attach: %w", argv, c.Name, err)
	}
	defer att.Close()
	var res ExecResult
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); done <- err }()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return ExecResult{}, fmt.Errorf("exec %v in %s: %w", argv, c.Name, context.Cause(ctx))
	}
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %v in %s: read output: %w", argv, c.Name, err)
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	ins, err := d.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return res, fmt.Errorf("exec %v in %s: inspect: %w", argv, c.Name, err)
	}
	res.ExitCode = ins.ExitCode
	return res, nil
}

func findContainer(t *Target, service string) (Container, error) {
	if t == nil {
		return Container{}, errors.New("no target")
	}
	for _, c := range t.Containers {
		if c.Service == service {
			return c, nil
		}
	}
	return Container{}, fmt.Errorf("target %s has no service %q", t.RunID, service)
}

// Teardown removes every container, network and volume labelled with the
// run id on this engine, the run's bind directories and its client
// namespace. It finds objects by label, not by bookkeeping, so it also
// covers a deploy that was interrupted at any point; it runs on a fresh
// context when ctx is already cancelled.
func (d *Docker) Teardown(ctx context.Context, t *Target) error {
	if t == nil {
		return nil
	}
	ctx, cancel := lifecycle.Detached(ctx, lifecycle.DefaultCleanupTimeout)
	defer cancel()
	if st, ok := t.Private.(*dockerState); ok && st.ext != nil {
		st.ext.close()
	}
	_, err := cleanRun(ctx, d.cli, t.RunID, d.bindRoot, false, nil)
	return err
}

// iptablesChainRace says whether an engine error comes from a DOCKER chain
// that another dockerd was flushing and recreating at that moment.
func iptablesChainRace(err error) bool {
	m := err.Error()
	return strings.Contains(m, "iptables") &&
		(strings.Contains(m, "does not exist") || strings.Contains(m, "No chain/target/match by that name"))
}

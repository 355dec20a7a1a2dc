package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/sshdest"
	"ctrperf/internal/workload"
)

// A plan's hosts: the system under test deployed on the SUT host's engine
// through its agent (sutEngine), sampled there (sutObserver), the load
// generator run on the load host through its agent (loadHost). Each host
// has one agent session, shared by the runs; a session that dropped fails
// the run in progress (its engine no longer answers) and is dialled again
// for the next run and for the teardown, which finds the run by its id
// (the agent of the dropped session has torn it down already, its
// watchdog's job).

// HostDialer reaches a host of the plan (remote.Dial; tests fake it).
type HostDialer func(ctx context.Context, d plan.Dest, o remote.SSHOptions) (*remote.Host, error)

// hostSet is the sessions to the plan's hosts.
type hostSet struct {
	opt    remote.SSHOptions
	dial   HostDialer
	images remote.ImageSource

	mu      sync.Mutex
	hosts   map[string]*remote.Host
	paths   map[string]*netPath // by "sut load"
	engines map[*remote.Host]map[string]*remote.Engine
	infos   map[string]*results.HostInfo
	all     []*remote.Host // every session opened, closed at the end
}

func newHostSet(r *runner) *hostSet {
	o := remote.SSHOptions{Config: r.p.SSHConfig, AcceptNewHostKey: r.opt.AcceptNewHostKey, Session: r.session, Log: os.Stderr}
	dial := r.opt.HostDialer
	if dial == nil {
		dial = remote.Dial
	}
	s := &hostSet{opt: o, dial: dial, hosts: map[string]*remote.Host{}, paths: map[string]*netPath{}, engines: map[*remote.Host]map[string]*remote.Engine{},
		infos: map[string]*results.HostInfo{}}
	if p, ok := r.opt.Engines.(imageProvider); ok {
		s.images = p.hostImages()
	}
	return s
}

// host is the live session to d, dialled (again) when there is none.
func (s *hostSet) host(ctx context.Context, d plan.Dest, role string) (*remote.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hosts[d.Raw]; h != nil && h.Err() == nil {
		s.note(d, h, role)
		return h, nil
	}
	h, err := s.dial(ctx, d, s.opt)
	if err != nil {
		return nil, err
	}
	s.hosts[d.Raw] = h
	s.all = append(s.all, h)
	s.note(d, h, role)
	return h, nil
}

// current is d's session as it is, nil when it dropped or never was.
func (s *hostSet) current(d plan.Dest) *remote.Host {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hosts[d.Raw]; h != nil && h.Err() == nil {
		return h
	}
	return nil
}

// note keeps what env.json says of a host (s.mu held).
func (s *hostSet) note(d plan.Dest, h *remote.Host, role string) {
	info := s.infos[d.Raw]
	if info == nil {
		f := h.Hello.Facts
		rh := sshdest.RunHost(d, &h.Resolved)
		rh.Hostname = f.Hostname
		clock := h.Clock
		info = &results.HostInfo{RunHost: *rh, BootID: f.BootID, Kernel: f.Kernel, Machine: f.Machine, CPUModel: f.CPUModel,
			CPUs: f.CPUs, MemTotal: f.MemTotal, Engine: h.Hello.Engine, Clock: &clock}
		s.infos[d.Raw] = info
	}
	if !slices.Contains(info.Roles, role) {
		info.Roles = append(info.Roles, role)
		slices.Sort(info.Roles)
	}
}

// engine is the remote engine of ref on d's session.
func (s *hostSet) engine(ctx context.Context, d plan.Dest, ref agent.EngineRef) (*remote.Engine, *remote.Host, error) {
	h, err := s.host(ctx, d, results.RoleSUT)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(ref.Runtime) + "/" + ref.Engine.Key()
	if s.engines[h] == nil {
		s.engines[h] = map[string]*remote.Engine{}
	}
	e := s.engines[h][key]
	if e == nil {
		e = remote.NewEngine(h.Client, ref, s.images)
		s.engines[h][key] = e
	}
	return e, h, nil
}

// hostInfos are the hosts reached, for env.json.
func (s *hostSet) hostInfos() []results.HostInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []results.HostInfo
	for _, k := range slices.Sorted(maps.Keys(s.infos)) {
		out = append(out, *s.infos[k])
	}
	return out
}

// close ends every session: each agent tears down what is left of it.
func (s *hostSet) close(ctx context.Context) error {
	s.mu.Lock()
	all := s.all
	s.all, s.hosts = nil, map[string]*remote.Host{}
	s.mu.Unlock()
	var errs []error
	for _, h := range all {
		errs = append(errs, h.Close(ctx))
	}
	return errors.Join(errs...)
}

// unreachableHost is a dial failure that no retry in this plan changes
// (a host key, a refused login, a host ctrperf cannot run on): the
// configuration is not_run with it.
func unreachableHost(err error) bool {
	for _, e := range []error{remote.ErrUnknownHostKey, remote.ErrChangedHostKey, remote.ErrAuthRefused, remote.ErrUnsupportedHost} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// remoteHosts is the site of a configuration with hosts: the system under
// test on the SUT host's engine through its agent (sutEngine), sampled
// there (sutObserver), the load generated here or by the load host's
// agent: a remote driver of one generator (fanOut).
type remoteHosts struct {
	r   *runner
	cfg *plan.Configuration

	mu  sync.Mutex
	eng *sutEngine // the SUT's engine once open succeeded
}

// set is the runner's sessions to the plan's hosts, made on first use.
func (s *remoteHosts) set() *hostSet {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.r.hosts == nil {
		s.r.hosts = newHostSet(s.r)
	}
	return s.r.hosts
}

func (s *remoteHosts) open(ctx context.Context) (engine.Engine, engine.Info, error) {
	cfg := s.cfg
	hs := cfg.Hosts
	if hs.SUT.Local() {
		if !hs.Load.Local() {
			return nil, engine.Info{}, siteUnavailable("hosts: load on %s with the system under test on this machine is not supported: the load host could not reach services that listen on this machine's loopback; put the system under test on a host too (hosts: {sut: …})", hs.Load.Raw)
		}
		return s.r.opt.Engines.Engine(ctx, cfg.Runtime, cfg.Engine)
	}
	if cfg.Isolate.On() || cfg.Filesystem.On() {
		return nil, engine.Info{}, siteUnavailable("SUT host %s: the isolate controller and data filesystems run on this machine only so far", hs.SUT.Raw)
	}
	set := s.set()
	he := &sutEngine{set: set, dest: hs.SUT, ref: agent.EngineRef{Runtime: cfg.Runtime, Engine: cfg.Engine}}
	if hs.Load.Raw != hs.SUT.Raw {
		// The load host dials the SUT as a client on another machine
		// would (path.go): no process of ctrperf's in between.
		he.load = &hs.Load
	}
	eng, h, err := he.get(ctx)
	if err != nil {
		if unreachableHost(err) {
			return nil, engine.Info{}, siteUnavailable("SUT host %s: %v", hs.SUT.Raw, err)
		}
		return nil, engine.Info{}, fmt.Errorf("SUT host %s: %w", hs.SUT.Raw, err)
	}
	if !hs.Load.Local() && hs.Load.Raw != hs.SUT.Raw {
		// The load host too, before anything is deployed: a host that
		// cannot be reached costs no deployment.
		if _, err := set.host(ctx, hs.Load, results.RoleLoad); err != nil {
			if unreachableHost(err) {
				return nil, engine.Info{}, siteUnavailable("load host %s: %v", hs.Load.Raw, err)
			}
			return nil, engine.Info{}, fmt.Errorf("load host %s: %w", hs.Load.Raw, err)
		}
	}
	info, err := eng.Info(ctx)
	if err != nil {
		// No Docker there: the host's docker configurations are not_run,
		// its host ones run.
		return nil, engine.Info{}, siteUnavailable("%s configurations on SUT host %s (%s): %v", cfg.Runtime, hs.SUT.Raw, h.Hello.Facts.Hostname, err)
	}
	if info.Name == "" || info.Name == "default" {
		info.Name = "default@" + hs.SUT.Raw
	} else if info.Runtime == string(engine.RuntimeHost) {
		info.Name = "host@" + hs.SUT.Raw
	}
	s.mu.Lock()
	s.eng = he
	s.mu.Unlock()
	return he, info, nil
}

// sutEngine is the SUT host's engine for one configuration: each call
// goes to the live session, dialled again after a drop, except Ping, which
// reports the drop (the run in progress fails with it).
type sutEngine struct {
	set  *hostSet
	dest plan.Dest
	ref  agent.EngineRef
	// load, when set, is a load host other than the SUT: the services are
	// served where its packets arrive, only it gets in, and a container's
	// own address is routed to from there (path.go).
	load *plan.Dest

	mu    sync.Mutex
	paths map[string]*runPath // by run id
}

var _ engine.Engine = (*sutEngine)(nil)

func (e *sutEngine) get(ctx context.Context) (*remote.Engine, *remote.Host, error) {
	return e.set.engine(ctx, e.dest, e.ref)
}

func (e *sutEngine) Info(ctx context.Context) (engine.Info, error) {
	eng, _, err := e.get(ctx)
	if err != nil {
		return engine.Info{}, err
	}
	return eng.Info(ctx)
}

func (e *sutEngine) Ping(ctx context.Context) error {
	h := e.set.current(e.dest)
	if h == nil {
		return fmt.Errorf("%w: SUT host %s: the connection to its agent dropped", engine.ErrUnreachable, e.dest.Raw)
	}
	eng, _, err := e.set.engine(ctx, e.dest, e.ref)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrUnreachable, err)
	}
	return eng.Ping(ctx)
}

func (e *sutEngine) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	eng, _, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	if e.load == nil {
		return eng.Deploy(ctx, spec)
	}
	return e.deployReached(ctx, eng, spec)
}

func (e *sutEngine) Exec(ctx context.Context, t *engine.Target, service string, argv []string) (engine.ExecResult, error) {
	eng, _, err := e.get(ctx)
	if err != nil {
		return engine.ExecResult{}, err
	}
	return eng.Exec(ctx, t, service, argv)
}

func (e *sutEngine) Teardown(ctx context.Context, t *engine.Target) error {
	rerr := e.removeRoutes(ctx, t.RunID)
	eng, _, err := e.get(ctx)
	if err != nil {
		return errors.Join(rerr, fmt.Errorf("teardown of %s: SUT host %s: %w (its agent's watchdog tears the run down when the connection drops; `ctrperf clean --hosts` finds what a killed agent left)", t.RunID, e.dest.Raw, err))
	}
	return errors.Join(rerr, eng.Teardown(ctx, t))
}

func (e *sutEngine) Close(context.Context) error { return nil }

// observer samples where the system under test runs: the SUT host,
// through its agent, or this machine.
func (s *remoteHosts) observer(_ engine.Engine, t *engine.Target) Observer {
	if s.cfg.Hosts.SUT.Local() {
		return s.r.opt.Observers(t)
	}
	return &sutObserver{set: s.set(), dest: s.cfg.Hosts.SUT, key: t.RunID, t: t, created: time.Now()}
}

// sutObserver runs the samplers on the SUT host, their times counted
// from created, about when the run's observer clock started (the
// runner's obsStart), on this machine's clock.
type sutObserver struct {
	set     *hostSet
	dest    plan.Dest
	key     string
	t       *engine.Target
	o       *remote.Observer
	created time.Time
}

func (o *sutObserver) Start(ctx context.Context) error {
	h, err := o.set.host(ctx, o.dest, results.RoleSUT)
	if err != nil {
		return err
	}
	o.o = remote.NewObserver(h.Client, o.key, o.t).From(o.created)
	return o.o.Start(ctx)
}

func (o *sutObserver) Stop() *results.Series {
	if o.o == nil {
		return nil
	}
	return o.o.Stop()
}

// driver is the workload as the run drives it: here, or from the load
// host's agent, a remote driver of one generator, its latencies and
// durations measured there, on its monotonic clock; the measurement
// comes back with its histograms.
func (s *remoteHosts) driver(rn *run) workload.Workload {
	if s.cfg.Hosts.Load.Local() {
		return s.r.wl
	}
	return &fanOut{Workload: s.r.wl, cfg: s.cfg, runID: rn.id, n: 1, gens: &loadHost{site: s, dest: s.cfg.Hosts.Load}}
}

// loadHost is the load host's agent session as a remote driver's one
// generator.
type loadHost struct {
	site *remoteHosts
	dest plan.Dest
	h    *remote.Host
}

func (l *loadHost) start(ctx context.Context, gens []*generator) error {
	h, err := l.site.set().host(ctx, l.dest, results.RoleLoad)
	if err != nil {
		return fmt.Errorf("load host %s: %w", l.dest.Raw, err)
	}
	l.h = h
	// The session is the plan's, shared by the runs: nothing to close.
	gens[0] = &generator{k: 1, name: "load host " + l.dest.Raw, client: h.Client}
	return nil
}

func (l *loadHost) stop(context.Context, []*generator) {}

// describe says where the load came from, and the path it took to the
// SUT (path.go).
func (l *loadHost) describe(ctx context.Context, env workload.Env, m *results.Measurement, _ []*generator, _ *fanOutFacts) {
	m.Notes = append(m.Notes, fmt.Sprintf("load generated on %s (%s)", l.dest.Raw, l.h.Hello.Facts.Hostname))
	l.site.mu.Lock()
	he := l.site.eng
	l.site.mu.Unlock()
	if he != nil {
		he.recordPath(ctx, env.Target, m)
	}
}

// hosts names the hosts of a configuration's run in its record.
func (s *remoteHosts) hosts() *results.RunHosts {
	hs := s.cfg.Hosts
	name := func(d plan.Dest) *results.RunHost {
		if d.Local() {
			h, _ := os.Hostname()
			return &results.RunHost{Name: plan.LocalHost, Hostname: h}
		}
		if h := s.set().current(d); h != nil {
			rh := sshdest.RunHost(d, &h.Resolved)
			rh.Hostname = h.Hello.Facts.Hostname
			return rh
		}
		return &results.RunHost{Name: d.Raw}
	}
	return &results.RunHosts{SUT: name(hs.SUT), Load: name(hs.Load)}
}

// closeHosts ends the agent sessions and records the hosts in env.json.
func (r *runner) closeHosts(ctx context.Context) error {
	if r.hosts == nil {
		return nil
	}
	err := r.hosts.close(ctx)
	if infos := r.hosts.hostInfos(); len(infos) > 0 {
		err = errors.Join(err, writeEnvHosts(r.opt.Out, infos))
	}
	return err
}

// imageProvider is an EngineProvider that also gives the images a host
// lacks (Engines: its default engine's).
type imageProvider interface {
	hostImages() remote.ImageSource
}

func (e *Engines) hostImages() remote.ImageSource { return localImages{e} }

// Images are this machine's default engine's images for an engine
// elsewhere (a VM guest's Docker engine in tests), built from their
// recipes when missing, never pulled.
func (e *Engines) Images() remote.ImageSource { return e.hostImages() }

// localImages are this machine's default engine's images, built from
// their recipes when missing (never pulled), for a host that lacks them.
type localImages struct{ e *Engines }

func (l localImages) daemon(ctx context.Context) (*daemon.Daemon, error) {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.e.defaultDaemon(ctx)
}

func (l localImages) Resolve(ctx context.Context, refs []string) ([]agent.Image, error) {
	d, err := l.daemon(ctx)
	if err != nil {
		return nil, fmt.Errorf("images for the SUT host come from this machine's engine: %w", err)
	}
	if _, err := image.Ensure(ctx, d.Client(), refs...); err != nil {
		return nil, err
	}
	var out []agent.Image
	for _, ref := range refs {
		in, err := d.Client().ImageInspect(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		out = append(out, agent.Image{ID: in.ID, Refs: []string{ref}})
	}
	return out, nil
}

func (l localImages) Save(ctx context.Context, ids []string) (io.ReadCloser, error) {
	d, err := l.daemon(ctx)
	if err != nil {
		return nil, err
	}
	// By reference, so the archive carries the tags the host needs.
	return daemon.SaveArchive(ctx, d.Client(), ids...)
}

// writeEnvHosts records the plan's hosts in dir's env.json, beside what is
// there.
func writeEnvHosts(dir string, hosts []results.HostInfo) error {
	path := filepath.Join(dir, EnvFile)
	doc, err := readEnvDoc(path)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		i := slices.IndexFunc(doc.Hosts, func(o results.HostInfo) bool { return o.Name == h.Name })
		if i >= 0 {
			doc.Hosts[i] = h
		} else {
			doc.Hosts = append(doc.Hosts, h)
		}
	}
	return writeJSON(path, doc)
}

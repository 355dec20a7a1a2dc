package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/observe"
	"ctrperf/internal/owner"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// Engines hands out the host's engines (bench.Engines satisfies it).
type Engines interface {
	Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error)
	Close(ctx context.Context) error
}

// Observer samples the host (observe.Observer satisfies it).
type Observer interface {
	Start(ctx context.Context) error
	Stop() *results.Series
}

// Images loads images into the host's Docker engine.
type Images interface {
	// Missing are the images of want the engine lacks (or whose
	// references point at another image).
	Missing(ctx context.Context, want []Image) ([]Image, error)
	// Load reads a `docker save` archive into the engine.
	Load(ctx context.Context, archive io.Reader) error
}

// Options are what the agent acts with on its host; cmd/ctrperf wires the
// real ones, tests fakes. Nil fields refuse their methods with a reason.
type Options struct {
	// Facts describe the host (bench.GatherEnv).
	Facts func(ctx context.Context) results.Machine
	// Docker probes the host's own Docker engine (never starting one): its
	// info, or why there is none.
	Docker func(ctx context.Context) (*results.EngineInfo, error)
	// Engines opens the host's engines; the docker runtime only when
	// Docker found an engine.
	Engines Engines
	// Kernel is where the host's /proc and cgroups are read for
	// observe.start's pods (the zero FS: the real mounts; an agent pod
	// reads its node's, mounted at other paths).
	Kernel kernel.FS
	// Build is the sha256 of the agent's own binary (selfbin.Read), which
	// a hello that names the caller's build must match; nil: no check.
	Build func() (string, error)
	// FrameSize is the protocol's frame size (agent.FrameSize when 0;
	// the caller's must be the same). Tests take it small.
	FrameSize int
	// Observer makes the sampler set of observe.start.
	Observer func(cs []observe.Container, interval time.Duration, onSample func(results.Sample)) Observer
	// Workload resolves a workload by name (workload.Get).
	Workload func(name string) (workload.Workload, error)
	// Images moves images into the host's engine.
	Images func(ctx context.Context) (Images, error)
	// Disks opens the host's block devices by serial
	// (images.load.disk); nil refuses that method.
	Disks *Disks
	// Clean is `ctrperf clean` on the host.
	Clean func(ctx context.Context, p CleanParams) (CleanResult, error)
	// Net is what a two-host plan asks of the host's network (the real
	// path between load host and SUT); nil refuses those methods.
	Net Net
	// Self is the path of the ctrperf binary on this host (selfbin.Path),
	// which SelfBinary in a service's argv stands for.
	Self func() (string, error)
	// Owners is where the agent records itself as the owner of the runs it
	// deploys (owner.DefaultDir); nil keeps no record.
	Owners *owner.Dir
	// TeardownTimeout bounds the watchdog's teardown (default 2 min).
	TeardownTimeout time.Duration
	// Log hears what the agent does on its own (the watchdog); nil: stderr.
	Log io.Writer
}

// Net is the host's network as a two-host plan uses it (engine.HostNet).
type Net interface {
	// Source is the host's address toward to, and its device.
	Source(to netip.Addr) (netip.Addr, string, error)
	// AddRoute and RemoveRoutes manage a run's routes on a load host.
	AddRoute(runID string, r engine.RunRoute) error
	RemoveRoutes(runID string) ([]string, error)
	// AdmitCounts reads a run's admit chain on a SUT.
	AdmitCounts(ctx context.Context, runID string) (engine.AdmitCounts, error)
}

// KindAgent is the owner-record kind of an agent's session.
const KindAgent = owner.KindAgent

// ErrHeartbeat ends a session whose caller stopped sending.
var ErrHeartbeat = errors.New("no message from ctrperf within the heartbeat timeout")

// session is one caller's: what it deployed, sampled and drives, all of it
// released when the session ends however it ends.
type session struct {
	opt  Options
	conn *Conn
	ctx  context.Context

	mu         sync.Mutex
	hello      bool
	heartbeat  time.Duration
	owner      *owner.Owner
	deployed   map[string]*deployment
	routes     map[string]bool // runs with routes on this host
	observers  map[string]Observer
	loads      map[string]*imageLoad
	docker     *results.EngineInfo
	shutdownID uint64
	dockerErr  error
	wg         sync.WaitGroup
}

type deployment struct {
	ref    EngineRef
	eng    engine.Engine
	target *engine.Target
}

// Serve runs one session over r and w until the caller shuts it down, the
// stream ends, the heartbeats stop (after hello asked for them) or ctx
// ends; then everything the session deployed is torn down, its samplers
// stopped, its engines closed and its owner record released. It returns
// why the session ended (nil after shutdown or the end of the stream).
func Serve(ctx context.Context, r io.Reader, w io.Writer, opt Options) error {
	if opt.Log == nil {
		opt.Log = os.Stderr
	}
	if opt.TeardownTimeout <= 0 {
		opt.TeardownTimeout = 2 * time.Minute
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := &arrivals{r: r, since: time.Now()}
	s := &session{opt: opt, conn: NewConn(in, w, WithFrameSize(opt.FrameSize)), ctx: sctx, deployed: map[string]*deployment{}, routes: map[string]bool{},
		observers: map[string]Observer{}, loads: map[string]*imageLoad{}}
	why := s.loop(sctx, in)
	cancel()
	s.wg.Wait()
	if why != nil {
		fmt.Fprintf(opt.Log, "ctrperf agent: %v: tearing down the session\n", why)
	}
	tctx, tcancel := lifecycle.Detached(ctx, opt.TeardownTimeout)
	defer tcancel()
	s.release(tctx)
	if s.shutdownID != 0 {
		_ = s.conn.Send(&Message{ID: s.shutdownID, Result: Encode(struct{}{})})
	}
	if errors.Is(why, io.EOF) || errors.Is(why, errShutdown) {
		return nil
	}
	return why
}

var errShutdown = errors.New("shutdown")

// arrivals reads the caller's stream and notes when its bytes last came:
// the watchdog judges the caller alive on bytes, not on whole lines, so a
// long line on a slow link (an image chunk at 1 Mbit/s) is proof of life
// while it arrives.
type arrivals struct {
	r     io.Reader
	since time.Time    // monotonic base of last
	last  atomic.Int64 // ns after since of the last read that brought bytes
}

func (a *arrivals) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(int64(time.Since(a.since)))
	}
	return n, err
}

// idle is how long no byte came.
func (a *arrivals) idle() time.Duration {
	return time.Since(a.since) - time.Duration(a.last.Load())
}

// loop reads requests and starts each in its own goroutine; the
// watchdog's deadline moves with every byte that arrives.
func (s *session) loop(ctx context.Context, in *arrivals) error {
	msgs := make(chan *Message)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := s.conn.Receive()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Image chunks are answered one at a time in the order they came: the
	// sender keeps a few in flight (remote.Engine), and each chunk's data
	// follows the one before it into the engine's load.
	chunks := make(chan *Message, ChunksInFlight*4)
	defer close(chunks)
	go func() {
		for m := range chunks {
			s.reply(m, s.dispatch(ctx, m))
			s.wg.Done()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("ctrperf went away (end of its stream): %w", io.EOF)
			}
			return fmt.Errorf("read from ctrperf: %w", err)
		case <-timer.C:
			hb := s.heartbeatTimeout()
			if idle := in.idle(); idle < hb {
				timer.Reset(hb - idle) // a line still arriving
				continue
			}
			return fmt.Errorf("%w (%s)", ErrHeartbeat, hb)
		case m := <-msgs:
			if hb := s.heartbeatTimeout(); hb > 0 {
				timer.Reset(hb)
			}
			if m.Method == MethodShutdown {
				// Answered once everything is torn down (Serve).
				s.shutdownID = m.ID
				return errShutdown
			}
			if m.Method == "" {
				continue // a response or event: the agent asks nothing
			}
			if m.Method == MethodHello {
				// Synchronous: nothing else may run before it.
				s.reply(m, s.doHello(ctx, m))
				if hb := s.heartbeatTimeout(); hb > 0 {
					timer.Reset(hb)
				}
				continue
			}
			s.wg.Add(1)
			if m.Method == MethodImagesLoad {
				select {
				case chunks <- m:
				default: // never waits: the watchdog and the other requests go on
					s.reply(m, fail(&Error{Code: CodeBadParams, Message: fmt.Sprintf("more than %d image chunks in flight", cap(chunks))}))
					s.wg.Done()
				}
				continue
			}
			go func() {
				defer s.wg.Done()
				s.reply(m, s.dispatch(ctx, m))
			}()
		}
	}
}

func (s *session) heartbeatTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeat
}

// outcome is a method's result or error.
type outcome struct {
	v   any
	err error
}

func ok(v any) outcome       { return outcome{v: v} }
func fail(err error) outcome { return outcome{err: err} }
func (s *session) reply(m *Message, o outcome) {
	if o.err != nil {
		_ = s.conn.Send(&Message{ID: m.ID, Error: asError(o.err)})
		return
	}
	v := o.v
	if v == nil {
		v = struct{}{}
	}
	_ = s.conn.Send(&Message{ID: m.ID, Result: Encode(v)})
}

// asError gives err its code: the engine's absence, a full disk, else failed.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Code: e.Code, Message: err.Error()}
	}
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device") {
		return &Error{Code: CodeDiskFull, Message: err.Error()}
	}
	return &Error{Code: CodeFailed, Message: err.Error()}
}

// event streams data under request id.
func (s *session) event(id uint64, name string, data any) {
	_ = s.conn.Send(&Message{ID: id, Event: name, Data: Encode(data)})
}

func (s *session) dispatch(ctx context.Context, m *Message) outcome {
	s.mu.Lock()
	hello := s.hello
	s.mu.Unlock()
	if !hello {
		return fail(&Error{Code: CodeVersion, Message: fmt.Sprintf("%s before hello: the first request must be hello (protocol version %d)", m.Method, Version)})
	}
	switch m.Method {
	case MethodClock:
		return ok(ClockResult{UnixNano: time.Now().UnixNano()})
	case MethodHeartbeat:
		return ok(nil)
	case MethodPing:
		var p EngineRef
		return with(m, &p, func() outcome { return s.ping(ctx, p) })
	case MethodInfo:
		var p EngineRef
		return with(m, &p, func() outcome {
			_, info, err := s.engineFor(ctx, p)
			if err != nil {
				return fail(err)
			}
			return ok(info)
		})
	case MethodDeploy:
		var p DeployParams
		return with(m, &p, func() outcome { return s.deploy(ctx, p) })
	case MethodTeardown:
		var p TeardownParams
		return with(m, &p, func() outcome { return fail(s.teardown(ctx, p)) })
	case MethodExec:
		var p ExecParams
		return with(m, &p, func() outcome { return s.exec(ctx, p) })
	case MethodObserveStart:
		var p ObserveParams
		return with(m, &p, func() outcome { return s.observeStart(ctx, m.ID, p) })
	case MethodObserveStop:
		var p ObserveStop
		return with(m, &p, func() outcome { return s.observeStop(p) })
	case MethodDrive:
		var p DriveParams
		return with(m, &p, func() outcome { return s.drive(ctx, m.ID, p) })
	case MethodImagesMissing:
		var p ImagesParams
		return with(m, &p, func() outcome { return s.imagesMissing(ctx, p) })
	case MethodImagesLoad:
		var p ImageChunk
		return with(m, &p, func() outcome { return s.imageChunk(ctx, p) })
	case MethodImagesLoadDisk:
		var p ImageDisk
		return with(m, &p, func() outcome { return s.imageDisk(ctx, p) })
	case MethodClean:
		var p CleanParams
		return with(m, &p, func() outcome { return s.clean(ctx, p) })
	case MethodSource:
		var p SourceParams
		return with(m, &p, func() outcome { return s.source(ctx, p) })
	case MethodRouteAdd:
		var p RouteParams
		return with(m, &p, func() outcome { return fail(s.routeAdd(p)) })
	case MethodRouteRemove:
		var p RunParams
		return with(m, &p, func() outcome { return fail(s.routeRemove(p.RunID)) })
	case MethodDialCheck:
		var p DialParams
		return with(m, &p, func() outcome { return fail(dialCheck(ctx, p)) })
	case MethodAdmitCounts:
		var p RunParams
		return with(m, &p, func() outcome { return s.admitCounts(ctx, p) })
	}
	return fail(&Error{Code: CodeUnknownMethod, Message: fmt.Sprintf("ctrperf agent (protocol %d) has no method %q", Version, m.Method)})
}

// with decodes m's params into p and runs f.
func with(m *Message, p any, f func() outcome) outcome {
	if err := Decode(m.Params, p); err != nil {
		return fail(&Error{Code: CodeBadParams, Message: fmt.Sprintf("%s: params: %v", m.Method, err)})
	}
	return f()
}

func (s *session) doHello(ctx context.Context, m *Message) outcome {
	var p HelloParams
	if err := Decode(m.Params, &p); err != nil {
		return fail(&Error{Code: CodeBadParams, Message: "hello: " + err.Error()})
	}
	if p.Version != Version {
		return fail(&Error{Code: CodeVersion, Message: fmt.Sprintf("ctrperf speaks agent protocol %d, this agent %d: the agent is another ctrperf than its caller", p.Version, Version)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hello {
		return fail(&Error{Code: CodeFailed, Message: "hello twice in one session"})
	}
	res := HelloResult{Version: Version, PID: os.Getpid()}
	if s.opt.Build != nil {
		// The agent says its build on every hello and refuses a caller
		// of another: the same protocol version does not make the same
		// ctrperf (an agent pod's binary comes from an image built
		// earlier, a host's cached copy may have been replaced).
		own, err := s.opt.Build()
		if err != nil {
			return fail(fmt.Errorf("hello: this agent's own binary: %w", err))
		}
		if p.Build != "" && own != p.Build {
			return fail(&Error{Code: CodeVersion, Message: fmt.Sprintf("this agent is another ctrperf build (%s) than its caller (%s), though both speak protocol %d",
				short(own), short(p.Build), Version)})
		}
		res.Build = own
	}
	res.Executable, _ = os.Executable()
	if s.opt.Self != nil {
		if p, err := s.opt.Self(); err == nil {
			res.Executable = p
		}
	}
	if s.opt.Facts != nil {
		res.Facts = s.opt.Facts(ctx)
	}
	if s.opt.Docker != nil {
		s.docker, s.dockerErr = s.opt.Docker(ctx)
	} else {
		s.dockerErr = errors.New("this agent has no Docker access")
	}
	res.Engine = s.docker
	if s.dockerErr != nil {
		res.EngineError = s.dockerErr.Error()
	}
	if s.opt.Owners != nil {
		session := p.Session
		if session == "" {
			session = fmt.Sprintf("pid%d", os.Getpid())
		}
		o, err := s.opt.Owners.Acquire(owner.Record{Kind: KindAgent, Session: fmt.Sprintf("%s-%d", session, os.Getpid())})
		if err != nil {
			return fail(fmt.Errorf("owner record on %s: %w", res.Facts.Hostname, err))
		}
		s.owner = o
	}
	s.heartbeat = p.Heartbeat
	s.hello = true
	return ok(res)
}

// engineFor opens the engine of ref; the docker runtime only on a host
// whose own engine answered hello's probe (a remote host never gets a
// private engine started for a plain docker configuration).
func (s *session) engineFor(ctx context.Context, ref EngineRef) (engine.Engine, engine.Info, error) {
	if s.opt.Engines == nil {
		return nil, engine.Info{}, &Error{Code: CodeNoEngine, Message: "this agent deploys nothing"}
	}
	if ref.Runtime != engine.RuntimeHost {
		s.mu.Lock()
		derr := s.dockerErr
		s.mu.Unlock()
		if derr != nil {
			return nil, engine.Info{}, &Error{Code: CodeNoEngine, Message: fmt.Sprintf("no Docker engine on this host: %v", derr)}
		}
	}
	eng, info, err := s.opt.Engines.Engine(ctx, ref.Runtime, ref.Engine)
	if err != nil {
		return nil, engine.Info{}, &Error{Code: CodeNoEngine, Message: err.Error()}
	}
	return eng, info, nil
}

func (s *session) ping(ctx context.Context, ref EngineRef) outcome {
	eng, _, err := s.engineFor(ctx, ref)
	if err != nil {
		return fail(err)
	}
	return fail(eng.Ping(ctx))
}

// selfArgv puts this host's ctrperf where the caller wrote SelfBinary.
func (s *session) selfArgv(spec *engine.DeploySpec) error {
	var self string
	for i := range spec.Services {
		sv := &spec.Services[i]
		for _, argv := range [][]string{sv.HostCommand, sv.Command, sv.Entrypoint} {
			for j, a := range argv {
				if !strings.Contains(a, SelfBinary) {
					continue
				}
				if self == "" {
					if s.opt.Self == nil {
						return errors.New("the agent does not know its own binary")
					}
					p, err := s.opt.Self()
					if err != nil {
						return err
					}
					self = p
				}
				argv[j] = strings.ReplaceAll(a, SelfBinary, self)
			}
		}
		if sv.Build != nil {
			return fmt.Errorf("service %q is built from a Dockerfile context on ctrperf's machine: load its image on this host instead", sv.Name)
		}
	}
	return nil
}

func (s *session) deploy(ctx context.Context, p DeployParams) outcome {
	if p.Spec.RunID == "" {
		return fail(&Error{Code: CodeBadParams, Message: "deploy without a run id"})
	}
	if err := s.selfArgv(&p.Spec); err != nil {
		return fail(fmt.Errorf("deploy %s: %w", p.Spec.RunID, err))
	}
	eng, info, err := s.engineFor(ctx, p.EngineRef)
	if err != nil {
		return fail(err)
	}
	s.mu.Lock()
	if s.owner != nil {
		if err := s.owner.Add(p.Spec.RunID); err != nil {
			s.mu.Unlock()
			return fail(fmt.Errorf("owner record: %w", err))
		}
	}
	d := &deployment{ref: p.EngineRef, eng: eng}
	s.deployed[p.Spec.RunID] = d
	s.mu.Unlock()
	t, err := eng.Deploy(ctx, p.Spec)
	if t == nil {
		t = &engine.Target{RunID: p.Spec.RunID, Runtime: p.Runtime, Network: p.Spec.Network}
	}
	s.mu.Lock()
	d.target = t
	s.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	return ok(DeployResult{Target: WireTarget(t), Info: info})
}

func (s *session) teardown(ctx context.Context, p TeardownParams) error {
	s.mu.Lock()
	d := s.deployed[p.RunID]
	delete(s.deployed, p.RunID)
	s.mu.Unlock()
	if d == nil {
		// Another session's (one whose connection dropped): found by run id.
		eng, _, err := s.engineFor(ctx, p.EngineRef)
		if err != nil {
			return err
		}
		return eng.Teardown(ctx, &engine.Target{RunID: p.RunID, Runtime: p.Runtime})
	}
	return d.release(ctx)
}

func (d *deployment) release(ctx context.Context) error {
	if d.target == nil {
		return nil
	}
	return d.eng.Teardown(ctx, d.target)
}

func (s *session) exec(ctx context.Context, p ExecParams) outcome {
	s.mu.Lock()
	d := s.deployed[p.RunID]
	s.mu.Unlock()
	if d == nil || d.target == nil {
		return fail(fmt.Errorf("exec in %s: run %s is not deployed by this session", p.Service, p.RunID))
	}
	r, err := d.eng.Exec(ctx, d.target, p.Service, p.Argv)
	if err != nil {
		return fail(err)
	}
	return ok(r)
}

func (s *session) observeStart(ctx context.Context, id uint64, p ObserveParams) outcome {
	if s.opt.Observer == nil {
		return fail(errors.New("this agent has no samplers"))
	}
	if p.Key == "" {
		return fail(&Error{Code: CodeBadParams, Message: "observe.start without a key"})
	}
	cs := p.Containers
	if len(p.Pods) > 0 {
		pods, err := s.podCgroups(p.Pods)
		if err != nil {
			return fail(err)
		}
		cs = append(append([]observe.Container(nil), cs...), pods...)
	}
	o := s.opt.Observer(cs, p.Interval, func(smp results.Sample) { s.event(id, EventSample, smp) })
	start := time.Now()
	if err := o.Start(s.ctx); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	if old := s.observers[p.Key]; old != nil {
		old.Stop()
	}
	s.observers[p.Key] = o
	s.mu.Unlock()
	return ok(ObserveStarted{UnixNano: start.UnixNano()})
}

// podCgroups finds the pods' cgroups on this node (ResolvePods), below
// the kubepods of the agent's own cgroup.
func (s *session) podCgroups(pods []PodCgroup) ([]observe.Container, error) {
	fs := s.opt.Kernel
	self, err := kernel.ProcCgroups(fs.Proc(), os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("observe pods: the agent's own cgroup: %w", err)
	}
	l := fs.Cgroups()
	root, err := KubepodsRoot(l, self)
	if err != nil {
		return nil, fmt.Errorf("observe pods: %w", err)
	}
	return ResolvePods(l, root, pods)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (s *session) observeStop(p ObserveStop) outcome {
	s.mu.Lock()
	o := s.observers[p.Key]
	delete(s.observers, p.Key)
	s.mu.Unlock()
	if o == nil {
		return fail(fmt.Errorf("no sampler set %q", p.Key))
	}
	return ok(o.Stop())
}

// noEngine is the load host's view of a deployment that lives elsewhere:
// a driver that must exec in a service cannot do so from here.
type noEngine struct{}

func (noEngine) Info(context.Context) (engine.Info, error) { return engine.Info{}, nil }
func (noEngine) Ping(context.Context) error                { return nil }
func (noEngine) Deploy(context.Context, engine.DeploySpec) (*engine.Target, error) {
	return nil, errors.New("the load host deploys nothing")
}
func (noEngine) Exec(_ context.Context, _ *engine.Target, service string, _ []string) (engine.ExecResult, error) {
	return engine.ExecResult{}, fmt.Errorf("exec in service %q: the service runs on the SUT host, not on the load host (this workload's driver runs tools in its services: give it no load host)", service)
}
func (noEngine) Teardown(context.Context, *engine.Target) error { return nil }
func (noEngine) Close(context.Context) error                    { return nil }

func (s *session) drive(ctx context.Context, id uint64, p DriveParams) outcome {
	get := s.opt.Workload
	if get == nil {
		get = workload.Get
	}
	w, err := get(p.Workload)
	if err != nil {
		return fail(err)
	}
	cfg, err := workload.Decoded(w, p.Knobs, p.Resources)
	if err != nil {
		return fail(&Error{Code: CodeBadParams, Message: fmt.Sprintf("workload %s: knobs: %v", p.Workload, err)})
	}
	env := workload.Env{Engine: noEngine{}, Target: p.Target.Engine(), Config: cfg, Window: p.Window,
		Started:    func() { s.event(id, EventStarted, Started{UnixNano: time.Now().UnixNano()}) },
		Progress:   func(msg string) { s.event(id, EventProgress, msg) },
		LoadCPUSet: p.LoadCPUSet}
	if err := waitStart(ctx, p.StartAtUnixNano); err != nil {
		return fail(err)
	}
	m, err := w.Drive(ctx, env)
	if err != nil {
		return fail(err)
	}
	if m == nil {
		return fail(errors.New("the workload returned no measurement"))
	}
	return ok(m)
}

// maxStartAhead bounds how far ahead a drive's barrier may be: further
// is a caller's clock gone wrong, not a barrier.
const maxStartAhead = 5 * time.Minute

// waitStart waits for a drive's barrier (DriveParams.StartAtUnixNano) on
// this host's wall clock.
func waitStart(ctx context.Context, at int64) error {
	if at == 0 {
		return nil
	}
	d := time.Until(time.Unix(0, at))
	if d > maxStartAhead {
		return &Error{Code: CodeBadParams, Message: fmt.Sprintf("drive: start_at_unix_ns is %s ahead of this host's clock (at most %s)", d.Round(time.Millisecond), maxStartAhead)}
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) clean(ctx context.Context, p CleanParams) outcome {
	if s.opt.Clean == nil {
		return fail(errors.New("this agent does not clean"))
	}
	r, err := s.opt.Clean(ctx, p)
	if err != nil {
		return fail(err)
	}
	return ok(r)
}

// release ends everything of the session: samplers, image loads,
// deployments and routes, engines, the owner record.
func (s *session) release(ctx context.Context) {
	s.mu.Lock()
	obs, deps, loads, routes := s.observers, s.deployed, s.loads, s.routes
	s.observers, s.deployed, s.loads, s.routes = map[string]Observer{}, map[string]*deployment{}, map[string]*imageLoad{}, map[string]bool{}
	own := s.owner
	s.owner = nil
	s.mu.Unlock()
	for _, o := range obs {
		o.Stop()
	}
	for _, l := range loads {
		l.abort()
	}
	for id, d := range deps {
		if err := d.release(ctx); err != nil {
			fmt.Fprintf(s.opt.Log, "ctrperf agent: teardown of run %s: %v (left to `ctrperf clean` on this host)\n", id, err)
		} else {
			fmt.Fprintf(s.opt.Log, "ctrperf agent: run %s torn down\n", id)
		}
	}
	for id := range routes {
		if _, err := s.opt.Net.RemoveRoutes(id); err != nil {
			fmt.Fprintf(s.opt.Log, "ctrperf agent: routes of run %s: %v (left to `ctrperf clean` on this host)\n", id, err)
		}
	}
	if s.opt.Engines != nil {
		if err := s.opt.Engines.Close(ctx); err != nil {
			fmt.Fprintf(s.opt.Log, "ctrperf agent: close engines: %v\n", err)
		}
	}
	if own != nil {
		if err := own.Release(); err != nil {
			fmt.Fprintf(s.opt.Log, "ctrperf agent: owner record: %v\n", err)
		}
	}
}

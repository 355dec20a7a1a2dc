package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/observe"
	"ctrperf/internal/owner"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// fakeEngine records what the agent asked of it.
type fakeEngine struct {
	mu        sync.Mutex
	deployed  []engine.DeploySpec
	torn      []string
	deployErr error
	endpoint  string
}

func (f *fakeEngine) Info(context.Context) (engine.Info, error) {
	return engine.Info{Runtime: "docker", Name: "fake"}, nil
}
func (f *fakeEngine) Ping(context.Context) error { return nil }
func (f *fakeEngine) Deploy(_ context.Context, s engine.DeploySpec) (*engine.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deployed = append(f.deployed, s)
	if f.deployErr != nil {
		return nil, f.deployErr
	}
	t := &engine.Target{RunID: s.RunID, Runtime: "docker", Network: s.Network,
		Containers: []engine.Container{{ID: "c1", Name: "ctrperf-" + s.RunID, Service: "app", CgroupPath: "/docker/c1"}}}
	if f.endpoint != "" {
		t.Endpoints = []engine.Endpoint{{Service: "app", Port: 8080, Addr: f.endpoint}}
	}
	return t, nil
}
func (f *fakeEngine) Exec(_ context.Context, t *engine.Target, svc string, argv []string) (engine.ExecResult, error) {
	return engine.ExecResult{Stdout: []byte(t.RunID + " " + svc + " " + strings.Join(argv, " "))}, nil
}
func (f *fakeEngine) Teardown(_ context.Context, t *engine.Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.torn = append(f.torn, t.RunID)
	return nil
}
func (f *fakeEngine) Close(context.Context) error { return nil }

func (f *fakeEngine) tornDown() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.torn...)
}

type fakeEngines struct {
	eng    *fakeEngine
	closed int
}

func (f *fakeEngines) Engine(_ context.Context, rt engine.Runtime, _ engine.EngineSpec) (engine.Engine, engine.Info, error) {
	return f.eng, engine.Info{Runtime: string(rt), Name: "fake"}, nil
}
func (f *fakeEngines) Close(context.Context) error { f.closed++; return nil }

type fakeObserver struct {
	onSample func(results.Sample)
	stopped  bool
	series   *results.Series
}

func (o *fakeObserver) Start(context.Context) error {
	o.onSample(results.Sample{T: 1})
	return nil
}
func (o *fakeObserver) Stop() *results.Series {
	o.stopped = true
	if o.series != nil {
		return o.series
	}
	return &results.Series{IntervalS: 1, Samples: []results.Sample{{T: 1}, {T: 2}}}
}

// fakeWorkload measures one operation with a histogram and says when its
// window starts.
type fakeWorkload struct{}

func (fakeWorkload) Name() string { return "fake" }
func (fakeWorkload) Decode(k workload.Knobs) (any, any, error) {
	if _, bad := k.Load["bogus"]; bad {
		return nil, nil, errors.New("load.bogus: unknown knob")
	}
	return nil, k.Load["rate"], nil
}
func (fakeWorkload) Services(workload.Config) ([]engine.Service, error) { return nil, nil }
func (fakeWorkload) Drive(_ context.Context, env workload.Env) (*results.Measurement, error) {
	if _, err := env.Engine.Exec(context.Background(), env.Target, "app", []string{"true"}); err == nil {
		return nil, errors.New("the load host's engine executed in a service it does not hold")
	}
	env.Started()
	env.Progress("step 1")
	h := results.NewHistogram()
	for i := int64(1); i <= 100; i++ {
		_ = h.RecordValue(i * 1000)
	}
	enc, err := results.EncodeHistogram(h)
	if err != nil {
		return nil, err
	}
	ep, err := env.Target.Endpoint("app", 0)
	if err != nil {
		return nil, err
	}
	return &results.Measurement{Operations: map[string]*results.Operation{"get": {Count: 100, Histogram: enc}},
		Metrics: map[string]float64{"rate": env.Config.Load.(float64)}, Notes: []string{"dialed " + ep.Addr}}, nil
}

type fakeImages struct {
	mu   sync.Mutex
	have map[string]bool
	got  bytes.Buffer
}

func (f *fakeImages) Missing(_ context.Context, want []agent.Image) ([]agent.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m []agent.Image
	for _, w := range want {
		if !f.have[w.ID] {
			m = append(m, w)
		}
	}
	return m, nil
}
func (f *fakeImages) Load(_ context.Context, r io.Reader) error {
	b, err := io.ReadAll(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got.Write(b)
	if strings.HasPrefix(string(b), "ID:") {
		f.have[strings.TrimPrefix(string(b[:strings.IndexByte(string(b), '\n')]), "ID:")] = true
	}
	return err
}

type harness struct {
	engines *fakeEngines
	obs     *fakeObserver
	images  *fakeImages
	owners  owner.Dir
	done    chan error
	c       *remote.Client
	toAgent io.WriteCloser
	log     bytes.Buffer
	// series is what the samplers' Stop returns (nil: two samples).
	series *results.Series
}

// setup changes a harness before its hello: the agent's options, the
// client's link to the agent.
type setup struct {
	opt  func(*agent.Options)
	link func(io.Writer) io.Writer
}

// throttled is a link of rate bytes a second: it passes writes on in
// pieces of 4 KiB, each after its time.
type throttled struct {
	w    io.Writer
	rate int
}

func (t throttled) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		p := b[:min(len(b), 4<<10)]
		time.Sleep(time.Duration(len(p)) * time.Second / time.Duration(t.rate))
		m, err := t.w.Write(p)
		n += m
		if err != nil {
			return n, err
		}
		b = b[len(p):]
	}
	return n, nil
}

// startWith is start with the agent's options changed by set.
func startWith(t *testing.T, set func(*agent.Options)) *harness {
	t.Helper()
	return start(t, nil, -1, remote.ClientOptions{}, setup{opt: set})
}

// start runs an agent over in-memory pipes and says hello to it.
func start(t testing.TB, docker error, heartbeat time.Duration, co remote.ClientOptions, with ...setup) *harness {
	t.Helper()
	h := &harness{engines: &fakeEngines{eng: &fakeEngine{}}, images: &fakeImages{have: map[string]bool{}},
		owners: owner.Dir{Path: t.TempDir()}, done: make(chan error, 1)}
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	h.toAgent = cw
	opt := agent.Options{
		Facts: func(context.Context) results.Machine {
			return results.Machine{Hostname: "far", Kernel: "6.1", Machine: "x86_64", CPUs: 4, BootID: "b00t"}
		},
		Docker: func(context.Context) (*results.EngineInfo, error) {
			if docker != nil {
				return nil, docker
			}
			return &results.EngineInfo{Runtime: "docker", Name: "default", Version: "28"}, nil
		},
		Engines: h.engines,
		Observer: func(cs []observe.Container, _ time.Duration, on func(results.Sample)) agent.Observer {
			h.obs = &fakeObserver{onSample: on, series: h.series}
			return h.obs
		},
		Workload: func(name string) (workload.Workload, error) {
			if name != "fake" {
				return nil, fmt.Errorf("unknown workload %q", name)
			}
			return fakeWorkload{}, nil
		},
		Images: func(context.Context) (agent.Images, error) { return h.images, nil },
		Self:   func() (string, error) { return "/far/cache/ctrperf", nil },
		Owners: &h.owners,
		Log:    &h.log,
	}
	var link io.Writer = cw
	for _, w := range with {
		if w.opt != nil {
			w.opt(&opt)
		}
		if w.link != nil {
			link = w.link(link)
		}
	}
	go func() {
		err := agent.Serve(context.Background(), ar, aw, opt)
		aw.Close()
		h.done <- err
	}()
	co.Name, co.Session, co.Closer = "far", "plan-abcd", cw
	if co.Heartbeat == 0 {
		co.Heartbeat = heartbeat
	}
	c, err := remote.NewClient(context.Background(), cr, link, co)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	h.c = c
	return h
}

func (h *harness) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not end its session")
		return nil
	}
}

func TestHelloFactsAndClock(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	if h.c.Hello.Version != agent.Version || h.c.Hello.Facts.Hostname != "far" || h.c.Hello.Facts.BootID != "b00t" {
		t.Errorf("hello = %+v", h.c.Hello)
	}
	if h.c.Hello.Engine == nil || h.c.Hello.Engine.Version != "28" {
		t.Errorf("engine = %+v", h.c.Hello.Engine)
	}
	// One process, one clock: the offset is within the round trip.
	if off, rtt := h.c.Clock.OffsetMs, h.c.Clock.RTTMs; rtt <= 0 || off > rtt || off < -rtt || h.c.Clock.Samples != 8 {
		t.Errorf("clock = %+v: want |offset| within the round trip", h.c.Clock)
	}
	// The owner record names the agent while the session lives.
	live, err := h.owners.Live(agent.KindAgent)
	if err != nil || len(live) != 1 || !strings.HasPrefix(live[0].Session, "plan-abcd-") {
		t.Errorf("owner records = %+v, %v", live, err)
	}
	if err := h.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.wait(t); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if live, _ := h.owners.Live(agent.KindAgent); len(live) != 0 {
		t.Errorf("owner record left after the session: %+v", live)
	}
}

func TestHelloRefusesAnotherVersion(t *testing.T) {
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	go func() { _ = agent.Serve(context.Background(), ar, aw, agent.Options{Log: io.Discard}); aw.Close() }()
	conn := agent.NewConn(cr, cw)
	if err := conn.Send(&agent.Message{ID: 1, Method: agent.MethodHello, Params: agent.Encode(agent.HelloParams{Version: agent.Version + 1})}); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != agent.CodeVersion || !strings.Contains(m.Error.Message, fmt.Sprint(agent.Version+1)) {
		t.Errorf("answer = %+v: want a version error naming both versions", m.Error)
	}
	// Nothing else before a successful hello.
	_ = conn.Send(&agent.Message{ID: 2, Method: agent.MethodClock})
	if m, _ = conn.Receive(); m.Error == nil || m.Error.Code != agent.CodeVersion {
		t.Errorf("clock before hello = %+v", m)
	}
	cw.Close()
}

func TestDeployExecTeardown(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	spec := engine.DeploySpec{RunID: "plan-abcd-001", Network: engine.NetworkHost,
		Services: []engine.Service{{Name: "app", HostCommand: []string{agent.SelfBinary, "__ticketd", "--listen", "x"}}}}
	tg, err := eng.Deploy(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.engines.eng.deployed[0].Services[0].HostCommand[0]; got != "/far/cache/ctrperf" {
		t.Errorf("host command runs %q: want the agent's own binary", got)
	}
	if len(tg.Containers) != 1 || tg.Containers[0].CgroupPath != "/docker/c1" {
		t.Errorf("target = %+v", tg)
	}
	r, err := eng.Exec(context.Background(), tg, "app", []string{"echo", "hi"})
	if err != nil || string(r.Stdout) != "plan-abcd-001 app echo hi" {
		t.Errorf("exec = %q, %v", r.Stdout, err)
	}
	// The run is the agent's while it lives: its owner record says so.
	live, _ := h.owners.Live(agent.KindAgent)
	if len(live) != 1 || !live[0].Record.Owns("plan-abcd-001") {
		t.Errorf("owner record does not hold the run: %+v", live)
	}
	if err := eng.Teardown(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	if got := h.engines.eng.tornDown(); len(got) != 1 || got[0] != "plan-abcd-001" {
		t.Errorf("torn down %v", got)
	}
}

func TestNoDockerOnTheHost(t *testing.T) {
	h := start(t, errors.New("docker engine at unix:///var/run/docker.sock does not answer"), -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	docker := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, nil)
	if _, err := docker.Info(context.Background()); err == nil || !strings.Contains(err.Error(), "no Docker engine on far") {
		t.Errorf("docker info = %v", err)
	}
	_, err := docker.Deploy(context.Background(), engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app"}}})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.CodeNoEngine || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("docker deploy = %v: want no_engine with the reason", err)
	}
	// The host runtime runs all the same.
	host := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	if _, err := host.Deploy(context.Background(), engine.DeploySpec{RunID: "r2", Services: []engine.Service{{Name: "app"}}}); err != nil {
		t.Errorf("host deploy: %v", err)
	}
}

func TestDiskFullHasItsCode(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	h.engines.eng.deployErr = fmt.Errorf("create data directory: %w", &os.PathError{Op: "mkdir", Path: "/var/lib/ctrperf/x", Err: syscall.ENOSPC})
	_, err := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil).
		Deploy(context.Background(), engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app"}}})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.CodeDiskFull || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("deploy on a full disk = %v", err)
	}
}

func TestWatchdogTearsDownAtEndOfStream(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, nil)
	for _, id := range []string{"plan-abcd-001", "plan-abcd-002"} {
		if _, err := eng.Deploy(context.Background(), engine.DeploySpec{RunID: id, Services: []engine.Service{{Name: "app"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := (remote.NewObserver(h.c, "k", &engine.Target{})).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.toAgent.Close() // ctrperf went away
	if err := h.wait(t); err != nil {
		t.Errorf("end of stream: %v", err)
	}
	if got := h.engines.eng.tornDown(); len(got) != 2 {
		t.Errorf("watchdog tore down %v: want both runs", got)
	}
	if !h.obs.stopped || h.engines.closed != 1 {
		t.Errorf("samplers stopped %v, engines closed %d times", h.obs.stopped, h.engines.closed)
	}
	if live, _ := h.owners.Live(agent.KindAgent); len(live) != 0 {
		t.Errorf("owner record left: %+v", live)
	}
	if !strings.Contains(h.log.String(), "ctrperf went away") {
		t.Errorf("log = %q", h.log.String())
	}
}

func TestWatchdogTearsDownWithoutHeartbeats(t *testing.T) {
	// The client's heartbeats every 50 ms keep the session alive ...
	h := start(t, nil, 50*time.Millisecond, remote.ClientOptions{})
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	if _, err := eng.Deploy(context.Background(), engine.DeploySpec{RunID: "plan-abcd-001", Services: []engine.Service{{Name: "app"}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if got := h.engines.eng.tornDown(); len(got) != 0 {
		t.Fatalf("torn down %v while heartbeats came", got)
	}
	// ... a client that stops sending (a hung ctrperf, a stalled link)
	// loses it after three missed.
	hb := startSilent(t)
	if err := hb.wait(t); !errors.Is(err, agent.ErrHeartbeat) {
		t.Errorf("silent caller: %v, want ErrHeartbeat", err)
	}
	if got := hb.engines.eng.tornDown(); len(got) != 1 {
		t.Errorf("watchdog tore down %v", got)
	}
	h.c.Close(context.Background())
}

// startSilent says hello with a heartbeat timeout, deploys, and then
// sends nothing while keeping the stream open.
func startSilent(t *testing.T) *harness {
	h := &harness{engines: &fakeEngines{eng: &fakeEngine{}}, owners: owner.Dir{Path: t.TempDir()}, done: make(chan error, 1)}
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	t.Cleanup(func() { cw.Close() })
	go func() {
		err := agent.Serve(context.Background(), ar, aw, agent.Options{Engines: h.engines, Log: io.Discard, Owners: &h.owners})
		aw.Close()
		h.done <- err
	}()
	go func() { _, _ = io.Copy(io.Discard, cr) }()
	conn := agent.NewConn(strings.NewReader(""), cw)
	_ = conn.Send(&agent.Message{ID: 1, Method: agent.MethodHello, Params: agent.Encode(agent.HelloParams{Version: agent.Version, Session: "s", Heartbeat: 200 * time.Millisecond})})
	_ = conn.Send(&agent.Message{ID: 2, Method: agent.MethodDeploy, Params: agent.Encode(agent.DeployParams{EngineRef: agent.EngineRef{Runtime: engine.RuntimeHost},
		Spec: engine.DeploySpec{RunID: "s-001", Services: []engine.Service{{Name: "app"}}}})})
	return h
}

func TestObserveStreamsAndReturnsTheSeries(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	o := remote.NewObserver(h.c, "run-1", &engine.Target{Containers: []engine.Container{{Service: "app", CgroupPath: "/docker/x"}, {Service: "gone"}}})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.Started == 0 {
		t.Error("no start time")
	}
	s := o.Stop()
	if s == nil || len(s.Samples) != 2 || len(s.Unavailable) != 0 {
		t.Errorf("series = %+v", s)
	}
	// A second stop has nothing to stop: the series says so.
	if s := o.Stop(); s.Unavailable["observer"] == "" {
		t.Errorf("second stop = %+v", s)
	}
}

func TestDriveOnTheLoadHost(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	var started int64
	var steps []string
	p := agent.DriveParams{RunID: "r1", Workload: "fake", Knobs: workload.Knobs{Load: map[string]any{"rate": 20}},
		Target: agent.Target{RunID: "r1", Endpoints: []engine.Endpoint{{Service: "app", Port: 8080, Addr: "198.19.200.2:4000"}}}}
	m, err := h.c.Drive(context.Background(), p, func(ns int64) { started = ns }, func(s string) { steps = append(steps, s) })
	if err != nil {
		t.Fatal(err)
	}
	if started == 0 || len(steps) != 1 {
		t.Errorf("started %d, progress %v", started, steps)
	}
	op := m.Operations["get"]
	hist, err := results.DecodeHistogram(op.Histogram)
	if err != nil || hist.TotalCount() != 100 || m.Metrics["rate"] != 20 || m.Notes[0] != "dialed 198.19.200.2:4000" {
		t.Errorf("measurement = %+v (histogram %v)", m, err)
	}
	p.Knobs.Load["bogus"] = 1
	var ae *agent.Error
	if _, err := h.c.Drive(context.Background(), p, nil, nil); !errors.As(err, &ae) || ae.Code != agent.CodeBadParams {
		t.Errorf("bad knobs: %v", err)
	}
}

// imageSource saves an "archive" that names its image.
type imageSource struct{ saved int }

func (s *imageSource) Resolve(_ context.Context, refs []string) ([]agent.Image, error) {
	var out []agent.Image
	for _, r := range refs {
		out = append(out, agent.Image{ID: "sha256:" + r, Refs: []string{r}})
	}
	return out, nil
}
func (s *imageSource) Save(_ context.Context, ids []string) (io.ReadCloser, error) {
	s.saved++
	// More than one chunk.
	return io.NopCloser(strings.NewReader("ID:" + ids[0] + "\n" + strings.Repeat("x", 2<<20+17))), nil
}

// TestDeployByImageID: the host's engine gets the image's ID, not its tag:
// the tag is shared (another ctrperf, another session of another build on
// the same host retags it), the ID is what was loaded.
func TestDeployByImageID(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, &imageSource{})
	spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}, {Name: "side", Image: "ticketd"}}}
	for range 2 { // the second deploy loads nothing and still goes by ID
		if _, err := eng.Deploy(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
	h.engines.eng.mu.Lock()
	defer h.engines.eng.mu.Unlock()
	for _, d := range h.engines.eng.deployed {
		for _, s := range d.Services {
			if s.Image != "sha256:ticketd" {
				t.Errorf("service %s deployed as %q: want the image ID", s.Name, s.Image)
			}
		}
	}
	if spec.Services[0].Image != "ticketd" {
		t.Errorf("the caller's spec changed: %q", spec.Services[0].Image)
	}
}

// smallImage is an image of one chunk and a byte.
type smallImage struct{ imageSource }

func (s *smallImage) Save(_ context.Context, ids []string) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("ID:" + ids[0] + "\n" + strings.Repeat("x", 1<<20))), nil
}

// TestImageLoadOnASlowLink: at 1.5 Mbit/s one image chunk (1 MiB, a line
// of 1.4 MB in base64) takes 7.5 s to arrive, longer than the agent's
// heartbeat timeout (3 s here), and the client's heartbeats wait behind
// it; the agent counts the chunk's bytes as they arrive, not whole
// lines, and keeps the session.
func TestImageLoadOnASlowLink(t *testing.T) {
	const rate = 1_500_000 / 8
	h := start(t, nil, time.Second, remote.ClientOptions{}, setup{link: func(w io.Writer) io.Writer { return throttled{w: w, rate: rate} }})
	defer h.c.Close(context.Background())
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, &smallImage{})
	spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}}}
	if _, err := eng.Deploy(context.Background(), spec); err != nil {
		t.Fatalf("deploy over a slow link: %v; agent: %s", err, h.log.String())
	}
	if n := h.images.got.Len(); n != len("ID:sha256:ticketd\n")+1<<20 {
		t.Errorf("the host loaded %d bytes", n)
	}
}

// patternImage is an archive of several chunks whose bytes all differ
// from their neighbours' (a chunk out of order changes the whole).
type patternImage struct {
	imageSource
	archive []byte
}

func (p *patternImage) Save(_ context.Context, ids []string) (io.ReadCloser, error) {
	p.archive = []byte("ID:" + ids[0] + "\n")
	for i := range 3<<20 + 12345 {
		p.archive = append(p.archive, byte(i*131+i/256))
	}
	return io.NopCloser(bytes.NewReader(p.archive)), nil
}

// TestImageChunksInOrder: with several chunks in flight, the host's engine
// reads the archive byte for byte as it was saved; a chunk of a stream
// with no load under way (an earlier chunk failed) is refused, not taken
// for the start of another archive.
func TestImageChunksInOrder(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	src := &patternImage{}
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, src)
	spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}}}
	if _, err := eng.Deploy(context.Background(), spec); err != nil {
		t.Fatalf("deploy: %v; agent: %s", err, h.log.String())
	}
	if got := h.images.got.Bytes(); !bytes.Equal(got, src.archive) {
		i := 0
		for i < min(len(got), len(src.archive)) && got[i] == src.archive[i] {
			i++
		}
		t.Errorf("the engine read %d bytes, differing from the archive's %d from byte %d", len(got), len(src.archive), i)
	}
	err := h.c.Call(context.Background(), agent.MethodImagesLoad, agent.ImageChunk{Stream: "sha256:x-1", Data: []byte("layers")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no load under way") {
		t.Errorf("a chunk of no stream under way: %v", err)
	}
}

func TestImagesLoadedOnceByID(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	src := &imageSource{}
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, src)
	spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}}}
	for i := range 2 {
		spec.RunID = fmt.Sprint("r", i)
		if _, err := eng.Deploy(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
	if src.saved != 1 {
		t.Errorf("saved %d times: want once", src.saved)
	}
	if n := h.images.got.Len(); n != len("ID:sha256:ticketd\n")+2<<20+17 {
		t.Errorf("the host loaded %d bytes", n)
	}
	// A new engine of the same host asks again but sends nothing: the host has it.
	eng2 := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, src)
	if _, err := eng2.Deploy(context.Background(), spec); err != nil || src.saved != 1 {
		t.Errorf("second engine: saved %d, %v", src.saved, err)
	}
}

// TestDeployKeepsTheRealPath: a spec with Reach reaches the host's engine
// as it is, and the endpoints come back as the engine gave them — no
// listener of the agent's in front of them (the TCP relay of fd00570
// answered on an address of its own).
func TestDeployKeepsTheRealPath(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	h.engines.eng.endpoint = "198.19.200.2:40001"
	reach := &engine.Reach{Addr: netip.MustParseAddr("198.19.200.2"), From: netip.MustParseAddr("198.19.200.3")}
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := eng.Deploy(context.Background(), engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app"}}, Reach: reach})
	if err != nil {
		t.Fatal(err)
	}
	if ep, _ := tg.Endpoint("app", 8080); ep.Addr != "198.19.200.2:40001" {
		t.Errorf("endpoint %s, want the engine's own 198.19.200.2:40001", ep.Addr)
	}
	h.engines.eng.mu.Lock()
	got := h.engines.eng.deployed[0].Reach
	h.engines.eng.mu.Unlock()
	if got == nil || *got != *reach {
		t.Errorf("the engine got reach %+v, want %+v", got, reach)
	}
}

type fakeNet struct {
	mu      sync.Mutex
	routes  map[string][]engine.RunRoute
	removed []string
	err     error
}

func (f *fakeNet) Source(to netip.Addr) (netip.Addr, string, error) {
	return netip.MustParseAddr("198.19.200.3"), "eth0", f.err
}
func (f *fakeNet) AddRoute(runID string, r engine.RunRoute) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routes == nil {
		f.routes = map[string][]engine.RunRoute{}
	}
	f.routes[runID] = append(f.routes[runID], r)
	return f.err
}
func (f *fakeNet) RemoveRoutes(runID string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, runID)
	delete(f.routes, runID)
	return nil, f.err
}
func (f *fakeNet) AdmitCounts(_ context.Context, runID string) (engine.AdmitCounts, error) {
	return engine.AdmitCounts{Chain: "CTRPERF-ADMIT-x", AdmittedPackets: 7, RefusedPackets: 2}, f.err
}

// TestRoutesGoWithTheSession: a load host's routes are the session's; the
// run is in the agent's owner record while they exist (clean keeps them),
// and the end of the session removes them however it ends.
func TestRoutesGoWithTheSession(t *testing.T) {
	fn := &fakeNet{}
	h := startWith(t, func(o *agent.Options) { o.Net = fn })
	ctx := context.Background()
	src, err := h.c.Source(ctx, "127.0.0.1")
	if err != nil || src.Addr.String() != "198.19.200.3" || src.To.String() != "127.0.0.1" {
		t.Fatalf("source = %+v, %v", src, err)
	}
	r := engine.RunRoute{Dst: netip.MustParseAddr("198.19.202.2"), Via: netip.MustParseAddr("198.19.200.2")}
	if err := h.c.AddRoute(ctx, "plan-abcd-001", r); err != nil {
		t.Fatal(err)
	}
	list, err := h.owners.List()
	if err != nil || len(list) != 1 || !slices.Contains(list[0].Record.Objects, "plan-abcd-001") {
		t.Errorf("owner records %+v, %v: want the run recorded", list, err)
	}
	c, err := h.c.AdmitCounts(ctx, "plan-abcd-001")
	if err != nil || c.AdmittedPackets != 7 || c.RefusedPackets != 2 {
		t.Errorf("admit counts %+v, %v", c, err)
	}
	h.c.Close(ctx)
	_ = h.wait(t)
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if len(fn.routes) != 0 || !slices.Contains(fn.removed, "plan-abcd-001") {
		t.Errorf("after the session: routes %v, removed %v", fn.routes, fn.removed)
	}
}

func TestNetMethodsRefusedWithoutNet(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	if _, err := h.c.Source(context.Background(), "127.0.0.1"); err == nil {
		t.Error("net.source without Net succeeded")
	}
	if err := h.c.DialCheck(context.Background(), "127.0.0.1:1", time.Second); err == nil {
		t.Error("dial.check to a closed port succeeded")
	}
}

func TestLostConnectionFailsCalls(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	h.toAgent.Close()
	_ = h.wait(t)
	<-h.c.Done()
	err := h.c.Call(context.Background(), agent.MethodClock, nil, nil, nil)
	if !errors.Is(err, remote.ErrDisconnected) {
		t.Errorf("call after the agent went: %v", err)
	}
	if err := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil).Ping(context.Background()); !engine.Unreachable(err) {
		t.Errorf("ping after the agent went: %v, want unreachable", err)
	}
}

func TestSeriesLongerThanALine(t *testing.T) {
	// A series many frames long: with protocol 2's frames of 1 MiB, a
	// series over protocol 1's 64 MiB line (a long window on a host of
	// many CPUs) arrives the same way; the frame size is small here so
	// that the test sends 200 frames in milliseconds, not 64 MiB.
	const frame = 4 << 10
	h := start(t, nil, -1, remote.ClientOptions{FrameSize: frame}, setup{opt: func(o *agent.Options) { o.FrameSize = frame }})
	defer h.c.Close(context.Background())
	big := strings.Repeat("c", 200*frame)
	h.series = &results.Series{IntervalS: 1, Unavailable: map[string]string{"big": big}, Samples: []results.Sample{{T: 1}}}
	o := remote.NewObserver(h.c, "run-1", &engine.Target{})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := o.Stop()
	if s.Unavailable["observer"] != "" || len(s.Unavailable["big"]) != len(big) || len(s.Samples) != 1 {
		t.Errorf("series of %d bytes: unavailable %q, %d samples", len(big), s.Unavailable["observer"], len(s.Samples))
	}
	if err := h.c.Call(context.Background(), agent.MethodClock, nil, nil, nil); err != nil {
		t.Errorf("the session after the series: %v; agent log: %s", err, h.log.String())
	}
}

// TestHeartbeatsLeaveWhileOneIsUnanswered: an answer that queues behind a
// long message (a series of many frames on a slow link) must not hold the
// next heartbeat back: the agent tears the session down when none came
// for three periods, and a client that waited for each answer sent its
// next one four periods after the last.
func TestHeartbeatsLeaveWhileOneIsUnanswered(t *testing.T) {
	const every = 50 * time.Millisecond
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	arrived := make(chan time.Time, 16)
	go func() {
		conn := agent.NewConn(ar, aw)
		for {
			m, err := conn.Receive()
			if err != nil {
				aw.Close()
				return
			}
			switch m.Method {
			case agent.MethodHello:
				_ = conn.Send(&agent.Message{ID: m.ID, Result: agent.Encode(agent.HelloResult{Version: agent.Version})})
			case agent.MethodClock:
				_ = conn.Send(&agent.Message{ID: m.ID, Result: agent.Encode(agent.ClockResult{UnixNano: time.Now().UnixNano()})})
			case agent.MethodHeartbeat:
				select { // never answered
				case arrived <- time.Now():
				default:
				}
			}
		}
	}()
	c, err := remote.NewClient(context.Background(), cr, cw, remote.ClientOptions{Heartbeat: every, Closer: cw})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	last := <-arrived
	for range 4 {
		now := <-arrived
		if gap := now.Sub(last); gap >= 3*every {
			t.Errorf("a heartbeat %s after the last, unanswered one: the agent's watchdog (%s) would have ended the session", gap, 3*every)
		}
		last = now
	}
	_ = c
}

func TestHelloChecksTheBuild(t *testing.T) {
	agentBuild := setup{opt: func(o *agent.Options) { o.Build = func() (string, error) { return "aaaa", nil } }}
	for _, c := range []struct {
		desc, build, want string
	}{
		{"the same build", "aaaa", ""},
		{"another build", "bbbb", "another ctrperf build"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			ar, cw := io.Pipe()
			cr, aw := io.Pipe()
			opt := agent.Options{Log: io.Discard}
			agentBuild.opt(&opt)
			go func() { _ = agent.Serve(context.Background(), ar, aw, opt); aw.Close() }()
			defer cw.Close()
			c2, err := remote.NewClient(context.Background(), cr, cw, remote.ClientOptions{Heartbeat: -1, Build: c.build, Closer: cw, Fix: "rebuild images: ctrperf images build"})
			if c.want == "" {
				if err != nil || c2.Hello.Build != "aaaa" {
					t.Fatalf("hello: %v, build %q", err, c2.Hello.Build)
				}
				c2.Close(context.Background())
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ctrperf images build") {
				t.Errorf("hello = %v: want %q and the fix", err, c.want)
			}
		})
	}
}

func TestClientRefusesAnAgentOfAnotherBuild(t *testing.T) {
	// An agent that does not check (no Build of its own) still answers
	// with its build; the client compares.
	ar, cw := io.Pipe()
	cr, aw := io.Pipe()
	go func() {
		conn := agent.NewConn(ar, aw)
		m, err := conn.Receive()
		if err != nil {
			return
		}
		_ = conn.Send(&agent.Message{ID: m.ID, Result: agent.Encode(agent.HelloResult{Version: agent.Version, Build: "old"})})
		_, _ = io.Copy(io.Discard, ar)
		aw.Close()
	}()
	_, err := remote.NewClient(context.Background(), cr, cw, remote.ClientOptions{Heartbeat: -1, Build: "new", Closer: cw, Fix: "rebuild images: ctrperf images build"})
	if err == nil || !strings.Contains(err.Error(), `"old"`) || !strings.Contains(err.Error(), "ctrperf images build") {
		t.Errorf("hello of a stale agent = %v", err)
	}
}

func TestHelloThatNeverComesHasABudget(t *testing.T) {
	// A remote shell that stalls: the stream stays open, nothing answers.
	cr, aw := io.Pipe()
	cw := io.Discard // the hello line fits in the transport's buffer
	defer aw.Close()
	closed := make(chan struct{})
	_, err := remote.NewClient(context.Background(), cr, cw, remote.ClientOptions{Heartbeat: -1, HelloTimeout: 50 * time.Millisecond,
		Closer: closerFunc(func() error { close(closed); return aw.Close() })})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer hello within 50ms") {
		t.Errorf("hello into silence = %v", err)
	}
	select {
	case <-closed:
	default:
		t.Error("the transport was not closed")
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestPrivateEngineInfoIsItsOwn: the info of a private engine on a host is
// that engine's, not the host's default engine of hello (lab-network's
// records named default@lab-sut, userland proxy on, for the configuration
// with userland_proxy: false).
func TestPrivateEngineInfoIsItsOwn(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	off := false
	def, err := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, nil).Info(context.Background())
	if err != nil || def.Name != "default" {
		t.Errorf("default engine: %+v, %v", def, err)
	}
	priv, err := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker, Engine: engine.EngineSpec{UserlandProxy: &off}}, nil).Info(context.Background())
	if err != nil || priv.Name != "fake" {
		t.Errorf("private engine: %+v, %v; want the engine's own info", priv, err)
	}
}

// diskImage is a disk of the host holding archive, padded past its end as
// a block device is: Disks of a root with block/vdb (serial
// ctrperf-ship-1) and the device itself.
func diskImage(t *testing.T, archive string) *agent.Disks {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys", "block", "vdb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys", "block", "vdb", "serial"), []byte("ctrperf-ship-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "dev", "vdb"), []byte(archive+strings.Repeat("\x00", 512)), 0o644); err != nil {
		t.Fatal(err)
	}
	return &agent.Disks{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev")}
}

// TestImagesLoadDisk: images.load.disk loads the archive's bytes from the
// disk of that serial (not the padding after them) and answers which
// images arrived; an archive whose image does not arrive with its ID
// fails, and so does an agent without disks.
func TestImagesLoadDisk(t *testing.T) {
	const archive = "ID:sha256:ticketd\nlayers"
	im := []agent.Image{{ID: "sha256:ticketd", Refs: []string{"ticketd"}}}
	for _, tc := range []struct {
		desc    string
		disks   *agent.Disks
		params  agent.ImageDisk
		wantErr string
	}{
		{"the archive's bytes", diskImage(t, archive), agent.ImageDisk{Serial: "ctrperf-ship-1", Size: int64(len(archive)), Images: im}, ""},
		{"an image that did not arrive", diskImage(t, archive), agent.ImageDisk{Serial: "ctrperf-ship-1", Size: int64(len(archive)),
			Images: []agent.Image{{ID: "sha256:other"}}}, "did not arrive"},
		{"no disks on this agent", nil, agent.ImageDisk{Serial: "ctrperf-ship-1", Size: int64(len(archive)), Images: im}, "no images from disks"},
		{"no size", diskImage(t, archive), agent.ImageDisk{Serial: "ctrperf-ship-1", Images: im}, "of 0 bytes"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := startWith(t, func(o *agent.Options) { o.Disks = tc.disks })
			defer h.c.Close(context.Background())
			var res agent.ImageLoaded
			err := h.c.Call(context.Background(), agent.MethodImagesLoadDisk, tc.params, &res, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(res.Loaded, []string{"sha256:ticketd"}) {
				t.Errorf("loaded %v, %v", res.Loaded, err)
			}
			if got := h.images.got.String(); got != archive {
				t.Errorf("the engine read %q, want the archive's %d bytes", got, len(archive))
			}
		})
	}
}

// fakeShipper takes the archive another way than the agent's stream.
type fakeShipper struct {
	got    []byte
	images []agent.Image
	err    error
}

func (f *fakeShipper) Ship(_ context.Context, _ *remote.Client, images []agent.Image, archive io.Reader) error {
	b, err := io.ReadAll(archive)
	f.got, f.images = append(f.got, b...), images
	return errors.Join(err, f.err)
}

// TestImagesShippedByTheShipper: an engine with a shipper sends it the
// archive and the agent's stream carries none of it; a failed shipment
// fails the deploy and is tried again by the next.
func TestImagesShippedByTheShipper(t *testing.T) {
	h := start(t, nil, -1, remote.ClientOptions{})
	defer h.c.Close(context.Background())
	ship := &fakeShipper{err: errors.New("no disk")}
	eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, &smallImage{}, remote.WithShipper(ship))
	spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}}}
	if _, err := eng.Deploy(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "no disk") {
		t.Fatalf("deploy with a failing shipper: %v", err)
	}
	ship.err, ship.got = nil, nil
	if _, err := eng.Deploy(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if len(ship.got) != len("ID:sha256:ticketd\n")+1<<20 || len(ship.images) != 1 || ship.images[0].ID != "sha256:ticketd" {
		t.Errorf("the shipper got %d bytes of %+v", len(ship.got), ship.images)
	}
	if n := h.images.got.Len(); n != 0 {
		t.Errorf("the agent's stream carried %d bytes too", n)
	}
}

// delayed is a link whose bytes arrive latency after they are written,
// the writer not waiting for them: a long path, not a slow one.
type delayed struct {
	q       chan delayedWrite
	latency time.Duration
}

type delayedWrite struct {
	due time.Time
	b   []byte
}

func newDelayed(w io.Writer, latency time.Duration) *delayed {
	d := &delayed{q: make(chan delayedWrite, 1<<16), latency: latency}
	go func() {
		for dw := range d.q {
			time.Sleep(time.Until(dw.due))
			if _, err := w.Write(dw.b); err != nil {
				return
			}
		}
	}()
	return d
}

func (d *delayed) Write(b []byte) (int, error) {
	d.q <- delayedWrite{time.Now().Add(d.latency), bytes.Clone(b)}
	return len(b), nil
}

// BenchmarkImageShipOverLatency ships an archive of 32 chunks to an agent
// whose requests arrive 10 ms after they are sent: a chunk answered before
// the next is sent costs a round trip each; chunks in flight share them.
func BenchmarkImageShipOverLatency(b *testing.B) {
	const latency = 10 * time.Millisecond
	for range b.N {
		b.StopTimer()
		h := start(b, nil, -1, remote.ClientOptions{}, setup{link: func(w io.Writer) io.Writer { return newDelayed(w, latency) }})
		src := &sizedImage{size: 24 << 20}
		eng := remote.NewEngine(h.c, agent.EngineRef{Runtime: engine.RuntimeDocker}, src)
		spec := engine.DeploySpec{RunID: "r1", Services: []engine.Service{{Name: "app", Image: "ticketd"}}}
		b.StartTimer()
		if _, err := eng.Deploy(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.c.Close(context.Background())
		b.SetBytes(int64(src.size))
	}
}

// sizedImage is an archive of size bytes.
type sizedImage struct {
	imageSource
	size int
}

func (s *sizedImage) Save(_ context.Context, ids []string) (io.ReadCloser, error) {
	return io.NopCloser(io.MultiReader(strings.NewReader("ID:"+ids[0]+"\n"), bytes.NewReader(make([]byte, s.size)))), nil
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/observe"
	"ctrperf/internal/results"
	"ctrperf/internal/selfbin"
)

// ImageSource is where the images a remote engine lacks come from: this
// machine's engine, which builds them from their recipes (never pulling).
type ImageSource interface {
	// Resolve makes sure refs exist here and names them by ID.
	Resolve(ctx context.Context, refs []string) ([]agent.Image, error)
	// Save is `docker save` of the images (by ID) as one archive.
	Save(ctx context.Context, ids []string) (io.ReadCloser, error)
}

// Shipper carries a `docker save` archive of images into the host's
// engine another way than the agent's stream of chunks: a VM guest's
// QEMU attaches it as a disk (internal/vm).
type Shipper interface {
	Ship(ctx context.Context, c *Client, images []agent.Image, archive io.Reader) error
}

// EngineOption changes a remote engine.
type EngineOption func(*Engine)

// WithShipper ships the images the host lacks through s.
func WithShipper(s Shipper) EngineOption { return func(e *Engine) { e.shipper = s } }

// Engine is an engine of a remote host: every call goes to the host's
// agent, which calls its own engine there (internal/engine). It is what
// `hosts: {sut: …}` deploys on.
type Engine struct {
	c       *Client
	ref     agent.EngineRef
	images  ImageSource
	shipper Shipper // nil: chunks through the agent's stream

	mu     sync.Mutex
	loaded map[string]bool // image IDs the host has
}

var _ engine.Engine = (*Engine)(nil)

// NewEngine is the engine of ref on the client's host; missing images
// come from images (nil: the host must have them). The endpoints are the
// host's engine's, as a client elsewhere dials them when the spec carries
// a Reach.
func NewEngine(c *Client, ref agent.EngineRef, images ImageSource, opts ...EngineOption) *Engine {
	e := &Engine{c: c, ref: ref, images: images, loaded: map[string]bool{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Client is the agent connection the engine speaks through.
func (e *Engine) Client() *Client { return e.c }

// Info is the host's engine as its agent reported it.
func (e *Engine) Info(ctx context.Context) (engine.Info, error) {
	if e.ref.Runtime == engine.RuntimeHost {
		return engine.Info{Runtime: string(engine.RuntimeHost), Name: "host"}, nil
	}
	if e.c.Hello.Engine == nil {
		return engine.Info{}, &agent.Error{Code: agent.CodeNoEngine, Message: fmt.Sprintf("no Docker engine on %s: %s", e.c.Name, e.c.Hello.EngineError)}
	}
	if e.ref.Engine.IsDefault() {
		return *e.c.Hello.Engine, nil
	}
	// A private engine (userland_proxy: false, another storage driver):
	// its own info, which the agent gets by starting it, not the
	// default's from hello (records said "userland proxy on" for a
	// configuration that ran with it off).
	var info engine.Info
	if err := e.c.Call(ctx, agent.MethodInfo, e.ref, &info, nil); err != nil {
		return engine.Info{}, err
	}
	return info, nil
}

// Ping asks the host's engine through the agent; a lost connection is an
// unreachable engine.
func (e *Engine) Ping(ctx context.Context) error {
	err := e.c.Call(ctx, agent.MethodPing, e.ref, nil, nil)
	if errors.Is(err, ErrDisconnected) {
		return fmt.Errorf("%w: %w", engine.ErrUnreachable, err)
	}
	return err
}

// Deploy loads the images the host lacks, then deploys there.
func (e *Engine) Deploy(ctx context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	spec, err := e.portable(spec)
	if err != nil {
		return nil, err
	}
	if e.ref.Runtime != engine.RuntimeHost {
		ids, err := e.loadImages(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("deploy %s on %s: %w", spec.RunID, e.c.Name, err)
		}
		// By ID: the tag on the host is shared (another session of
		// another ctrperf build retags it), the ID is what was loaded.
		for i := range spec.Services {
			if id, ok := ids[spec.Services[i].Image]; ok {
				spec.Services[i].Image = id
			}
		}
	}
	var res agent.DeployResult
	err = e.c.Call(ctx, agent.MethodDeploy, agent.DeployParams{EngineRef: e.ref, Spec: spec}, &res, nil)
	if err != nil {
		return nil, fmt.Errorf("deploy %s on %s: %w", spec.RunID, e.c.Name, err)
	}
	t := res.Target.Engine()
	t.Private = hostTarget{host: e.c.Name}
	return t, nil
}

// hostTarget marks a target deployed on another host.
type hostTarget struct{ host string }

// portable is spec as the host can run it: this machine's ctrperf binary
// in a host command becomes the agent's copy.
func (e *Engine) portable(spec engine.DeploySpec) (engine.DeploySpec, error) {
	self, _ := selfbin.Path()
	spec.Services = slices.Clone(spec.Services)
	for i := range spec.Services {
		s := &spec.Services[i]
		if s.Build != nil {
			return spec, fmt.Errorf("service %q is built from a Dockerfile context here: deploying it on %s is not supported yet", s.Name, e.c.Name)
		}
		swap := func(argv []string) []string {
			argv = slices.Clone(argv)
			for j, a := range argv {
				if self != "" && strings.Contains(a, self) {
					argv[j] = strings.ReplaceAll(a, self, agent.SelfBinary)
				}
			}
			return argv
		}
		s.HostCommand, s.Command, s.Entrypoint = swap(s.HostCommand), swap(s.Command), swap(s.Entrypoint)
	}
	return spec, nil
}

// loadImages sends the host the images of spec it lacks, by image ID, in
// one archive, and says each reference's ID.
func (e *Engine) loadImages(ctx context.Context, spec engine.DeploySpec) (map[string]string, error) {
	var refs []string
	for _, s := range spec.Services {
		if s.Image != "" && !slices.Contains(refs, s.Image) {
			refs = append(refs, s.Image)
		}
	}
	if len(refs) == 0 || e.images == nil {
		return nil, nil
	}
	want, err := e.images.Resolve(ctx, refs)
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, im := range want {
		for _, r := range im.Refs {
			ids[r] = im.ID
		}
	}
	e.mu.Lock()
	want = slices.DeleteFunc(want, func(im agent.Image) bool { return e.loaded[im.ID] })
	e.mu.Unlock()
	if len(want) == 0 {
		return ids, nil
	}
	var miss agent.ImagesMissing
	if err := e.c.Call(ctx, agent.MethodImagesMissing, agent.ImagesParams{Images: want}, &miss, nil); err != nil {
		return nil, err
	}
	if len(miss.Missing) > 0 {
		if err := e.send(ctx, miss.Missing); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	for _, im := range want {
		e.loaded[im.ID] = true
	}
	e.mu.Unlock()
	return ids, nil
}

// imageChunk is the most of a `docker save` archive one image message
// carries: its base64 in JSON (4/3 more) and the message around it fit in
// one line of the agent protocol (agent.FrameSize). A longer message goes
// as frames, each base64 again: a third more bytes on the wire and two
// decodes at the host (chunks of 1 MiB did so until 2026-11-29).
const imageChunk = (agent.FrameSize - imageMessageSlack) / 4 * 3

// imageMessageSlack is what an image message holds beside its data: the
// envelope, the stream's name and, on the first chunk, the images.
const imageMessageSlack = 16 << 10

func (e *Engine) send(ctx context.Context, images []agent.Image) error {
	var ids []string
	for _, im := range images {
		ids = append(ids, im.ID)
	}
	rc, err := e.images.Save(ctx, ids)
	if err != nil {
		return err
	}
	defer rc.Close()
	if e.shipper != nil {
		if err := e.shipper.Ship(ctx, e.c, images, rc); err != nil {
			return fmt.Errorf("load images %v on %s: %w", ids, e.c.Name, err)
		}
		return nil
	}
	stream := fmt.Sprintf("%s-%d", ids[0], len(ids))
	// Up to agent.ChunksInFlight chunks unanswered: the agent decodes one
	// and writes it into its engine's load while the next ones travel.
	var inflight []*sent
	failed := func(err error) error {
		for _, p := range inflight { // their answers, so none is left pending
			_ = p.wait(ctx, nil)
		}
		return fmt.Errorf("load images %v on %s: %w", ids, e.c.Name, err)
	}
	buf := make([]byte, imageChunk) // start encodes a chunk before it returns
	first := true
	for {
		n, rerr := io.ReadFull(rc, buf)
		done := errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)
		if rerr != nil && !done {
			return failed(fmt.Errorf("save: %w", rerr))
		}
		ch := agent.ImageChunk{Stream: stream, Data: buf[:n], Done: done}
		if first {
			ch.Images, first = images, false
		}
		p, err := e.c.start(agent.MethodImagesLoad, ch, nil)
		if err != nil {
			return failed(err)
		}
		inflight = append(inflight, p)
		// The oldest answer, when the window is full or the archive sent.
		for len(inflight) == agent.ChunksInFlight || done && len(inflight) > 0 {
			p := inflight[0]
			inflight = inflight[1:]
			if err := p.wait(ctx, nil); err != nil {
				return failed(err)
			}
		}
		if done {
			return nil
		}
	}
}

// Exec runs argv in a service on the host.
func (e *Engine) Exec(ctx context.Context, t *engine.Target, service string, argv []string) (engine.ExecResult, error) {
	var r engine.ExecResult
	err := e.c.Call(ctx, agent.MethodExec, agent.ExecParams{EngineRef: e.ref, RunID: t.RunID, Service: service, Argv: argv}, &r, nil)
	return r, err
}

// Teardown removes the run's deployment on the host (by run id: a target
// of a session whose connection dropped is found too).
func (e *Engine) Teardown(ctx context.Context, t *engine.Target) error {
	if t == nil {
		return nil
	}
	err := e.c.Call(ctx, agent.MethodTeardown, agent.TeardownParams{EngineRef: e.ref, RunID: t.RunID}, nil, nil)
	if err != nil {
		return fmt.Errorf("teardown of %s on %s: %w", t.RunID, e.c.Name, err)
	}
	return nil
}

// Close does nothing: the connection is the hosts' (Close of Client).
func (e *Engine) Close(context.Context) error { return nil }

// Observer samples the host through its agent: observe.start starts the
// host's samplers (internal/observe there), observe.stop returns the run's
// series. The agent also streams each sample as an event of the start
// request; the series at the stop is the record.
type Observer struct {
	c          *Client
	key        string
	containers []observe.Container
	pods       []agent.PodCgroup
	// Started is when sampling began, on the host's clock.
	Started int64
	// from, when set, is the run's observer start on this machine's
	// clock: Stop moves the samples' times to count from it.
	from time.Time
}

// From has Stop count the samples' times from t0, a time of this
// machine's clock (the run's observer start), instead of from when the
// host's samplers began: an agent starts a moment after the run's clock,
// and on another clock.
func (o *Observer) From(t0 time.Time) *Observer {
	o.from = t0
	return o
}

// NewObserver samples the client's host for run key, with the cgroups of
// t's containers (named by service).
func NewObserver(c *Client, key string, t *engine.Target) *Observer {
	o := &Observer{c: c, key: key}
	for _, ct := range t.Containers {
		if ct.CgroupPath == "" {
			continue
		}
		name := ct.Service
		if name == "" {
			name = ct.Name
		}
		o.containers = append(o.containers, observe.Container{Name: name, CgroupPath: ct.CgroupPath})
	}
	return o
}

// SamplePods adds pods whose cgroups the agent finds on its node by UID
// (an agent pod of runtime kubernetes: agent.ResolvePods); a pod it does
// not find there fails Start.
func (o *Observer) SamplePods(pods []agent.PodCgroup) *Observer {
	o.pods = append(o.pods, pods...)
	return o
}

// Start begins sampling on the host.
func (o *Observer) Start(ctx context.Context) error {
	var st agent.ObserveStarted
	if err := o.c.Call(ctx, agent.MethodObserveStart, agent.ObserveParams{Key: o.key, Containers: o.containers, Pods: o.pods}, &st, nil); err != nil {
		return fmt.Errorf("samplers on %s: %w", o.c.Name, err)
	}
	o.Started = st.UnixNano
	return nil
}

// Stop ends sampling and returns the host's series; on a lost connection
// the series says why it is missing.
func (o *Observer) Stop() *results.Series {
	var s results.Series
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.c.Call(ctx, agent.MethodObserveStop, agent.ObserveStop{Key: o.key}, &s, nil); err != nil {
		return &results.Series{Unavailable: map[string]string{"observer": fmt.Sprintf("samplers on %s: %v", o.c.Name, err)}}
	}
	if !o.from.IsZero() && o.Started != 0 {
		shift := o.c.Clock.Local(o.Started).Sub(o.from).Seconds()
		for i := range s.Samples {
			s.Samples[i].T += shift
		}
	}
	return &s
}

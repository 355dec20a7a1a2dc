package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

// The app workload: the user's own service, from an image on the engine or
// a Dockerfile context ctrperf builds locally, with the command that runs
// the same program on the host as the bare-metal baseline, optional
// sidecars (a database), and ctrperf's own load generators (an HTTP
// scenario or the memcached protocol) against it.

func init() { Register(App{}) }

// App is the "app" workload.
type App struct{}

var _ Workload = App{}

// Name is "app".
func (App) Name() string { return "app" }

// AppService is one service of the app workload: the app itself or a
// sidecar, as the plan describes it.
type AppService struct {
	Name string
	// Image is the reference to deploy: the plan's image, or the
	// reference ctrperf builds Build under (ctrperf/app-DIR:CONTENTHASH).
	Image string
	// Build is the Dockerfile context (absolute), "" for an image.
	Build      string
	Dockerfile string
	content    string   // Build's content hash when the plan was read
	Command    []string // container argv (nil: the image's CMD)
	Entrypoint []string // nil: the image's ENTRYPOINT
	// HostCommand runs the same program on the host runtime; a relative
	// program path ("./bin/app") is resolved against the plan's directory.
	HostCommand []string
	Env         map[string]string
	Ports       []int // the first one of the app is what the load targets
	DataDir     string
	User        string
	Ready       engine.ReadyCheck
	// usesDir: a path of the plan's directory was read (build, a relative
	// host program).
	usesDir bool
}

// AppApp is the app knobs: the app and its sidecars.
type AppApp struct {
	AppService
	Sidecars []AppService
}

// AppLoad is the load knobs.
type AppLoad struct {
	Protocol string // "http", "memcached" or "command" (Client set)
	// Client, when set, is the user's own load tool instead of ctrperf's
	// generator (load.command; client.go).
	Client *ClientLoad
	// HTTP: a scenario file (absolute path once decoded), or a single GET
	// of Path.
	Scenario string
	Path     string
	scenario *load.Scenario
	// OpenLoop: Rate is sessions (http) or operations (memcached) per
	// second.
	OpenLoop
	Concurrency  int    // closed loop
	Ops          int64  // memcached closed loop: stop after this many operations
	Mix          string // memcached: "set", "get=9,set=1"
	ValueSize    int64
	Keys         int64
	mix          map[string]float64
	rateExplicit bool
}

// DefaultAppLoad: one GET / per session, 8 sessions back to back.
var DefaultAppLoad = AppLoad{Protocol: "http", Path: "/", Concurrency: 8,
	OpenLoop: OpenLoop{Timeout: 10 * time.Second, MaxInFlight: load.DefaultMaxInFlight, Seed: 1},
	Mix:      "get=9,set=1", ValueSize: 100, Keys: 10000}

// defaultAppReady is how long a service may take to answer its ready check.
const defaultAppReady = 60 * time.Second

var serviceNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,30}$`)

// parseAppService reads one service's knobs from k (prefix "app" or
// "app.sidecars[i]"), with relative paths against dir.
func parseAppService(k *knobs, name, dir string) AppService {
	s := AppService{Name: name}
	k.str("image", &s.Image, func(v string) error {
		if v == "" || strings.ContainsAny(v, " \t\n") {
			return errors.New("want an image reference like myapp:1.2")
		}
		return nil
	})
	var build string
	k.str("build", &build, func(v string) error {
		if v == "" {
			return errors.New("want a directory with a Dockerfile (relative to the plan's directory)")
		}
		return nil
	})
	k.str("dockerfile", &s.Dockerfile, nil)
	k.strList("command", &s.Command)
	k.strList("entrypoint", &s.Entrypoint)
	k.strList("host_command", &s.HostCommand)
	k.strMap("env", &s.Env)
	var port int
	whole(k, "port", &port, 1, 65535)
	var ports []int64
	k.intList("ports", &ports, 1, 65535)
	k.str("data_dir", &s.DataDir, func(v string) error {
		if !filepath.IsAbs(v) || filepath.Clean(v) != v || v == "/" {
			return errors.New("want an absolute, clean directory inside the container, like /data")
		}
		return nil
	})
	k.str("user", &s.User, nil)
	s.Ready = engine.ReadyCheck{Timeout: defaultAppReady}
	if m, ok := k.sub("ready"); ok {
		r := newKnobs(k.what+".ready", m)
		r.str("path", &s.Ready.HTTPPath, func(v string) error {
			if !strings.HasPrefix(v, "/") {
				return errors.New("want an HTTP path like /healthz")
			}
			return nil
		})
		whole(r, "port", &s.Ready.Port, 1, 65535)
		r.duration("timeout", &s.Ready.Timeout, time.Second, time.Hour)
		if err := r.err(); err != nil {
			k.errs = append(k.errs, err)
		}
	}
	if port > 0 {
		s.Ports = append(s.Ports, port)
	}
	for _, p := range ports {
		if !containsInt(s.Ports, int(p)) {
			s.Ports = append(s.Ports, int(p))
		}
	}
	switch {
	case s.Image != "" && build != "":
		k.errs = append(k.errs, knobError(k.what+".build", "%s: give either image (on the engine) or build (a Dockerfile context), not both", k.what))
	case s.Image == "" && build == "":
		k.errs = append(k.errs, knobError(k.what+".image", "%s: no image; give image (an image on the engine, never pulled) or build (a directory with a Dockerfile, relative to the plan)", k.what))
	case build != "":
		if !filepath.IsAbs(build) {
			build = filepath.Join(dir, build)
		}
		s.Build = filepath.Clean(build)
		hash, err := contextHash(s.Build, s.Dockerfile)
		if err != nil {
			k.fail("build", build, "%v", err)
		} else {
			s.Image, s.content = image.DirRef("app-"+slug(filepath.Base(s.Build)), hash), hash
		}
	}
	if s.Dockerfile != "" && build == "" {
		k.errs = append(k.errs, knobError(k.what+".dockerfile", "%s.dockerfile applies to build (a Dockerfile context), not to image", k.what))
	}
	if s.Ready.Port != 0 && !containsInt(s.Ports, s.Ready.Port) {
		k.errs = append(k.errs, knobError(k.what+".ready.port", "%s.ready.port = %d is not one of the service's ports %v", k.what, s.Ready.Port, s.Ports))
	}
	if s.Ready.HTTPPath != "" && len(s.Ports) == 0 {
		k.errs = append(k.errs, knobError(k.what+".ready.path", "%s.ready.path needs a port to send GET %s to (%s.port)", k.what, s.Ready.HTTPPath, k.what))
	}
	if len(s.HostCommand) > 0 {
		prog := hostProgram(s.HostCommand[0], dir)
		s.usesDir = s.usesDir || prog != s.HostCommand[0]
		s.HostCommand[0] = prog
	}
	s.usesDir = s.usesDir || build != ""
	return s
}

// hostProgram resolves a relative program path ("./app", "bin/app")
// against the plan's directory; a bare name ("redis-server") is looked up
// in PATH when the run starts.
func hostProgram(prog, dir string) string {
	if filepath.IsAbs(prog) || !strings.Contains(prog, "/") || strings.Contains(prog, "{{") {
		return prog
	}
	return filepath.Join(dir, prog)
}

var contextHashes sync.Map // dir + "\x00" + dockerfile -> hash

// contextHash is image.ContextHash, read once per process: a plan decodes
// every configuration with the same context.
func contextHash(dir, dockerfile string) (string, error) {
	key := dir + "\x00" + dockerfile
	if h, ok := contextHashes.Load(key); ok {
		return h.(string), nil
	}
	h, err := image.ContextHash(dir, dockerfile)
	if err != nil {
		return "", err
	}
	contextHashes.Store(key, h)
	return h, nil
}

// slug makes a directory name usable in an image reference.
func slug(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "context"
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ParseAppApp reads and checks the app knobs; dir is the plan's directory.
func ParseAppApp(m map[string]any, dir string) (AppApp, error) {
	k := newKnobs("app", m)
	a := AppApp{AppService: parseAppService(k, "app", dir)}
	for i, sm := range k.subList("sidecars") {
		sk := newKnobs(fmt.Sprintf("app.sidecars[%d]", i), sm)
		var name string
		sk.str("name", &name, func(v string) error {
			if !serviceNameRe.MatchString(v) || v == "app" {
				return errors.New("want a short lower-case name other than app, like db")
			}
			return nil
		})
		s := parseAppService(sk, name, dir)
		if name == "" && sm["name"] == nil {
			sk.errs = append(sk.errs, knobError(sk.what+".name", "%s: no name; templates reach it as {{addr:NAME:PORT}}", sk.what))
		}
		for _, prev := range a.Sidecars {
			if name != "" && prev.Name == name {
				sk.errs = append(sk.errs, knobError(sk.what+".name", "%s.name = %q: two sidecars have that name", sk.what, name))
			}
		}
		if err := sk.err(); err != nil {
			k.errs = append(k.errs, err)
		}
		a.Sidecars = append(a.Sidecars, s)
	}
	return a, k.err()
}

// UsesDir says the app knobs read paths of the plan's directory.
func (a AppApp) UsesDir() bool {
	for _, s := range append([]AppService{a.AppService}, a.Sidecars...) {
		if s.usesDir {
			return true
		}
	}
	return false
}

// UsesDir says the load knobs read a file of the plan's directory.
func (l AppLoad) UsesDir() bool { return l.Scenario != "" }

// ParseAppLoad reads and checks the load knobs; dir is the plan's directory.
func ParseAppLoad(m map[string]any, dir string) (AppLoad, error) {
	l := DefaultAppLoad
	if given(m, "command") {
		c, err := parseClientLoad(m)
		l.Protocol, l.Client = "command", &c
		return l, err
	}
	k := newKnobs("load", m)
	k.enum("protocol", &l.Protocol, "http", "memcached", "command")
	k.str("scenario", &l.Scenario, nil)
	k.str("path", &l.Path, func(v string) error {
		if !strings.HasPrefix(v, "/") {
			return errors.New("want a path like /")
		}
		return nil
	})
	k.openLoop(&l.OpenLoop)
	whole(k, "concurrency", &l.Concurrency, 0, 100000)
	whole(k, "ops", &l.Ops, 0, 1<<40)
	k.str("mix", &l.Mix, nil)
	whole(k, "value_size", &l.ValueSize, 1, 1<<20)
	whole(k, "keys", &l.Keys, 1, 1<<30)
	if err := k.err(); err != nil {
		return l, err
	}
	if l.Protocol == "command" {
		return l, knobError("load.protocol", "load.protocol command runs your own client: give it as load.command (with load.parser or load.figures)")
	}
	if l.Search != nil {
		if err := searchConflicts(m, l.Search, "rate", "concurrency", "ops"); err != nil {
			return l, err
		}
		// The search sets the rate of each step; decode the rest as open loop.
		m = maps.Clone(m)
		m["rate"] = l.Search.From
		l.Rate = l.Search.From
	}
	_, hasRate := m["rate"]
	_, hasConc := m["concurrency"]
	var errs []error
	switch {
	case hasRate && l.Rate > 0 && hasConc && l.Concurrency > 0:
		errs = append(errs, knobError("load.concurrency", "load: rate %g and concurrency %d both set; choose open loop (rate) or closed loop (concurrency)", l.Rate, l.Concurrency))
	case hasRate && l.Rate > 0:
		l.Concurrency, l.rateExplicit = 0, true
	case l.Concurrency == 0:
		errs = append(errs, knobError("load.concurrency", "load: rate 0 and concurrency 0: nothing would be sent"))
	}
	if l.Ops > 0 && l.Rate > 0 {
		errs = append(errs, knobError("load.ops", "load.ops applies to closed loop (concurrency); open loop runs for the plan's duration"))
	}
	switch l.Protocol {
	case "http":
		_, hasPath := m["path"]
		if l.Scenario != "" && hasPath {
			errs = append(errs, knobError("load.path", "load: give either scenario (a file of steps) or path (one GET), not both"))
		}
		for _, key := range []string{"mix", "value_size", "keys", "ops"} {
			if _, ok := m[key]; ok {
				errs = append(errs, knobError("load."+key, "load.%s is a memcached knob; protocol is http", key))
			}
		}
		if l.Scenario != "" {
			p := l.Scenario
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			sc, err := load.LoadScenarioFile(p)
			if err != nil {
				errs = append(errs, knobError("load.scenario", "load.scenario: %v", err))
			}
			l.Scenario, l.scenario = p, sc
		} else {
			l.scenario = load.SingleGET(l.Path)
		}
	case "memcached":
		for _, key := range []string{"scenario", "path", "poisson"} {
			if _, ok := m[key]; ok {
				errs = append(errs, knobError("load."+key, "load.%s is an http knob; protocol is memcached", key))
			}
		}
		mix, err := load.ParseMix(l.Mix)
		if err != nil {
			errs = append(errs, knobError("load.mix", "load.mix = %s: %v", l.Mix, err))
		}
		for op := range mix {
			if op != "get" && op != "set" {
				errs = append(errs, knobError("load.mix", "load.mix = %s: unknown operation %q (get, set)", l.Mix, op))
			}
		}
		l.mix = mix
		l.Poisson = l.Rate > 0
	}
	errs = append(errs, l.checkLoop())
	return l, errors.Join(errs...)
}

// Decode implements Workload: the services and load, and how they combine
// with the runtime, data placement and topology.
func (App) Decode(c Knobs) (any, any, error) {
	a, aerr := ParseAppApp(c.App, c.Dir)
	l, lerr := ParseAppLoad(c.Load, c.Dir)
	errs := []error{aerr, lerr}
	if aerr == nil {
		if len(a.Ports) == 0 {
			errs = append(errs, knobError("app.port", "app: no port; the load needs the TCP port the app serves on (app.port)"))
		}
		all := append([]AppService{a.AppService}, a.Sidecars...)
		for i, s := range all {
			what := "app"
			if i > 0 {
				what = fmt.Sprintf("app.sidecars[%d]", i-1)
			}
			if c.Runtime.Traits().Processes && len(s.HostCommand) == 0 {
				errs = append(errs, knobError(what+".host_command", "runtime host runs %s.host_command, the command that runs the same program on this machine (the bare-metal baseline), which is not set", what))
			}
			if c.Runtime.Traits().NumericUser && s.User != "" {
				if _, err := strconv.ParseInt(s.User, 10, 64); err != nil {
					errs = append(errs, knobError(what+".user", "%s.user = %q: runtime %s runs a container as a numeric uid (a pod's securityContext.runAsUser) and does not look names up in the image: give the uid (e.g. 999)", what, s.User, c.Runtime))
				}
			}
			if c.Runtime.Traits().Images && c.Data != "" && c.Data != engine.DataLayer && s.DataDir == "" && i == 0 {
				errs = append(errs, knobError(what+".data_dir", "data %q places %s.data_dir, which is not set: the configuration would measure nothing of the placement", c.Data, what))
			}
		}
		if lerr == nil && l.Client != nil {
			errs = append(errs, l.Client.check(a, c.Network))
		}
		switch {
		case c.Topology == "split" && len(a.Sidecars) == 0:
			errs = append(errs, fmt.Errorf("topology split puts each sidecar in its own container, and the app has none (app.sidecars); leave topology out"))
		case c.Topology != "split" && len(a.Sidecars) > 0:
			errs = append(errs, knobError("app.sidecars", "app.sidecars run each in a container (a process on the host) of their own, which is topology split; "+
				"topology %q would put them in the app's container, which ctrperf cannot do for arbitrary images: write topology: split on every configuration, "+
				"or build one image that runs the app and its sidecars together and declare no sidecars", c.Topology))
		}
	}
	return a, l, errors.Join(errs...)
}

// Services implements Workload: the app (the load's target) first, then
// each sidecar.
func (App) Services(c Config) ([]engine.Service, error) {
	a := c.App.(AppApp)
	all := append([]AppService{a.AppService}, a.Sidecars...)
	if c.Runtime.Traits().ProcessesHere() { // a guest's programs are not this machine's
		var missing []string
		for _, s := range all {
			if _, err := c.lookPath(s.HostCommand[0]); err != nil {
				missing = append(missing, fmt.Sprintf("%s (host_command of %s)", s.HostCommand[0], s.Name))
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("app on the host runtime needs %s, not found or not executable", strings.Join(missing, ", "))
		}
	}
	var out []engine.Service
	for _, s := range all {
		ready := s.Ready
		if ready.Port == 0 && len(s.Ports) == 0 {
			ready = engine.ReadyCheck{}
		}
		svc := engine.Service{
			Name: s.Name,
			// A recipe of ctrperf's (ctrperf/debian-base) is built when
			// missing, or taken from its override; other images as named.
			Image:       image.Resolve(s.Image),
			Entrypoint:  s.Entrypoint,
			Command:     s.Command,
			HostCommand: s.HostCommand,
			Env:         s.Env,
			Ports:       s.Ports,
			DataDir:     s.DataDir,
			User:        s.User,
			Resources:   c.Resources,
		}
		if c.Runtime.Traits().Processes && svc.DataDir == "" {
			// {{data:NAME}} works on every runtime: the host gives each
			// service a directory of the run.
			svc.DataDir = "/data"
		}
		if ready != (engine.ReadyCheck{}) {
			r := ready
			svc.Ready = &r
		}
		if s.Build != "" {
			svc.Build = &engine.BuildContext{Dir: s.Build, Dockerfile: s.Dockerfile, Name: "app-" + slug(filepath.Base(s.Build)), Content: s.content}
		}
		out = append(out, svc)
	}
	if l := c.Load.(AppLoad); l.Client != nil {
		client, err := l.Client.clientServices(c)
		if err != nil {
			return nil, err
		}
		out = append(out, client...)
	}
	return out, nil
}

// profile is the generator's profile for the load knobs and the window.
func (l AppLoad) profile(env Env) load.Profile {
	p := l.OpenLoop.profile(env, env.Started)
	p.Concurrency, p.Ops = l.Concurrency, l.Ops
	return p
}

// Drive implements Workload: the configured load, open or closed loop.
func (a App) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(AppLoad)
	if l.Client != nil {
		return driveClient(ctx, env, *l.Client)
	}
	if l.Search != nil {
		return RunSearch(ctx, env, l.Search, func(ctx context.Context, rate float64, started func()) (*results.Measurement, error) {
			senv := env
			senv.Started = started
			return a.MeasureRate(ctx, senv, rate)
		})
	}
	return a.measure(ctx, env, l.profile(env))
}

// MeasureRate drives the deployed app open loop at rate (sessions or
// operations per second) for the run's warm-up and window, everything else
// as the plan's load knobs say: one point of a capacity search.
func (a App) MeasureRate(ctx context.Context, env Env, rate float64) (*results.Measurement, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("app: rate %g: want a positive rate", rate)
	}
	l := env.Config.Load.(AppLoad)
	l.Rate, l.Concurrency, l.Ops = rate, 0, 0
	p := l.profile(env)
	p.Poisson = l.Poisson || l.Protocol == "memcached"
	return a.measure(ctx, env, p)
}

// measure runs one profile against the app's first port.
func (App) measure(ctx context.Context, env Env, p load.Profile) (*results.Measurement, error) {
	if env.Target == nil {
		return nil, errors.New("app: no target")
	}
	a := env.Config.App.(AppApp)
	l := env.Config.Load.(AppLoad)
	ep, err := env.Target.Endpoint("app", a.Ports[0])
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var drv load.Driver
	what := "HTTP"
	switch l.Protocol {
	case "memcached":
		what = "memcached"
		drv, err = load.NewMemcached(load.MemcachedConfig{Addr: ep.Addr, Mix: l.mix, Keys: int(l.Keys), ValueSize: int(l.ValueSize),
			Dial: env.Target.Dialer(), Seed: l.Seed})
	default:
		drv, err = load.NewHTTP(load.HTTPConfig{BaseURL: "http://" + ep.Addr, Scenario: l.scenario, Dial: load.Dialer(env.Target.Dialer()), Seed: l.Seed})
	}
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	m, err := load.Run(ctx, drv, p)
	if err != nil {
		return m, fmt.Errorf("app: %s load against %s: %w", what, ep.Addr, err)
	}
	var total, failed int64
	var errNames []string
	for _, op := range m.Operations {
		total += op.Count
		failed += op.ErrorCount()
		for e := range op.Errors {
			errNames = append(errNames, e)
		}
	}
	sort.Strings(errNames)
	switch {
	case total == 0:
		return m, fmt.Errorf("app: no request to %s completed in the measured window", ep.Addr)
	case failed == total:
		return m, fmt.Errorf("app: all %d requests to %s failed (%s): did the app stop?", total, ep.Addr, strings.Join(errNames, ", "))
	}
	return m, nil
}

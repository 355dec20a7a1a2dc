package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/kernel"
	"ctrperf/internal/labels"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// The noisy workload is seed 002's multi-tenant scenario: several web
// tenants, each a ticketd whose login (a PBKDF2 hash, ~4 ms of CPU at
// hash_cost 14) is a clean CPU-bound request, each offered a modest fixed
// open-loop rate; part-way into the measured window some of them turn hot
// (a much higher rate, or closed-loop saturation). Every tenant opts in to
// the isolate controller (label ctrperf.isolate=true), so the same plan
// measures the neighbours' latency with the controller off and on.
//
// On runtime kubernetes the tenants are pods (placed by kubernetes.node,
// their QoS class from resources and kubernetes.qos), dialed at their pod
// IPs by the same generator on this machine; app.hot_resources: none
// leaves the hot tenants without requests or limits (BestEffort: the
// static CPU manager's shared pool), seed 002's "leave the hot instances
// unpinned" next to quiet tenants that are Guaranteed and pinned.

// Label prefixes of the tenants' operations and service names.
const (
	noisyQuiet = "tenant" // tenant1, tenant2, ...: stay at the quiet rate
	noisyHot   = "hot"    // hot1, hot2, ...: turn hot at hot_after
	// LabelNoisyPage is the cheap GET /login every session starts with (it
	// hands out the form token the login needs), merged over all tenants.
	LabelNoisyPage = "login page"
)

func init() { Register(Noisy{}) }

// Noisy is the "noisy" workload.
type Noisy struct{}

var _ Workload = Noisy{}

// Name is "noisy".
func (Noisy) Name() string { return "noisy" }

// NoisyApp are the deployment knobs.
type NoisyApp struct {
	Tenants  int // ticketd containers
	HashCost int // log2 PBKDF2 iterations of a login: the CPU per request
	// HotResources is what the hot tenants get of the configuration's
	// resources: "same" (every tenant alike, the default) or "none" (no
	// limits or requests: unpinned, BestEffort on Kubernetes).
	HotResources string
}

// Values of app.hot_resources.
const (
	NoisyHotSame = "same"
	NoisyHotNone = "none"
)

// NoisyLoad are the load knobs.
type NoisyLoad struct {
	Rate float64 // quiet rate of every tenant, logins per second, Poisson arrivals
	Hot  int     // tenants that turn hot (0 .. tenants-1)
	// HotAfter is when they do: a fraction of the measured window
	// (HotAfterFrac) or a duration into it (HotAfterDur).
	HotAfterFrac float64
	HotAfterDur  time.Duration
	// HotRate (open loop) or HotConcurrency (closed loop) is the extra load
	// of a hot tenant from then on, on top of its quiet rate.
	HotRate        float64
	HotConcurrency int
	Timeout        time.Duration
	Seed           uint64
}

// Defaults: three tenants, one turning hot after a third of the window with
// two closed-loop clients (saturation); 4 ms logins at 10 per second each.
var (
	DefaultNoisyApp  = NoisyApp{Tenants: 3, HashCost: 14, HotResources: NoisyHotSame}
	DefaultNoisyLoad = NoisyLoad{Rate: 10, Hot: 1, HotAfterFrac: 1.0 / 3, HotConcurrency: 2, Timeout: 10 * time.Second, Seed: 1}
)

// ParseNoisyApp reads and checks the app knobs.
func ParseNoisyApp(m map[string]any) (NoisyApp, error) {
	a := DefaultNoisyApp
	k := newKnobs("app", m)
	whole(k, "tenants", &a.Tenants, 1, 64)
	whole(k, "hash_cost", &a.HashCost, 4, 24)
	k.enum("hot_resources", &a.HotResources, NoisyHotSame, NoisyHotNone)
	return a, k.err()
}

// ParseNoisyLoad reads and checks the load knobs.
func ParseNoisyLoad(m map[string]any) (NoisyLoad, error) {
	l := DefaultNoisyLoad
	k := newKnobs("load", m)
	k.float("rate", &l.Rate, 0.1, 1e5)
	whole(k, "hot", &l.Hot, 0, 63)
	if v, ok := k.get("hot_after"); ok {
		switch x := v.(type) {
		case string:
			d, err := time.ParseDuration(x)
			if err != nil || d <= 0 {
				k.fail("hot_after", v, "want a fraction of the window like 0.33 or a duration like 20s")
			} else {
				l.HotAfterFrac, l.HotAfterDur = 0, d
			}
		default:
			f, before := 0.0, len(k.errs)
			k.float("hot_after", &f, 0, 1)
			switch {
			case len(k.errs) > before:
			case f <= 0 || f >= 1:
				k.fail("hot_after", v, "a fraction of the window must be strictly between 0 and 1")
			default:
				l.HotAfterFrac = f
			}
		}
	}
	_, hasRate := m["hot_rate"]
	_, hasConc := m["hot_concurrency"]
	k.rate("hot_rate", &l.HotRate)
	whole(k, "hot_concurrency", &l.HotConcurrency, 0, 1024)
	k.duration("timeout", &l.Timeout, time.Millisecond, time.Hour)
	k.seed("seed", &l.Seed)
	if err := k.err(); err != nil {
		return l, err
	}
	switch {
	case hasRate && hasConc && l.HotRate > 0 && l.HotConcurrency > 0:
		return l, fmt.Errorf("load: hot_rate %g and hot_concurrency %d both set; choose open loop (hot_rate) or closed loop (hot_concurrency)", l.HotRate, l.HotConcurrency)
	case hasRate && l.HotRate > 0:
		l.HotConcurrency = 0
	}
	if l.Hot > 0 && l.HotRate == 0 && l.HotConcurrency == 0 {
		return l, fmt.Errorf("load: hot %d tenant(s) but hot_rate and hot_concurrency are 0: they would never turn hot", l.Hot)
	}
	return l, nil
}

// hotStart is how far into the measured window the hot phase starts.
func (l NoisyLoad) hotStart(window time.Duration) time.Duration {
	if l.HotAfterDur > 0 {
		return l.HotAfterDur
	}
	return time.Duration(l.HotAfterFrac * float64(window))
}

// Decode implements Workload.
func (Noisy) Decode(c Knobs) (any, any, error) {
	var errs []error
	a, aerr := ParseNoisyApp(c.App)
	l, lerr := ParseNoisyLoad(c.Load)
	errs = append(errs, aerr, lerr)
	if aerr == nil && lerr == nil && l.Hot >= a.Tenants {
		errs = append(errs, knobError("load.hot", "load.hot = %d but app.tenants = %d: at least one tenant must stay quiet, its latency is what is measured", l.Hot, a.Tenants))
	}
	own := c.Runtime.Traits().OwnAddress
	switch {
	case !c.Runtime.Traits().Isolate || own == "":
		errs = append(errs, fmt.Errorf("noisy needs runtime docker or kubernetes, not %q: its tenants are containers (which the isolate controller places) or pods", c.Runtime))
	case c.Network == "" || c.Network == own:
	case own == plan.NetworkPodIP:
		// Pods, dialed at their IPs: a Service or NodePort would put
		// kube-proxy's translation (softirq work on a node, charged to no
		// tenant) between the generator and each tenant, and hostNetwork
		// would have every tenant bind the same port of its node.
		errs = append(errs, knobError("network", "noisy dials each tenant's pod IP; network %q would %s: use network: pod-ip", c.Network, noisyKubeNetworkWhy(c.Network)))
	default:
		errs = append(errs, fmt.Errorf("noisy dials each tenant's container IP; network %q would route through docker-proxy, a CPU consumer outside every tenant's cgroup (a hidden tenant): use network: container-ip", c.Network))
	}
	if aerr == nil && lerr == nil && a.HotResources == NoisyHotNone && l.Hot == 0 {
		errs = append(errs, knobError("app.hot_resources", "none with load.hot 0: there is no hot tenant to leave without resources"))
	}
	if c.Topology != "" && c.Topology != "combined" {
		errs = append(errs, fmt.Errorf("topology %q: noisy tenants are single containers (combined)", c.Topology))
	}
	return a, l, errors.Join(errs...)
}

func noisyKubeNetworkWhy(m engine.NetworkMode) string {
	if m == plan.NetworkHostNetwork {
		return "have every tenant listen on the same port of its node's network"
	}
	return "put kube-proxy's translation on a node, CPU charged to no tenant (a hidden tenant), between the generator and each tenant"
}

// tenantNames are the service names: the quiet tenants, then the hot ones.
func tenantNames(a NoisyApp, l NoisyLoad) (quiet, hot []string) {
	for i := 1; i <= a.Tenants-l.Hot; i++ {
		quiet = append(quiet, noisyQuiet+strconv.Itoa(i))
	}
	for i := 1; i <= l.Hot; i++ {
		hot = append(hot, noisyHot+strconv.Itoa(i))
	}
	return quiet, hot
}

// Services implements Workload: one ticketd (SQLite, one seeded user) per
// tenant, each labelled for the isolate controller.
func (Noisy) Services(c Config) ([]engine.Service, error) {
	a, l := c.App.(NoisyApp), c.Load.(NoisyLoad)
	web := DefaultWebApp
	web.HashCost, web.SeedUsers, web.SeedProjects, web.SeedTickets = a.HashCost, 1, 1, 0
	quiet, hot := tenantNames(a, l)
	var out []engine.Service
	for i, name := range append(quiet, hot...) {
		s := engine.Service{
			Name: name, Image: image.Resolve(WebImageTicketd), Ports: []int{webPort}, DataDir: webDataDir,
			Command:   ticketdArgsFor(name, c, web, "sqlite:ticketd.db"),
			Resources: c.Resources,
			Ready:     &engine.ReadyCheck{Port: webPort, HTTPPath: "/healthz", Timeout: 3 * time.Minute},
		}
		if i >= len(quiet) && a.HotResources == NoisyHotNone {
			s.Resources = engine.Resources{}
		}
		if c.Runtime.Traits().Isolate {
			s.Labels = map[string]string{labels.Isolate: "true"}
		}
		out = append(out, s)
	}
	return out, nil
}

// noisyScenario is one tenant's session: the login page for its form token,
// then the login, whose password hash is the CPU the tenant burns.
func noisyScenario(tenant string) *load.Scenario {
	sc := WebScenario("user1", 1)
	sc.Name = "noisy " + tenant
	sc.Steps = sc.Steps[:2]
	sc.Steps[0].Label = LabelNoisyPage
	sc.Steps[1].Label = tenant
	return sc
}

// Drive implements Workload: every tenant at its quiet rate for the whole
// window, concurrently; at the hot phase start the hot tenants get their
// extra load as well, until the window ends. The generator is pinned once
// for all of them (load_cpuset), so it is never a hidden tenant, and runs
// in a cgroup of its own with a high CPU weight (protectGenerator), so that
// the hot tenant cannot delay it; generator_lateness_* says how late it
// was all the same.
func (w Noisy) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	if env.Target == nil {
		return nil, errors.New("noisy: no target")
	}
	a, l := env.Config.App.(NoisyApp), env.Config.Load.(NoisyLoad)
	hotAfter := l.hotStart(env.Window.Duration)
	if hotAfter <= 0 || hotAfter >= env.Window.Duration {
		return nil, fmt.Errorf("noisy: load.hot_after is %s into a %s window: the hot phase must start inside it", hotAfter, env.Window.Duration)
	}
	quiet, hot := tenantNames(a, l)
	addrs := map[string]string{}
	for _, name := range append(quiet, hot...) {
		addr, err := tenantAddr(env.Target, name)
		if err != nil {
			return nil, fmt.Errorf("noisy: %w", err)
		}
		addrs[name] = addr
	}
	unpin := func() error { return nil }
	if env.LoadCPUSet != "" {
		var err error
		if unpin, err = load.PinCPUs(load.DefaultTaskDir, env.LoadCPUSet); err != nil {
			return nil, fmt.Errorf("noisy: %w", err)
		}
	}
	protected, unprotect, unprotectedWhy := protectGenerator()

	base := time.Now()
	hotAt := base.Add(env.Window.Warmup + hotAfter)
	phase := newPhaseStats(hotAt)
	var once sync.Once
	started := func() {
		once.Do(func() {
			if env.Started != nil {
				env.Started()
			}
		})
	}
	dial := load.Dialer(env.Target.Dialer())
	type outcome struct {
		tenant string
		m      *results.Measurement
		err    error
	}
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	run := func(tenant string, isHot bool, p load.Profile) {
		defer wg.Done()
		drv, err := load.NewHTTP(load.HTTPConfig{BaseURL: "http://" + addrs[tenant], Scenario: noisyScenario(tenant), Dial: dial, Seed: p.Seed})
		var m *results.Measurement
		if err == nil {
			m, err = load.Run(ctx, &phaseDriver{Driver: drv, login: tenant, hot: isHot, stats: phase}, p)
		}
		mu.Lock()
		outs = append(outs, outcome{tenant, m, err})
		mu.Unlock()
	}
	for i, name := range append(quiet, hot...) {
		wg.Add(1)
		go run(name, i >= len(quiet), load.Profile{Rate: l.Rate, Poisson: true, Seed: l.Seed + uint64(i),
			Warmup: env.Window.Warmup, Duration: env.Window.Duration, Timeout: l.Timeout, Started: started})
	}
	if len(hot) > 0 {
		t := time.NewTimer(time.Until(hotAt))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			if env.HotPhase != nil {
				env.HotPhase(append([]string(nil), hot...))
			}
			rest := env.Window.Duration - hotAfter
			for i, name := range hot {
				wg.Add(1)
				p := load.Profile{Duration: rest, Timeout: l.Timeout, Seed: l.Seed + 1000 + uint64(i), Started: started}
				if l.HotRate > 0 {
					p.Rate, p.Poisson = l.HotRate, true
				} else {
					p.Concurrency = l.HotConcurrency
				}
				go run(name, true, p)
			}
		}
	}
	wg.Wait()
	var notes []string
	if unprotectedWhy != "" {
		notes = append(notes, unprotectedWhy)
	}
	if err := unprotect(); err != nil {
		notes = append(notes, "restoring the generator's cgroup: "+err.Error())
	}
	if err := unpin(); err != nil {
		notes = append(notes, "restoring the generator's CPU affinity: "+err.Error())
	}

	sort.Slice(outs, func(i, j int) bool { return outs[i].tenant < outs[j].tenant })
	var ms []*results.Measurement
	var errs []error
	for _, o := range outs {
		if o.err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", o.tenant, addrs[o.tenant], o.err))
		}
		if o.m != nil {
			ms = append(ms, o.m)
			for _, n := range o.m.Notes {
				notes = append(notes, o.tenant+": "+n)
			}
		}
	}
	m, err := mergeTenants(ms, env.Window.Duration)
	if err != nil {
		return nil, fmt.Errorf("noisy: %w", err)
	}
	m.Load.CPUSet = env.LoadCPUSet
	m.Load.Protected = protected
	phase.metrics(m, hot, env.Window.Duration-hotAfter)
	m.Tools = map[string]string{"noisy-driver": "ctrperf load (HTTP, one generator per tenant)"}
	m.Notes = append(m.Notes, notes...)
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("noisy: %w", err)
	}
	if m.Metrics[results.MetricThroughput] == 0 {
		return m, errors.New("noisy: no login succeeded in the measured window")
	}
	return m, nil
}

// protectGenerator moves the generator into a cgroup of its own with ten
// times a container's CPU weight for the drive (load.ProtectGenerator).
// Without root, or when that fails, the drive goes on unprotected and note
// says why: the lateness figures then show what the hot tenant cost it.
func protectGenerator() (protected string, restore func() error, note string) {
	restore = func() error { return nil }
	if os.Geteuid() != 0 {
		return "", restore, "the load generator ran unprotected: ctrperf is not root, so it could not move itself into a cgroup of its own and a hot tenant can delay it (see generator_lateness_p99_ms)"
	}
	p, undo, err := load.ProtectGenerator(kernel.DefaultFS())
	if err != nil {
		return "", restore, "the load generator ran unprotected: " + err.Error()
	}
	return p.String(), undo, ""
}

// tenantAddr is the container IP and port of a tenant.
func tenantAddr(t *engine.Target, service string) (string, error) {
	for _, c := range t.Containers {
		if c.Service == service {
			if c.IP == "" {
				return "", fmt.Errorf("tenant %s (%s) has no container IP", service, c.Name)
			}
			return c.IP + ":" + strconv.Itoa(webPort), nil
		}
	}
	return "", fmt.Errorf("target %s has no container for tenant %s", t.RunID, service)
}

// canceledKind is load's kind for requests cut off when a run ends; they
// are not observations of the service.
const canceledKind = "canceled"

// settleAfter is how long into the hot phase the quiet tenants' settled
// tail (quiet_p99_settled_ms) starts: after an isolate controller's
// reaction (goal 0.3 s) and the queue that built up before it.
const settleAfter = time.Second

// phaseStats keeps the logins of the hot phase apart: the quiet tenants'
// latency (all of the hot phase, and from settleAfter into it), and the
// hot tenants' completions while the neighbours are hot.
type phaseStats struct {
	hotStart time.Time
	mu       sync.Mutex
	quiet    *hdrhistogram.Histogram
	settled  *hdrhistogram.Histogram // quiet logins due settleAfter or more into the hot phase
	hot      *hdrhistogram.Histogram
	hotOK    int64
}

func newPhaseStats(hotStart time.Time) *phaseStats {
	return &phaseStats{hotStart: hotStart, quiet: results.NewHistogram(), settled: results.NewHistogram(), hot: results.NewHistogram()}
}

// observe records a login of the hot phase that was due at due.
func (p *phaseStats) observe(hot bool, due time.Time, latency time.Duration, kind string) {
	if kind == canceledKind || kind == load.KindNotStarted {
		return
	}
	us := results.HistValue(latency)
	p.mu.Lock()
	defer p.mu.Unlock()
	if hot {
		if kind == "" {
			p.hotOK++
		}
		_ = p.hot.RecordValue(us) // clamped to the range: cannot fail
		return
	}
	_ = p.quiet.RecordValue(us)
	if due.Sub(p.hotStart) >= settleAfter {
		_ = p.settled.RecordValue(us)
	}
}

// metrics adds the hot-phase figures: quiet_p50_ms / quiet_p99_ms over the
// quiet tenants' logins, quiet_p99_settled_ms over those due settleAfter or
// more into the hot phase (what is left of the tail once a controller has
// reacted: the difference to quiet_p99_ms is what the reaction cost) and,
// with hot tenants, hot_throughput_per_s.
func (p *phaseStats) metrics(m *results.Measurement, hot []string, phase time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet.TotalCount() > 0 {
		m.Metrics[results.MetricQuietP50Ms] = float64(p.quiet.ValueAtQuantile(50)) / 1000
		m.Metrics[results.MetricQuietP99Ms] = float64(p.quiet.ValueAtQuantile(99)) / 1000
	}
	if p.settled.TotalCount() > 0 { // all-quiet too: the baseline of the ratio
		m.Metrics[results.MetricQuietP99SettledMs] = float64(p.settled.ValueAtQuantile(99)) / 1000
	}
	if len(hot) > 0 && phase > 0 {
		m.Metrics[results.MetricHotThroughput] = float64(p.hotOK) / phase.Seconds()
		if p.hot.TotalCount() > 0 {
			m.Metrics[results.MetricHotP99Ms] = float64(p.hot.ValueAtQuantile(99)) / 1000
		}
	}
}

// phaseDriver hands every login observation of the hot phase to the phase
// statistics as well as to the run's own recorder.
type phaseDriver struct {
	load.Driver
	login string // the login step's label (the tenant's name)
	hot   bool
	stats *phaseStats
}

func (d *phaseDriver) NewVU(id int) (load.VU, error) {
	vu, err := d.Driver.NewVU(id)
	if err != nil {
		return nil, err
	}
	return phaseVU{VU: vu, d: d}, nil
}

type phaseVU struct {
	load.VU
	d *phaseDriver
}

func (v phaseVU) Run(ctx context.Context, s load.Session, rec load.Recorder) bool {
	if s.Due.Before(v.d.stats.hotStart) {
		return v.VU.Run(ctx, s, rec)
	}
	return v.VU.Run(ctx, s, phaseRecorder{Recorder: rec, d: v.d, due: s.Due})
}

type phaseRecorder struct {
	load.Recorder
	d   *phaseDriver
	due time.Time // the session's due time
}

func (r phaseRecorder) Observe(label string, latency time.Duration, bytes int64, kind string) {
	r.Recorder.Observe(label, latency, bytes, kind)
	if label == r.d.login {
		r.d.stats.observe(r.d.hot, r.due, latency, kind)
	}
}

// mergeTenants adds the tenants' measurements into one: operations of the
// same label merged (results.OperationMerger), generator figures summed
// over the runs that cover the whole window, the generator's lateness the
// worst of any run (p99 and max, also as the metrics
// generator_lateness_p99_ms and generator_lateness_max_ms: client delay
// that the latencies include, apart from server delay), and
// throughput_per_s the successful logins of all tenants per second of the
// window.
func mergeTenants(ms []*results.Measurement, window time.Duration) (*results.Measurement, error) {
	out := &results.Measurement{DurationS: window.Seconds(), Metrics: map[string]float64{}, Load: &results.LoadStats{Mode: "open"}}
	var ops results.OperationMerger
	for _, m := range ms {
		if err := ops.Add(m.Operations); err != nil {
			return nil, err
		}
		if ld := m.Load; ld != nil {
			if ld.Mode == "open" && math.Abs(m.DurationS-window.Seconds()) < 1e-9 {
				out.Load.AddRates(ld)
			}
			// One process drives every tenant: its CPU time is the
			// longest run's, its lateness the worst any run saw.
			out.Load.CPUSeconds = max(out.Load.CPUSeconds, ld.CPUSeconds)
			out.Load.KeepWorstLateness(ld)
		}
	}
	var err error
	if out.Operations, err = ops.Operations(); err != nil {
		return nil, err
	}
	var ok int64
	for label, op := range out.Operations {
		if label != LabelNoisyPage {
			ok += op.Count - op.ErrorCount()
		}
	}
	if window > 0 {
		out.Metrics[results.MetricThroughput] = float64(ok) / window.Seconds()
	}
	if out.Load.LatenessMaxMs > 0 {
		out.Metrics[results.MetricGeneratorLatenessP99Ms] = out.Load.LatenessP99Ms
		out.Metrics[results.MetricGeneratorLatenessMaxMs] = out.Load.LatenessMaxMs
	}
	return out, nil
}

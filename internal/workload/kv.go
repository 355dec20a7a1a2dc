package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/labels"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/selfbin"
)

func init() { Register(KV{}) }

// KV is memcached driven over the memcached text protocol by load's
// generator (seed 004's memslap run). It isolates the network path: the
// server does almost no work per operation, so what a configuration adds to
// every round trip (docker-proxy, NAT, a bridge) is most of what is measured.
type KV struct{}

var _ Workload = KV{}

// Name implements Workload.
func (KV) Name() string { return "kv" }

// KVApp are the server knobs.
type KVApp struct {
	Threads     int64 // memcached -t
	MemoryMB    int64 // memcached -m
	Connections int64 // memcached -c: simultaneous connections it accepts
}

// KVLoad are the load knobs.
type KVLoad struct {
	Mode string // "closed" (memslap: N connections back to back) or "open" (a fixed rate)
	// OpenLoop: Rate is operations per second (mode open); Search, when
	// set, finds the highest rate that meets an SLO instead of measuring
	// one window, and makes Mode "open".
	OpenLoop
	Concurrency int64  // closed loop: connections
	Ops         int64  // closed loop: stop after this many measured operations (memslap --execute-number); 0: run for the window
	Mix         string // "set", "get", "get=9,set=1"
	ValueSize   int64  // bytes
	Keys        int64  // key space
	// Client is where the generator runs: "host" (ctrperf itself, in the
	// client namespace of the network knob) or "container" (seed 004's
	// memslap in a container --link'ed to the server: `ctrperf load` in a
	// container of its own on the run's bridge network, dialing the
	// server's container IP).
	Client string
	// mix is Mix as the generator takes it, read once by ParseKVLoad.
	mix map[string]float64
}

// Where the kv generator runs (KVLoad.Client).
const (
	kvClientHost      = "host"
	kvClientContainer = "container"
)

// Defaults: seed 004's memslap (set only, concurrency 4) and memcached's own
// defaults (-t 4, -m 64 raised to 256 so the key space never evicts).
var (
	DefaultKVApp  = KVApp{Threads: 4, MemoryMB: 256, Connections: 4096}
	DefaultKVLoad = KVLoad{Mode: "closed", Concurrency: 4, Mix: "set", ValueSize: 100, Keys: 10000, Client: kvClientHost,
		OpenLoop: OpenLoop{Poisson: true, Seed: 1, Timeout: 10 * time.Second, MaxInFlight: load.DefaultMaxInFlight}}
)

// ParseKVApp reads and checks the app knobs.
func ParseKVApp(m map[string]any) (KVApp, error) {
	a := DefaultKVApp
	k := newKnobs("app", m)
	whole(k, "threads", &a.Threads, 1, 64)
	whole(k, "memory_mb", &a.MemoryMB, 16, 16384)
	whole(k, "connections", &a.Connections, 16, 1<<20)
	return a, k.err()
}

// ParseKVLoad reads and checks the load knobs.
func ParseKVLoad(m map[string]any) (KVLoad, error) {
	l := DefaultKVLoad
	k := newKnobs("load", m)
	k.enum("mode", &l.Mode, "closed", "open")
	k.openLoop(&l.OpenLoop)
	whole(k, "concurrency", &l.Concurrency, 1, 4096)
	whole(k, "ops", &l.Ops, 0, 1<<40)
	k.str("mix", &l.Mix, nil)
	if mix, err := load.ParseMix(l.Mix); err != nil {
		k.fail("mix", l.Mix, "%v", err)
	} else {
		for op := range mix {
			if op != "get" && op != "set" {
				k.fail("mix", l.Mix, "unknown operation %q (get, set)", op)
			}
		}
		l.mix = mix
	}
	whole(k, "value_size", &l.ValueSize, 1, 1<<20)
	whole(k, "keys", &l.Keys, 1, 1<<30)
	k.enum("client", &l.Client, kvClientHost, kvClientContainer)
	if err := k.err(); err != nil {
		return l, err
	}
	if l.Search != nil {
		if err := searchConflicts(m, l.Search, "rate", "concurrency", "ops"); err != nil {
			return l, err
		}
		if l.Mode == "closed" && m["mode"] != nil {
			return l, knobError("load.mode", "load.mode closed with load.search: a capacity search is open loop (leave mode out or write open)")
		}
		l.Mode, l.Concurrency = "open", 0
		return l, nil
	}
	switch {
	case l.Mode == "open" && l.Rate <= 0:
		return l, knobError("load.rate", "load.mode open needs load.rate > 0 (operations per second)")
	case l.Mode == "open" && l.Ops > 0:
		return l, knobError("load.ops", "load.ops (memslap --execute-number) applies to mode closed only; open loop runs for the plan's duration")
	case l.Mode == "closed" && l.Rate > 0:
		return l, knobError("load.rate", "load.rate %v is for mode open; closed loop runs load.concurrency connections back to back", l.Rate)
	}
	return l, l.checkLoop()
}

// Decode implements Workload.
func (KV) Decode(k Knobs) (any, any, error) {
	a, aerr := ParseKVApp(k.App)
	l, lerr := ParseKVLoad(k.Load)
	if lerr == nil && l.Client == kvClientContainer {
		switch k.Network {
		case engine.NetworkPublished, engine.NetworkPublishedExternal:
			lerr = knobError("load.client", "load.client container reaches memcached at its container IP on the run's bridge network (seed 004's --link); network %s (a published port) would not be on its path: use network container-ip, or host", k.Network)
		}
	}
	return a, l, errors.Join(aerr, lerr)
}

// kvArgv is memcached's command line. -U 0 turns UDP off (memslap's TCP
// only); -u nobody because memcached refuses to run as root without -u.
// {{listen:kv}}: every address of a container's own namespace, loopback on
// the host's (or the one address a load host on another machine dials).
func kvArgv(bin string, a KVApp) []string {
	return []string{bin, "-l", "{{listen:kv}}", "-p", "{{port:kv:11211}}", "-U", "0",
		"-m", strconv.FormatInt(a.MemoryMB, 10), "-t", strconv.FormatInt(a.Threads, 10),
		"-c", strconv.FormatInt(a.Connections, 10), "-u", "nobody"}
}

// Services implements Workload: one memcached, from the Debian base image or
// the host's /usr/bin/memcached.
func (KV) Services(c Config) ([]engine.Service, error) {
	if err := hostTools("kv", c, "memcached"); err != nil {
		return nil, err
	}
	a := c.App.(KVApp)
	svcs := []engine.Service{{
		Name:      "kv",
		Image:     baseImage(),
		Command:   kvArgv("memcached", a),
		Ports:     []int{11211},
		Resources: c.Resources,
		Ready:     &engine.ReadyCheck{Port: 11211, Timeout: 30 * time.Second},
	}}
	if c.Load.(KVLoad).Client != kvClientContainer {
		return svcs, nil
	}
	// The client: ctrperf itself (the ticketd image is the static binary
	// FROM scratch), idle until Drive execs `ctrperf load` in it. Not
	// limited by the configuration's resources, which are the server's.
	client := engine.Service{Name: kvClientService, Image: image.Resolve(WebImageTicketd),
		Entrypoint: []string{image.SelfPath}, Command: []string{selfbin.Idle}, Labels: map[string]string{labels.Role: "client"}}
	if c.Runtime.Traits().Processes {
		bin, err := selfbin.Path()
		if err != nil {
			return nil, fmt.Errorf("kv client on the host: %w", err)
		}
		client.HostCommand = []string{bin, selfbin.Idle}
	}
	return append(svcs, client), nil
}

// kvClientService is the service name of kv's client container.
const kvClientService = "client"

// kvProfile turns the load knobs and the window into the generator's profile.
func kvProfile(l KVLoad, env Env) load.Profile {
	p := l.profile(env, env.Started)
	if l.Mode != "open" {
		p.Rate, p.Poisson, p.Concurrency, p.Ops = 0, false, int(l.Concurrency), l.Ops
	}
	return p
}

// Drive implements Workload: the memcached generator over the target's own
// dialer, so published-external traffic leaves from the client namespace.
func (KV) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(KVLoad)
	ep, err := env.Target.Endpoint("kv", 11211)
	if err != nil {
		return nil, fmt.Errorf("kv: %w", err)
	}
	window := kvWindow
	if l.Client == kvClientContainer {
		window = kvClientWindow
		if ep.Addr, err = kvAddrFromClient(env.Target, ep); err != nil {
			return nil, err
		}
	}
	if l.Search != nil {
		// A step where nothing completes, or everything fails, fails the
		// SLO; it does not end the search.
		return RunSearch(ctx, env, l.Search, func(ctx context.Context, rate float64, started func()) (*results.Measurement, error) {
			sl := l
			sl.Rate = rate
			p := kvProfile(sl, env)
			p.Started = started
			return window(ctx, env, l, p, ep.Addr)
		})
	}
	m, err := window(ctx, env, l, kvProfile(l, env), ep.Addr)
	if err != nil {
		return m, err
	}
	var total, failed int64
	for _, op := range m.Operations {
		total += op.Count
		failed += op.ErrorCount()
	}
	if total == 0 {
		return m, fmt.Errorf("kv: no operation completed against %s in the measured window", ep.Addr)
	}
	if failed == total {
		return m, fmt.Errorf("kv: all %d operations against %s failed", total, ep.Addr)
	}
	return m, nil
}

// kvWindow drives one window with a fresh generator (its hit and miss
// counters are the window's).
func kvWindow(ctx context.Context, env Env, l KVLoad, p load.Profile, addr string) (*results.Measurement, error) {
	d, err := load.NewMemcached(load.MemcachedConfig{Addr: addr, Mix: l.mix, Keys: int(l.Keys), ValueSize: int(l.ValueSize),
		Dial: env.Target.Dialer(), Seed: l.Seed})
	if err != nil {
		return nil, fmt.Errorf("kv: %w", err)
	}
	m, err := load.Run(ctx, d, p)
	if err != nil {
		return m, fmt.Errorf("kv: memcached load against %s: %w", addr, err)
	}
	if m.Tools == nil {
		m.Tools = map[string]string{}
	}
	m.Tools["memcached-driver"] = "ctrperf load (memcached text protocol)"
	return m, nil
}

// kvAddrFromClient is where the client container reaches memcached: the
// server container's IP on the run's bridge network and its own port, as a
// --link resolved; on a network shared with the host (host runtime,
// docker --net=host) the endpoint's loopback address.
func kvAddrFromClient(t *engine.Target, ep engine.Endpoint) (string, error) {
	if t.Runtime.Traits().Processes || t.Network == engine.NetworkHost || plan.KubeNetwork(t.Network) {
		// A pod dials what the endpoint names (pod IP, ClusterIP,
		// NodePort): the network's own path, from inside the cluster.
		return ep.Addr, nil
	}
	for _, c := range t.Containers {
		if c.Service == "kv" && c.IP != "" {
			return net.JoinHostPort(c.IP, strconv.Itoa(ep.Port)), nil
		}
	}
	return "", fmt.Errorf("kv: the client container needs the server's container IP, and target %s has none", t.RunID)
}

// kvClientArgv is the `ctrperf load` command line that drives profile p
// from the client container: the same generator, flag for field.
func kvClientArgv(bin string, l KVLoad, p load.Profile, addr string) []string {
	argv := []string{bin, "load", addr, "--memcached", "--format", "json",
		"--mix", l.Mix, "--value-size", strconv.FormatInt(l.ValueSize, 10), "--keys", strconv.FormatInt(l.Keys, 10),
		"--seed", strconv.FormatUint(p.Seed, 10), "--timeout", p.Timeout.String(),
		"--warmup", p.Warmup.String(), "--duration", p.Duration.String()}
	if p.Rate > 0 {
		argv = append(argv, "--rate", strconv.FormatFloat(p.Rate, 'f', -1, 64), "--max-in-flight", strconv.Itoa(p.MaxInFlight))
		if p.Poisson {
			argv = append(argv, "--poisson")
		}
		if p.Ramp > 0 {
			argv = append(argv, "--ramp", p.Ramp.String())
		}
	} else {
		argv = append(argv, "--concurrency", strconv.Itoa(p.Concurrency))
		if p.Ops > 0 {
			argv = append(argv, "--ops", strconv.FormatInt(p.Ops, 10))
		}
	}
	if p.CPUSet != "" {
		argv = append(argv, "--cpuset", p.CPUSet)
	}
	return argv
}

// kvClientWindow drives one window from the client container: `ctrperf
// load --memcached --format json` exec'd there prints the measurement
// (histograms included) that the host-side generator would have returned.
func kvClientWindow(ctx context.Context, env Env, l KVLoad, p load.Profile, addr string) (*results.Measurement, error) {
	bin := image.SelfPath
	if env.Target.Runtime.Traits().Processes {
		var err error
		if bin, err = selfbin.Path(); err != nil {
			return nil, fmt.Errorf("kv client: %w", err)
		}
	}
	argv := kvClientArgv(bin, l, p, addr)
	// The window starts inside the container after the warm-up; the
	// observers' series start with it (give or take the exec's start-up,
	// a few milliseconds).
	if p.Started != nil {
		t := time.AfterFunc(p.Warmup, p.Started)
		defer t.Stop()
	}
	res, err := env.Engine.Exec(ctx, env.Target, kvClientService, argv)
	if err != nil {
		return nil, fmt.Errorf("kv: the client container: %w", err)
	}
	// 3: an open-loop shortfall, reported in the measurement itself.
	if res.ExitCode != 0 && res.ExitCode != 3 {
		return nil, fmt.Errorf("kv: ctrperf load in the client container exited %d: %s", res.ExitCode, lastLines(res.Stderr, 5))
	}
	var m results.Measurement
	if err := json.Unmarshal(res.Stdout, &m); err != nil {
		return nil, fmt.Errorf("kv: the client container's measurement: %w (stderr: %s)", err, lastLines(res.Stderr, 5))
	}
	if m.Tools == nil {
		m.Tools = map[string]string{}
	}
	m.Tools["memcached-driver"] = "ctrperf load (memcached text protocol) in a container on the run's network"
	return &m, nil
}

// Package workload defines what runs and what drives it: each workload turns
// a configuration's knobs into the services to deploy and, once they are
// deployed, drives load against them and returns the measurement.
//
// One file per workload (web, kv, fileio, bonnie, exec, ctxsw, oltp, cpu,
// noisy, app, command); each
// registers itself with Register in an init function. A workload's knobs
// are a struct of its own (WebApp, KVLoad, ...) with defaults and range
// checks, decoded once when the plan is read (Decode, through
// bench.Schema); Services and Drive receive them typed in Config.
package workload

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

// Knobs are a configuration as a workload decodes it: its app and load
// maps as the plan wrote them (plan-level ones merged in), and the knobs
// they combine with.
type Knobs struct {
	Runtime  engine.Runtime
	Network  engine.NetworkMode
	Data     engine.DataPlacement
	Topology string // "combined" or "split"
	App      map[string]any
	Load     map[string]any
	// Dir is the absolute directory relative paths in the knobs are read
	// from (the plan's base_dir, by default the plan file's directory).
	Dir string
}

// Config is one configuration's workload-level settings, decoded: what
// Services and Drive work from.
type Config struct {
	Runtime  engine.Runtime
	Network  engine.NetworkMode
	Data     engine.DataPlacement
	Topology string // "combined" or "split"
	// Resources for the workload's services.
	Resources engine.Resources
	// App and Load are the workload's own typed knobs, as its Decode
	// returned them (e.g. WebApp and WebLoad).
	App, Load any
	// LookPath finds the programs the host runtime runs (nil:
	// exec.LookPath); `ctrperf doctor` asks about a machine through it.
	LookPath func(string) (string, error)
}

// lookPath finds a program of the host runtime through c.LookPath.
func (c Config) lookPath(name string) (string, error) {
	if c.LookPath != nil {
		return c.LookPath(name)
	}
	return lookPath(name)
}

// ConfigFor is what the workload sees of a plan's configuration; the plan
// decoded its knobs with the workload's Decode (through a plan.Schema).
func ConfigFor(c *plan.Configuration) Config {
	return Config{Runtime: c.Runtime, Network: c.Network, Data: c.Data, Topology: c.Topology,
		Resources: c.Resources, App: c.Decoded.App, Load: c.Decoded.Load}
}

// KnobsOf is a plan configuration's knobs as Decode reads them.
func KnobsOf(c *plan.Configuration) Knobs {
	return Knobs{Runtime: c.Runtime, Network: c.Network, Data: c.Data, Topology: c.Topology,
		App: maps.Clone(c.App), Load: maps.Clone(c.Load), Dir: c.Dir}
}

// Decoded is c with its knobs decoded by w, for callers that build a
// configuration themselves (tests, tools) instead of reading a plan.
func Decoded(w Workload, k Knobs, res engine.Resources) (Config, error) {
	app, ld, err := w.Decode(k)
	return Config{Runtime: k.Runtime, Network: k.Network, Data: k.Data, Topology: k.Topology,
		Resources: res, App: app, Load: ld}, err
}

// UsesDir says whether a workload's decoded knobs (its app or load value)
// read files relative to the plan's directory, such as a scenario or a
// Dockerfile context: the plan as run must then record that directory.
func UsesDir(knobs any) bool {
	u, ok := knobs.(interface{ UsesDir() bool })
	return ok && u.UsesDir()
}

// Window is the timing of one run.
type Window struct {
	Warmup   time.Duration // driven but not recorded
	Duration time.Duration // the measured window
}

// WindowOf is the timing of every run of a plan.
func WindowOf(p *plan.Plan) Window { return Window{Warmup: p.Warmup, Duration: p.Duration} }

// Env is what a driver gets to act on a deployed target.
type Env struct {
	Engine engine.Engine
	Target *engine.Target
	Config Config
	Window Window
	// Started is called when the measured window starts (after warm-up), so
	// observers can align their samples. A driver that measures several
	// windows (a capacity search, RunSearch) calls it once, at the first:
	// the run's system series then covers every window from there, the
	// warm-ups of the later steps included.
	Started func()
	// Progress, when set, hears a line about a long drive's progress (a
	// capacity search's steps); bench run prints it.
	Progress func(msg string)
	// LoadCPUSet pins the load generator, when the plan asks for it.
	LoadCPUSet string
	// HotPhase, when set, is called by a workload that turns some of its
	// services hot in the middle of the window (noisy), with their service
	// names, at the moment it does: the runner times the isolate
	// controller's reaction from there.
	HotPhase func(services []string)
}

// Workload is one kind of workload.
type Workload interface {
	Name() string
	// Decode checks a configuration's workload-specific knobs (app, load,
	// and how they combine with runtime, network, data and topology) and
	// returns them as the workload's typed values; the error lists every
	// problem, each knob's as a *plan.KnobError. The plan calls it once,
	// when it is read; Services and Drive trust what it returned.
	Decode(k Knobs) (app, load any, err error)
	// Services returns what to deploy for a configuration.
	Services(c Config) ([]engine.Service, error)
	// Drive runs warm-up then the measured window against the deployed target.
	Drive(ctx context.Context, env Env) (*results.Measurement, error)
}

var (
	mu       sync.RWMutex
	registry = map[string]Workload{}
)

// Register makes a workload available by name. It panics on duplicates
// because that is a programming error.
func Register(w Workload) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[w.Name()]; dup {
		panic("workload registered twice: " + w.Name())
	}
	registry[w.Name()] = w
}

// Get returns a registered workload.
func Get(name string) (Workload, error) {
	mu.RLock()
	defer mu.RUnlock()
	w, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown workload %q (known: %v)", name, namesLocked())
	}
	return w, nil
}

// Names lists the registered workloads, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Package workload defines what runs and what drives it: each workload turns
// a configuration's knobs into the services to deploy and, once they are
// deployed, drives load against them and returns the measurement.
//
// One file per workload (web, kv, fileio, exec, oltp, cpu); each registers
// itself with Register in an init function.
package workload

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/results"
)

// Config is one configuration's workload-level settings, as the plan gives
// them after matrix expansion.
type Config struct {
	Runtime  engine.Runtime
	Network  engine.NetworkMode
	Data     engine.DataPlacement
	Topology string // "combined" or "split"
	// Resources for the workload's services.
	Resources engine.Resources
	// App knobs (worker cap, pool size, DB settings, ...), workload-specific.
	App map[string]any
	// Load profile, workload-specific keys (rate, concurrency, mix, ...).
	Load map[string]any
}

// Window is the timing of one run.
type Window struct {
	Warmup   time.Duration // driven but not recorded
	Duration time.Duration // the measured window
}

// Env is what a driver gets to act on a deployed target.
type Env struct {
	Engine engine.Engine
	Target *engine.Target
	Config Config
	Window Window
	// Started is called when the measured window starts (after warm-up), so
	// observers can align their samples.
	Started func()
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
	// Validate checks the workload-specific knobs (app, load) before anything runs.
	Validate(c Config) error
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

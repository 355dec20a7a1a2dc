package bench

import (
	"context"
	"fmt"
	"sync"

	"ctrperf/internal/engine"
)

// A runtime whose engine links a large client of its own (kubernetes:
// client-go, in internal/engine/kube) is not constructed here but by the
// opener the program registers for it (cmd/ctrperf imports
// internal/runtimes, which registers kubernetes), so that bench, its tests
// and its fuzz target do not link the client. Engines.open asks the
// registry for every runtime it does not construct itself (host, docker,
// podman, vm); an unregistered one is not_run with its name and why.

// RuntimeOpener opens the engine of one runtime for one EngineSpec. It is
// called once per distinct spec (Engines remembers the result, a failure
// included). A finding that would fail every run alike (no cluster, no
// rights) is returned as RuntimeUnavailable, a not_run in its words.
type RuntimeOpener func(ctx context.Context, spec engine.EngineSpec, o OpenOptions) (engine.Engine, engine.Info, error)

// OpenOptions are what an opener gets of Engines.
type OpenOptions struct {
	// RunID is Engines.RunID: the session, which names what the engine
	// creates so that `ctrperf clean` can tell whose it is.
	RunID string
	// Flags are Engines.RuntimeFlags: the program's flags for the
	// runtimes it registers, by name ("kubeconfig").
	Flags map[string]string
}

var registry struct {
	mu        sync.RWMutex
	openers   map[engine.Runtime]RuntimeOpener
	isolators map[engine.Runtime]Isolator
}

// RegisterRuntime makes open the constructor of runtime rt's engines, from
// an init function. Registering a runtime twice, or one that bench
// constructs itself, is a programming error and panics.
func RegisterRuntime(rt engine.Runtime, open RuntimeOpener) {
	switch rt {
	case engine.RuntimeHost, engine.RuntimeDocker, engine.RuntimePodman, engine.RuntimeVM:
		panic(fmt.Sprintf("bench: RegisterRuntime(%q): bench constructs that runtime itself", rt))
	}
	if open == nil {
		panic(fmt.Sprintf("bench: RegisterRuntime(%q): nil opener", rt))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.openers == nil {
		registry.openers = map[engine.Runtime]RuntimeOpener{}
	}
	if _, dup := registry.openers[rt]; dup {
		panic(fmt.Sprintf("bench: RegisterRuntime(%q) called twice", rt))
	}
	registry.openers[rt] = open
}

// registeredOpener is the opener of rt, nil when none is registered.
func registeredOpener(rt engine.Runtime) RuntimeOpener {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return registry.openers[rt]
}

// RuntimeUnavailable is the error an opener returns when its runtime cannot
// run here at all: the runtime's configurations are not_run with these
// words alone (as runtime vm's are).
func RuntimeUnavailable(reason string) error { return runtimeUnavailable(reason) }

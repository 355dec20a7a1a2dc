package bench

import (
	"context"
	"errors"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
)

// withOpeners replaces the registry for one test.
func withOpeners(t *testing.T, openers map[engine.Runtime]RuntimeOpener) {
	t.Helper()
	registry.mu.Lock()
	saved := registry.openers
	registry.openers = openers
	registry.mu.Unlock()
	t.Cleanup(func() {
		registry.mu.Lock()
		registry.openers = saved
		registry.mu.Unlock()
	})
}

// TestUnregisteredRuntimeUnavailable: without internal/runtimes (bench's
// own tests do not link it), runtime kubernetes is not_run in words that
// name it, as vm's is.
func TestUnregisteredRuntimeUnavailable(t *testing.T) {
	withOpeners(t, nil)
	e := &Engines{RunID: "s1"}
	_, _, err := e.Engine(context.Background(), plan.RuntimeKubernetes, engine.EngineSpec{})
	var un runtimeUnavailable
	if !errors.As(err, &un) {
		t.Fatalf("err %v (%T), want runtimeUnavailable", err, err)
	}
	if want := "kubernetes: this program was built without runtime kubernetes"; err.Error() != want {
		t.Errorf("err %q, want %q", err, want)
	}
	if _, _, err := e.Engine(context.Background(), engine.Runtime("lxc"), engine.EngineSpec{}); err == nil ||
		errors.As(err, &un) || err.Error() != `unknown runtime "lxc"` {
		t.Errorf("unknown runtime: %v", err)
	}
}

// TestRegisteredRuntime: a registered opener gets the spec and Engines'
// session and kubeconfig, is called once per spec (its result, failure
// included, is remembered), and its RuntimeUnavailable is a not_run reason.
func TestRegisteredRuntime(t *testing.T) {
	type call struct {
		spec engine.EngineSpec
		o    OpenOptions
	}
	var calls []call
	withOpeners(t, map[engine.Runtime]RuntimeOpener{
		plan.RuntimeKubernetes: func(ctx context.Context, spec engine.EngineSpec, o OpenOptions) (engine.Engine, engine.Info, error) {
			calls = append(calls, call{spec, o})
			if spec.Kube.Context == "gone" {
				return nil, engine.Info{}, RuntimeUnavailable("kubernetes: API server does not answer")
			}
			return nil, engine.Info{Runtime: string(plan.RuntimeKubernetes), Name: spec.Kube.Context}, nil
		},
	})
	e := &Engines{RunID: "s1", RuntimeFlags: map[string]string{"kubeconfig": "/k/config"}}
	ctx := context.Background()
	lab := engine.EngineSpec{Kube: plan.KubeSpec{Context: "lab"}}
	for range 2 {
		_, info, err := e.Engine(ctx, plan.RuntimeKubernetes, lab)
		if err != nil || info.Name != "lab" || info.Runtime != string(plan.RuntimeKubernetes) {
			t.Fatalf("Engine: %+v, %v", info, err)
		}
	}
	gone := engine.EngineSpec{Kube: plan.KubeSpec{Context: "gone"}}
	for range 2 {
		_, _, err := e.Engine(ctx, plan.RuntimeKubernetes, gone)
		var un runtimeUnavailable
		if !errors.As(err, &un) || err.Error() != "kubernetes: API server does not answer" {
			t.Fatalf("unavailable: %v (%T)", err, err)
		}
	}
	if len(calls) != 2 || calls[0].spec.Kube.Context != "lab" || calls[1].spec.Kube.Context != "gone" {
		t.Fatalf("opener calls %+v, want lab then gone, once each", calls)
	}
	if o := calls[0].o; o.RunID != "s1" || o.Flags["kubeconfig"] != "/k/config" {
		t.Errorf("options %+v", calls[0].o)
	}
}

// TestRegisterRuntimeRefuses: bench's own runtimes and a second
// registration are programming errors.
func TestRegisterRuntimeRefuses(t *testing.T) {
	withOpeners(t, nil)
	open := func(context.Context, engine.EngineSpec, OpenOptions) (engine.Engine, engine.Info, error) {
		return nil, engine.Info{}, nil
	}
	panics := func(desc string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", desc)
			}
		}()
		f()
	}
	panics("docker", func() { RegisterRuntime(engine.RuntimeDocker, open) })
	panics("nil opener", func() { RegisterRuntime(plan.RuntimeKubernetes, nil) })
	RegisterRuntime(plan.RuntimeKubernetes, open)
	panics("twice", func() { RegisterRuntime(plan.RuntimeKubernetes, open) })
}

// closeCounter is an engine of a registered runtime that counts its Close.
type closeCounter struct {
	engine.Engine
	closed int
}

func (c *closeCounter) Close(context.Context) error { c.closed++; return nil }

// TestRegisteredRuntimeClosed: Engines.Close closes each engine a
// registered opener made, once (issue 35 item 2: a cluster session's
// namespace goes when the session ends, in the engine's Close).
func TestRegisteredRuntimeClosed(t *testing.T) {
	eng := &closeCounter{}
	withOpeners(t, map[engine.Runtime]RuntimeOpener{
		plan.RuntimeKubernetes: func(context.Context, engine.EngineSpec, OpenOptions) (engine.Engine, engine.Info, error) {
			return eng, engine.Info{}, nil
		},
	})
	e := &Engines{RunID: "s1"}
	if _, _, err := e.Engine(context.Background(), plan.RuntimeKubernetes, engine.EngineSpec{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if eng.closed != 1 {
		t.Errorf("closed %d times, want once", eng.closed)
	}
}

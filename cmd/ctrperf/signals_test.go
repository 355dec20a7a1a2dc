package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/isolate"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// stopSignals are the signals every long-running command must treat as
// Ctrl-C (SIGINT itself is the case everyone tests by hand).
var stopSignals = []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP}

// runUntilSignal executes cmd, sends sig to this process once ready is
// closed (the command holds its signal handler by then: without one,
// SIGHUP would end the test binary) and returns the command's error.
func runUntilSignal(t *testing.T, cmd *cobra.Command, sig syscall.Signal, ready <-chan struct{}) error {
	t.Helper()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	errc := make(chan error, 1)
	go func() { errc <- cmd.Execute() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("the command ended before it was running: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the command never got running")
	}
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("the command did not stop on %v", sig)
		return nil
	}
}

// readyWriter closes ready at its first write.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	ready chan struct{}
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.ready) })
	return w.buf.Write(b)
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func exitCode(err error) int {
	return exitcode.Of(err)
}

func TestLoadStopsOnSignals(t *testing.T) {
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			ready := make(chan struct{})
			var once sync.Once
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(ready) })
				w.Write([]byte("ok"))
			}))
			defer srv.Close()
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&bytes.Buffer{})
			root.SetArgs([]string{"load", srv.URL + "/", "--concurrency", "1", "--duration", "60s"})
			err := runUntilSignal(t, root, sig, ready)
			if exitCode(err) != 130 || !strings.Contains(out.String(), "GET /") {
				t.Errorf("err = %v (exit %d), want 130 with the table of what was measured:\n%s", err, exitCode(err), out.String())
			}
		})
	}
}

func TestObserveStopsOnSignals(t *testing.T) {
	root := "../../internal/observe/testdata/host-v1/t0/"
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			out := &readyWriter{ready: make(chan struct{})}
			cmd := newRootCmd()
			cmd.SetOut(out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs([]string{"observe", "--interval", "50ms", "--proc-root", root + "proc", "--sys-root", root + "sys", "--cgroup-root", root + "cgroup"})
			err := runUntilSignal(t, cmd, sig, out.ready)
			if err != nil || !strings.Contains(out.String(), "summary over") {
				t.Errorf("err = %v, want the summary printed after %v:\n%s", err, sig, out.String())
			}
		})
	}
}

// signalWorkload drives until it is stopped, telling driving when it starts.
type signalWorkload struct{}

var driving = make(chan struct{}, 1)

func (signalWorkload) Name() string                            { return "clisignal" }
func (signalWorkload) Decode(workload.Knobs) (any, any, error) { return nil, nil, nil }
func (signalWorkload) Services(workload.Config) ([]engine.Service, error) {
	return []engine.Service{{Name: "app", Image: "ctrperf/fake"}}, nil
}
func (signalWorkload) Drive(ctx context.Context, _ workload.Env) (*results.Measurement, error) {
	driving <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func init() { workload.Register(signalWorkload{}) }

// signalEngines is an engine provider that records what it deployed and
// tore down.
type signalEngines struct {
	mu                 sync.Mutex
	deployed, tornDown []string
	closed             int
}

func (p *signalEngines) Engine(context.Context, engine.Runtime, engine.EngineSpec) (engine.Engine, engine.Info, error) {
	return signalEngine{p}, engine.Info{Name: "fake"}, nil
}
func (p *signalEngines) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed++
	return nil
}

type signalEngine struct{ p *signalEngines }

func (signalEngine) Ping(context.Context) error { return nil }

func (e signalEngine) Info(context.Context) (engine.Info, error) {
	return engine.Info{Name: "fake"}, nil
}
func (e signalEngine) Deploy(_ context.Context, spec engine.DeploySpec) (*engine.Target, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.p.deployed = append(e.p.deployed, spec.RunID)
	return &engine.Target{RunID: spec.RunID}, nil
}
func (e signalEngine) Exec(context.Context, *engine.Target, string, []string) (engine.ExecResult, error) {
	return engine.ExecResult{}, nil
}
func (e signalEngine) Teardown(_ context.Context, t *engine.Target) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.p.tornDown = append(e.p.tornDown, t.RunID)
	return nil
}
func (e signalEngine) Close(context.Context) error { return nil }

func TestBenchRunStopsOnSignals(t *testing.T) {
	dir := t.TempDir()
	planPath := filepath.Join(dir, "signal.yaml")
	if err := os.WriteFile(planPath, []byte("name: signal\nworkload: clisignal\nrepetitions: 1\nwarmup: 0s\nduration: 60s\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			prov := &signalEngines{}
			out := filepath.Join(dir, sig.String())
			cmd := newBenchRunCmd(func(string) bench.EngineProvider { return prov })
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			cmd.SetArgs([]string{planPath, "--out", out, "--observe=false", "--quiet", "--allow-concurrent"}) // a unit test: a live session elsewhere on the machine is not its business
			ready := make(chan struct{})
			go func() { <-driving; close(ready) }()
			err := runUntilSignal(t, cmd, sig, ready)
			if exitCode(err) != 130 || !strings.Contains(err.Error(), "--resume "+out) {
				t.Errorf("err = %v (exit %d), want 130 and how to resume", err, exitCode(err))
			}
			prov.mu.Lock()
			defer prov.mu.Unlock()
			if len(prov.deployed) != 1 || strings.Join(prov.deployed, ",") != strings.Join(prov.tornDown, ",") || prov.closed != 1 {
				t.Errorf("deployed %v, torn down %v, engines closed %d: want the run torn down", prov.deployed, prov.tornDown, prov.closed)
			}
			if recs, _ := results.ReadDir(out); len(recs) != 0 {
				t.Errorf("the interrupted run was recorded: %+v", recs)
			}
		})
	}
}

// fakeController counts the restores.
type fakeController struct {
	mu      sync.Mutex
	stopped int
}

func (c *fakeController) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped++
	return nil
}

func TestIsolateRunRestoresOnSignals(t *testing.T) {
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			ctl := &fakeController{}
			ready := make(chan struct{})
			var got isolate.Options
			cmd := newIsolateRunCmd(func(_ context.Context, _ client.APIClient, o isolate.Options) (controller, error) {
				got = o
				close(ready)
				return ctl, nil
			})
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs([]string{"--state-dir", t.TempDir(), "--metrics", ""})
			err := runUntilSignal(t, cmd, sig, ready)
			if err != nil || ctl.stopped != 1 || !strings.Contains(out.String(), "restored") {
				t.Errorf("err = %v, restores %d, want one restore after %v:\n%s", err, ctl.stopped, sig, out.String())
			}
			if got.StateDir == "" {
				t.Error("the controller was not given the state directory")
			}
		})
	}
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// Parallel tests: the plans whose checks hold however busy the machine is
// (a run measured, a record complete, an interval around its ratio,
// nothing of the test's own runs left) call t.Parallel, as their measured
// windows are fixed times that overlap for free. Three stay sequential, so
// Go runs them before any parallel one: TestNestedEngineDocker and
// TestBenchPrivateEngineKilledDocker start a dockerd of their own, whose
// start flushes the iptables chains published ports go through, and
// TestNoisyStrictIsolateDocker needs its hot tenant to reach a share of a
// CPU.

// tinyWorkload serves tinyhttp (the engine tests' static HTTP server) and
// drives it closed-loop with one connection: the smallest workload that
// exercises the real pipeline end to end.
type tinyWorkload struct {
	image, bin string
	// onDrive, when set, is called at the start of every Drive.
	onDrive func(env workload.Env)
}

func (w *tinyWorkload) Name() string                            { return "benchtiny" }
func (w *tinyWorkload) Decode(workload.Knobs) (any, any, error) { return nil, nil, nil }
func (w *tinyWorkload) Services(workload.Config) ([]engine.Service, error) {
	return []engine.Service{{
		Name: "app", Image: w.image, Ports: []int{8080},
		Command:     []string{"serve", ":{{port:app:8080}}", "app"},
		HostCommand: []string{w.bin, "serve", "127.0.0.1:{{port:app:8080}}", "app"},
		Ready:       &engine.ReadyCheck{Port: 8080, HTTPPath: "/", Timeout: 30 * time.Second},
	}}, nil
}

func (w *tinyWorkload) Drive(ctx context.Context, env workload.Env) (*results.Measurement, error) {
	if w.onDrive != nil {
		w.onDrive(env)
	}
	ep, err := env.Target.Endpoint("app", 8080)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: env.Target.Dialer()}}
	defer hc.CloseIdleConnections()
	get := func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep.Addr+"/", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET /: %s", resp.Status)
		}
		return nil
	}
	for end := time.Now().Add(env.Window.Warmup); time.Now().Before(end); {
		if err := get(); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	env.Started()
	h := results.NewHistogram()
	start := time.Now()
	var n int64
	for time.Since(start) < env.Window.Duration {
		t0 := time.Now()
		if err := get(); err != nil {
			return nil, err
		}
		h.RecordValue(time.Since(t0).Microseconds())
		n++
	}
	el := time.Since(start).Seconds()
	enc, err := results.EncodeHistogram(h)
	if err != nil {
		return nil, err
	}
	return &results.Measurement{DurationS: el, Metrics: map[string]float64{"throughput_per_s": float64(n) / el},
		Operations: map[string]*results.Operation{"get": {Count: n, Histogram: enc}}}, nil
}

// TestBenchHostVsDockerDocker runs a two-configuration plan (host vs a
// published Docker port) through the real engines and observers into a
// temporary OUT, and checks that nothing of its runs is left behind.
func TestBenchHostVsDockerDocker(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "host runtime cgroups")
	wl := newTinyWorkload(t, ctx, cli)

	p, err := ParsePlan("tiny.yaml", []byte(`
name: tiny
workload: benchtiny
repetitions: 2
warmup: 100ms
duration: 300ms
baseline: host
configurations:
  - name: host
    runtime: host
  - name: docker-published
    runtime: docker
    network: published
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	var log bytes.Buffer
	sum, err := Run(ctx, p, Options{
		Out: out, Engines: &Engines{RunID: "benchtest"}, Observers: SystemObservers(),
		Workload: func(string) (workload.Workload, error) { return wl, nil },
		Progress: &Lines{W: &log},
	})
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.OK != 4 {
		t.Fatalf("%d ok runs of 4; records: %+v", sum.OK, sum.Records)
	}
	recs := readRecords(t, out)
	for _, rec := range recs {
		if rec.Result.Metrics["throughput_per_s"] <= 0 || rec.Engine == nil {
			t.Errorf("run %d (%s): %+v", rec.Index, rec.Config, rec)
		}
		if rec.System == nil || len(rec.System.Samples) == 0 {
			t.Errorf("run %d (%s): no system samples", rec.Index, rec.Config)
		}
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", engine.LabelRun+"="+rec.RunID)})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("run %s left %d containers behind", rec.RunID, len(list.Items))
		}
	}

	// Interrupt (as SIGINT does) during the first Docker run of a second
	// invocation: nothing of that run may be left behind, the records stay
	// valid, and --resume finishes the plan.
	out2 := filepath.Join(t.TempDir(), "out")
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	var interruptedRun string
	wl.onDrive = func(env workload.Env) {
		if env.Target.Runtime == engine.RuntimeDocker && interruptedRun == "" {
			interruptedRun = env.Target.RunID
			icancel()
		}
	}
	opts := Options{Out: out2, Engines: &Engines{RunID: "benchtest"},
		Workload: func(string) (workload.Workload, error) { return wl, nil }}
	_, err = Run(ictx, p, opts)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted Run: %v", err)
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", engine.LabelRun+"="+interruptedRun)})
	if err != nil {
		t.Fatal(err)
	}
	if interruptedRun == "" || len(list.Items) != 0 {
		t.Errorf("interrupted run %q left %d containers behind", interruptedRun, len(list.Items))
	}
	before := readRecords(t, out2)
	for _, r := range before {
		if r.RunID == interruptedRun {
			t.Errorf("the interrupted run %s was recorded", interruptedRun)
		}
	}
	wl.onDrive = nil
	opts.Resume = true
	if _, err := Run(ctx, p, opts); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if after := readRecords(t, out2); len(after) != 4 {
		t.Errorf("%d records after resume (%d before), want 4", len(after), len(before))
	}

	if recs[0].Engine.Name == "" || (recs[0].Config == "host") != (recs[0].Engine.Runtime == string(engine.RuntimeHost)) {
		t.Errorf("engine info %+v for %s", recs[0].Engine, recs[0].Config)
	}
}

var registerTiny sync.Once

// tinyBuild is tinyhttp's host binary and image, built once per test
// binary for every test that drives benchtiny (some run side by side:
// two builds of one tag at once would race); TestMain removes dir.
var tinyBuild struct {
	once            sync.Once
	dir, bin, image string
	err             error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyBuild.dir != "" {
		os.RemoveAll(tinyBuild.dir)
	}
	os.Exit(code)
}

// newTinyWorkload builds tinyhttp as a host binary and as an image on
// the default engine (once), and makes the name benchtiny known to plans.
func newTinyWorkload(t *testing.T, ctx context.Context, cli *client.Client) *tinyWorkload {
	t.Helper()
	tinyBuild.once.Do(func() { tinyBuild.err = buildTiny(ctx, cli) })
	if tinyBuild.err != nil {
		t.Fatal(tinyBuild.err)
	}
	registerTiny.Do(func() { workload.Register(&tinyWorkload{}) }) // for plan validation
	return &tinyWorkload{image: tinyBuild.image, bin: tinyBuild.bin}
}

func buildTiny(ctx context.Context, cli *client.Client) error {
	root, err := image.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	if tinyBuild.dir, err = os.MkdirTemp("", "ctrperf-benchtest-"); err != nil {
		return err
	}
	const pkg = "./internal/engine/testdata/tinyhttp"
	bin := filepath.Join(tinyBuild.dir, "tinyhttp")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build tinyhttp: %v\n%s", err, out)
	}
	res, err := image.BuildGo(ctx, cli, image.GoImage{Name: "benchtest-tinyhttp", Ref: "ctrperf-benchtest-tinyhttp:latest", Package: pkg, ModuleDir: root},
		image.WithLabels(map[string]string{engine.LabelManaged: "true"}))
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	tinyBuild.bin, tinyBuild.image = bin, res.Ref
	return nil
}

// rootDocker returns a client of the reachable Docker engine, or skips (fails
// under CTRPERF_REQUIRE_DOCKER=1) when the test is not root or no engine
// answers; why says what root is needed for.
func rootDocker(t *testing.T, _ context.Context, why string) *client.Client {
	t.Helper()
	testenv.RequireRoot(t, why)
	return testenv.Docker(t)
}

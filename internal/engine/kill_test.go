package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/lifecycle"
)

// The kill test re-executes the test binary as a child that deploys and
// waits; these variables carry what it needs.
const (
	killChildEnv = "CTRPERF_ENGINE_KILL_CHILD" // run id
	killImageEnv = "CTRPERF_ENGINE_KILL_IMAGE"
	killBinEnv   = "CTRPERF_ENGINE_KILL_BIN"
)

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		os.Exit(killChild())
	}
	code := m.Run()
	engine.RemoveTinyDir()
	os.Exit(code)
}

// killRunIDs are the run ids one child uses: two Docker deployments (they
// cannot share a network name) and a host deployment on the first id.
func killRunIDs(runID string) []string { return []string{runID, runID + "b"} }

// killChild deploys a 2-service published-external target with volumes, a
// 2-service published target with bind directories, and a 2-service host
// target on tmpfs, says "ready", and tears all down on SIGINT/SIGTERM.
func killChild() int {
	runID := os.Getenv(killChildEnv)
	img, bin := os.Getenv(killImageEnv), os.Getenv(killBinEnv)
	ctx, stop := lifecycle.SignalContext(context.Background(), lifecycle.WithMessages(nil))
	defer stop()
	// The parent signals "during deploy" only after this line: a SIGINT
	// that reaches the child before its handler is installed kills it the
	// default way, which is not what the test is about.
	fmt.Println("armed")
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer cli.Close()
	var stack lifecycle.Stack
	d, h := engine.NewDocker(cli), engine.NewBareMetal()
	ids := killRunIDs(runID)
	two := func(front string) []engine.Service {
		f := engine.TinyServiceForTest(img, front)
		f.Env = map[string]string{"UPSTREAM": "{{addr:db:8080}}"}
		return []engine.Service{f, engine.TinyServiceForTest(img, "db")}
	}
	hostSvc := func(name string) engine.Service {
		return engine.Service{Name: name, HostCommand: []string{bin, "serve", "127.0.0.1:{{port:" + name + ":8080}}", runID},
			Ports: []int{8080}, Ready: &engine.ReadyCheck{Port: 8080, Timeout: 20 * time.Second}}
	}
	deployments := []struct {
		e    engine.Engine
		spec engine.DeploySpec
	}{
		{d, engine.DeploySpec{RunID: ids[0], Network: engine.NetworkPublishedExternal, Data: engine.DataVolume, Services: two("app")}},
		{d, engine.DeploySpec{RunID: ids[1], Network: engine.NetworkPublished, Data: engine.DataBind, Services: two("app")}},
		{h, engine.DeploySpec{RunID: ids[0], Network: engine.NetworkHost, Data: engine.DataTmpfs, Services: []engine.Service{hostSvc("app"), hostSvc("db")}}},
	}
	code := 0
	for _, dep := range deployments {
		t, err := dep.e.Deploy(ctx, dep.spec)
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "child deploy:", err)
				code = 1
			}
			break
		}
		e := dep.e
		stack.Push("teardown "+t.RunID, func(ctx context.Context) error { return e.Teardown(ctx, t) })
	}
	if code == 0 && ctx.Err() == nil {
		fmt.Println("ready")
		<-ctx.Done()
	}
	if err := stack.Run(time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "child teardown:", err)
		code = 1
	}
	return code
}

// killCase is one way of stopping a kill child.
type killCase struct {
	desc       string
	sig        syscall.Signal
	afterReady bool
}

// killResult is what happened to one child, for its subtest to check.
type killResult struct {
	runID  string
	logs   []string // what the subtest logs
	fatal  string   // set when the child could not be driven at all
	err    error    // the child's exit
	exited time.Time
	stderr *strings.Builder
}

// killOne starts a child, signals it as kc says and waits for it to exit;
// it touches no *testing.T so that the four children can run at once.
func killOne(kc killCase, runID, img, bin string) killResult {
	res := killResult{runID: runID, stderr: &strings.Builder{}}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+runID, killImageEnv+"="+img, killBinEnv+"="+bin)
	cmd.Stderr = res.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.fatal = err.Error()
		return res
	}
	if err := cmd.Start(); err != nil {
		res.fatal = err.Error()
		return res
	}
	armed, ready := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			switch sc.Text() {
			case "armed":
				close(armed)
			case "ready":
				close(ready)
			}
		}
	}()
	// await waits for a line of the child; a child that never prints it
	// is killed and the result says what it never did.
	await := func(line chan struct{}, never string) bool {
		select {
		case <-line:
			return true
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			res.fatal = fmt.Sprintf("child never %s; stderr:\n%s", never, res.stderr.String())
			return false
		}
	}
	if !await(armed, "installed its signal handler") {
		return res
	}
	// A full deploy of the child takes a few seconds; "during deploy"
	// picks a point inside that window.
	var delay time.Duration
	if kc.afterReady {
		if !await(ready, "became ready") {
			return res
		}
		delay = time.Duration(rand.IntN(300)) * time.Millisecond
	} else {
		delay = time.Duration(rand.IntN(2500)) * time.Millisecond
	}
	time.Sleep(delay)
	res.logs = append(res.logs, fmt.Sprintf("%v after %v (ready before signal: %v)", kc.sig, delay, isClosed(ready)))
	if err := cmd.Process.Signal(kc.sig); err != nil {
		res.fatal = err.Error()
		return res
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case res.err = <-waited:
		res.exited = time.Now()
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-waited
		res.fatal = fmt.Sprintf("child did not exit within 2 minutes of %v", kc.sig)
	}
	return res
}

func TestKillDocker(t *testing.T) {
	t.Parallel() // runs of its own (see the note on parallel tests in integration_test.go)
	cli := engine.DockerClientForTest(t)
	img := engine.TinyImageForTest(t, cli)
	bin := engine.TinyBinaryForTest(t)
	tests := []killCase{
		{"SIGINT during deploy", syscall.SIGINT, false},
		{"SIGINT once deployed", syscall.SIGINT, true},
		{"SIGKILL during deploy, then clean", syscall.SIGKILL, false},
		{"SIGKILL once deployed, then clean", syscall.SIGKILL, true},
	}
	// The children deploy under run ids of their own and nothing below
	// counts another run's objects, so the four run at once (their deploys
	// wait on the engine, not on the CPU); each subtest then checks its own.
	results := make([]chan killResult, len(tests))
	for i, tc := range tests {
		results[i] = make(chan killResult, 1)
		runID := engine.NewRunIDForTest(t)
		go func() { results[i] <- killOne(tc, runID, img, bin) }()
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			res := <-results[i]
			runID, stderr := res.runID, res.stderr
			for _, l := range res.logs {
				t.Log(l)
			}
			if res.fatal != "" {
				t.Fatal(res.fatal)
			}
			err := res.err
			if tc.sig == syscall.SIGINT {
				if err != nil {
					t.Errorf("child after SIGINT: %v; stderr:\n%s", err, stderr.String())
				}
			} else {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("child after SIGKILL: %v", err)
				}
				// An API request the child had in flight may still be
				// completed by the daemon after the child died; `ctrperf
				// clean` runs after the fact, so the test does too.
				time.Sleep(time.Until(res.exited.Add(500 * time.Millisecond)))
				ctx := context.Background()
				for _, id := range killRunIDs(runID) {
					if _, err := engine.Clean(ctx, cli, id); err != nil {
						t.Errorf("Clean(%s): %v", id, err)
					}
					if _, err := daemon.CleanAll(ctx, id); err != nil {
						t.Errorf("daemon.CleanAll(%s): %v", id, err)
					}
				}
			}
			for _, id := range killRunIDs(runID) {
				if left := engine.LeftoversForTest(t, cli, id); len(left) > 0 {
					t.Errorf("run %s left behind after %v:\n  %s\nchild stderr:\n%s", id, tc.sig, strings.Join(left, "\n  "), stderr.String())
				}
			}
			// The host runtime's top-level groups may stay (shared by runs);
			// nothing of this run may be below them.
			for _, c := range []string{"cpu", "cpuset", "memory"} {
				if m, _ := filepath.Glob(filepath.Join(engine.DefaultCgroupRoot, c, engine.NamePrefix, runID+"*")); len(m) > 0 {
					t.Errorf("host cgroups left: %v", m)
				}
			}
		})
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

package remote_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/remote"
	"ctrperf/internal/testenv"
)

// execAgent runs `ctrperf agent` of a freshly built ctrperf as a child,
// the transport being its stdin and stdout (no SSH), and says hello.
func execAgent(t *testing.T) (*remote.Client, *exec.Cmd, *bytes.Buffer, io.Closer) {
	t.Helper()
	bin := testenv.Ctrperf(t)
	cmd := exec.Command(bin, "agent", "--owners-dir", t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c, err := remote.NewClient(context.Background(), stdout, stdin, remote.ClientOptions{Name: "local-agent", Session: "exec-test", Closer: stdin})
	if err != nil {
		t.Fatalf("hello: %v (agent said %s)", err, stderr.String())
	}
	return c, cmd, &stderr, stdin
}

func waitExit(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent exited with %v: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent did not exit: %s", stderr.String())
	}
}

func TestExecAgentHelloSamplesShutdown(t *testing.T) {
	c, cmd, stderr, _ := execAgent(t)
	host, _ := os.Hostname()
	if c.Hello.Facts.Hostname != host || c.Hello.Facts.CPUs == 0 || c.Hello.Facts.Kernel == "" || c.Hello.Facts.BootID == "" {
		t.Errorf("facts = %+v", c.Hello.Facts)
	}
	if c.Hello.PID != cmd.Process.Pid {
		t.Errorf("agent says pid %d, its process is %d", c.Hello.PID, cmd.Process.Pid)
	}
	// One machine, one clock.
	if c.Clock.OffsetMs > c.Clock.RTTMs || -c.Clock.OffsetMs > c.Clock.RTTMs {
		t.Errorf("clock %+v: the offset to this machine exceeds the round trip", c.Clock)
	}
	o := remote.NewObserver(c, "exec", &engine.Target{})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	s := o.Stop()
	if len(s.Samples) < 2 || s.Samples[len(s.Samples)-1].CPU == nil {
		t.Errorf("series = %d samples, unavailable %v", len(s.Samples), s.Unavailable)
	}
	if err := c.Call(context.Background(), "no.such.method", nil, nil, nil); err == nil {
		t.Error("an unknown method answered")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, stderr)
}

// TestExecAgentWatchdogRoot deploys a host process through a real agent
// and closes its stdin without a shutdown: the watchdog stops the process.
func TestExecAgentWatchdogRoot(t *testing.T) {
	testenv.RequireRoot(t, "the host runtime makes cgroups")
	c, cmd, stderr, stdin := execAgent(t)
	eng := remote.NewEngine(c, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := eng.Deploy(context.Background(), engine.DeploySpec{RunID: "exec-test-001", Network: engine.NetworkHost, Data: engine.DataBind,
		Services: []engine.Service{{Name: "idle", HostCommand: []string{agent.SelfBinary, "__idle"}}}})
	if err != nil {
		t.Fatal(err)
	}
	pid := tg.Containers[0].PID
	if !alive(pid) {
		t.Fatalf("service %d does not run", pid)
	}
	// ctrperf goes away: the end of the agent's stdin.
	_ = stdin.Close()
	waitExit(t, cmd, stderr)
	if alive(pid) {
		t.Errorf("service %d outlived the agent's watchdog", pid)
	}
	if !bytes.Contains(stderr.Bytes(), []byte("torn down")) {
		t.Errorf("agent said %q", stderr.String())
	}
}

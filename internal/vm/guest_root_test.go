package vm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/remote"
	"ctrperf/internal/testenv"
)

// requireTCG skips (or fails under CTRPERF_REQUIRE_DOCKER=1) unless this
// machine boots emulated guests: root, QEMU, a guest kernel.
func requireTCG(t *testing.T) *Machine {
	t.Helper()
	testenv.RequireRoot(t, "a guest's tap device and its QEMU")
	self := testenv.Ctrperf(t)
	m, err := ThisMachine(self, "vmtest-"+strings.ReplaceAll(t.Name(), "/", "-"), os.Stderr)
	if err != nil {
		testenv.SkipOrFail(t, "no emulated guest here: %v", err)
	}
	return m
}

func TestGuestRunsCommandTCG(t *testing.T) {
	m := requireTCG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := m.Boot(ctx, Config{VCPUs: 2, Memory: 1 << 30, Accel: AccelTCG}, remote.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("booted in %s; agent: %+v", g.Booted, g.Client.Hello.Facts)
	if b, err := os.ReadFile(g.console()); err == nil {
		t.Logf("console:\n%s", b)
	}
	eng := remote.NewEngine(g.Client, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := eng.Deploy(ctx, engine.DeploySpec{RunID: "vmtest-cmd", Network: engine.NetworkHost, Data: engine.DataBind,
		Services: []engine.Service{{Name: "sleeper", Command: []string{"sleep", "1000"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := eng.Exec(ctx, tg, "sleeper", []string{"uname", "-r"})
	if err != nil || r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != m.Kernel.Version {
		t.Errorf("uname -r in the guest: %q %q exit %d, %v; want %s", r.Stdout, r.Stderr, r.ExitCode, err, m.Kernel.Version)
	}
	if err := eng.Teardown(ctx, tg); err != nil {
		t.Error(err)
	}
}

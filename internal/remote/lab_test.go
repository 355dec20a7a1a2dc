package remote_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/lab"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/testenv"
)

// The lab (make lab-up, internal/lab): two hosts of this machine reached
// over SSH. Tests named …Lab need it; CTRPERF_REQUIRE_LAB=1 makes its
// absence a failure (lab.Require).
var labConfig = lab.SSHConfig

func dest(t testing.TB, s string) plan.Dest {
	t.Helper()
	d, err := plan.ParseDest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// onLab runs a shell command on a lab host over plain ssh.
func onLab(t *testing.T, host, script string) string {
	t.Helper()
	out, err := exec.Command("ssh", "-F", labConfig, host, script).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh %s %q: %v: %s", host, script, err, out)
	}
	return string(out)
}

func dial(t testing.TB, host string, o remote.SSHOptions) *remote.Host {
	t.Helper()
	if o.Config == "" {
		o.Config = labConfig
	}
	o.Session = "test-" + strings.ToLower(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := remote.Dial(ctx, dest(t, host), o)
	if err != nil {
		t.Fatalf("dial %s: %v", host, err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func TestDialCopiesTheBinaryOnceLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	// Start from a host without this binary.
	onLab(t, "lab-sut", "rm -rf ~/"+remote.CacheDir)
	first := dial(t, "lab-sut", remote.SSHOptions{})
	if !first.Copied {
		t.Error("first dial did not copy the binary")
	}
	if first.Hello.Facts.Hostname != "lab-sut" || first.Hello.Facts.BootID == "" || first.Hello.Engine == nil {
		t.Errorf("hello = %+v", first.Hello)
	}
	if first.Resolved.HostName != "198.19.200.2" || first.Arch == "" {
		t.Errorf("resolved %+v, arch %q", first.Resolved, first.Arch)
	}
	if first.Clock.Samples == 0 || first.Clock.RTTMs <= 0 {
		t.Errorf("clock = %+v", first.Clock)
	}
	second := dial(t, "lab-sut", remote.SSHOptions{})
	if second.Copied || second.Binary != first.Binary {
		t.Errorf("second dial copied %v (%s, first %s): want the cached binary", second.Copied, second.Binary, first.Binary)
	}
	if !strings.Contains(first.Binary, "/"+remote.CacheDir+"/") {
		t.Errorf("binary at %s", first.Binary)
	}
	// Nothing but the cached binary in the cache directory (no temporary).
	if out := onLab(t, "lab-sut", "ls -A ~/"+remote.CacheDir+"/*/"); strings.TrimSpace(out) != "ctrperf" {
		t.Errorf("cache holds %q", out)
	}
}

// labConfigWith writes an ssh config for lab-sut whose keys or known hosts
// differ from the lab's.
func labConfigWith(t *testing.T, knownHosts, identity string) string {
	t.Helper()
	cfg := fmt.Sprintf(`Host lab-sut
  HostName 198.19.200.2
  User root
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  ConnectTimeout 5
`, identity, knownHosts)
	p := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", p).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	return p
}

func TestUnknownHostKeyLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := labConfigWith(t, known, "/var/lib/ctrperf/lab/id_ed25519")
	_, err := remote.Dial(context.Background(), dest(t, "lab-sut"), remote.SSHOptions{Config: cfg})
	if !errors.Is(err, remote.ErrUnknownHostKey) || !strings.Contains(err.Error(), "--accept-new-host-key") {
		t.Fatalf("dial with an empty known_hosts: %v", err)
	}
	t.Log(err)
	// --accept-new-host-key records it and connects.
	h, err := remote.Dial(context.Background(), dest(t, "lab-sut"), remote.SSHOptions{Config: cfg, AcceptNewHostKey: true})
	if err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	_ = h.Close(context.Background())
	if b, _ := os.ReadFile(known); !strings.Contains(string(b), "198.19.200.2") {
		t.Errorf("known_hosts after accept-new: %q", b)
	}
}

func TestChangedHostKeyLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	other, err := os.ReadFile(newKey(t) + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	// lab-sut's address recorded with another key of the same type.
	known := filepath.Join(t.TempDir(), "known_hosts")
	f := strings.Fields(string(other))
	if err := os.WriteFile(known, []byte("198.19.200.2 "+f[0]+" "+f[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := labConfigWith(t, known, "/var/lib/ctrperf/lab/id_ed25519")
	for _, accept := range []bool{false, true} {
		_, err := remote.Dial(context.Background(), dest(t, "lab-sut"), remote.SSHOptions{Config: cfg, AcceptNewHostKey: accept})
		if !errors.Is(err, remote.ErrChangedHostKey) || !strings.Contains(err.Error(), "ssh-keygen") {
			t.Errorf("accept-new %v: %v, want the changed key refused", accept, err)
		}
		if accept {
			t.Log(err)
		}
	}
}

func TestAuthRefusedLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	cfg := labConfigWith(t, "/var/lib/ctrperf/lab/known_hosts", newKey(t))
	_, err := remote.Dial(context.Background(), dest(t, "lab-sut"), remote.SSHOptions{Config: cfg})
	if !errors.Is(err, remote.ErrAuthRefused) {
		t.Fatalf("dial with a key lab-sut does not know: %v", err)
	}
	t.Log(err)
}

func TestUnreachableLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	// An address of the lab's network that no host holds.
	start := time.Now()
	_, err := remote.Dial(context.Background(), dest(t, "root@198.19.200.250"), remote.SSHOptions{Config: labConfig, ConnectTimeout: 3 * time.Second})
	if !errors.Is(err, remote.ErrUnreachable) {
		t.Fatalf("dial a host that is not there: %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	t.Log(err)
}

func TestNoDockerOnTheLoadHostLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	h := dial(t, "lab-load", remote.SSHOptions{})
	if h.Hello.Engine != nil || h.Hello.EngineError == "" {
		t.Fatalf("lab-load reports an engine: %+v", h.Hello)
	}
	docker := remote.NewEngine(h.Client, agent.EngineRef{Runtime: engine.RuntimeDocker}, nil)
	_, err := docker.Deploy(context.Background(), engine.DeploySpec{RunID: "test-nodocker-001", Network: engine.NetworkPublished,
		Services: []engine.Service{{Name: "app", Image: "ctrperf/ticketd:latest"}}})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.CodeNoEngine {
		t.Fatalf("docker deploy on lab-load: %v, want no_engine", err)
	}
	t.Log(err)
	// The host runtime runs there all the same.
	host := remote.NewEngine(h.Client, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := host.Deploy(context.Background(), engine.DeploySpec{RunID: "test-nodocker-002", Network: engine.NetworkHost, Data: engine.DataBind,
		Services: []engine.Service{{Name: "idle", HostCommand: []string{agent.SelfBinary, "__idle"}}}})
	if err != nil {
		t.Fatalf("host deploy on lab-load: %v", err)
	}
	if len(tg.Containers) != 1 || tg.Containers[0].PID == 0 {
		t.Fatalf("target = %+v", tg)
	}
	if err := host.Teardown(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
}

// TestSSHCutMidRunLab kills the sshd child of an agent's session while a
// deployment lives: the agent's watchdog tears it down and releases its
// owner record; nothing of ctrperf is left on the host.
func TestSSHCutMidRunLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	h := dial(t, "lab-sut", remote.SSHOptions{})
	host := remote.NewEngine(h.Client, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := host.Deploy(context.Background(), engine.DeploySpec{RunID: "test-cut-001", Network: engine.NetworkHost, Data: engine.DataBind,
		Services: []engine.Service{{Name: "idle", HostCommand: []string{agent.SelfBinary, "__idle"}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc := tg.Containers[0].PID
	// SIGKILL to the session's sshd processes, not to the agent: it sees
	// its stdin end, as after a network cut.
	sess, err := lab.CutSession(lab.Sut, "ctrperf agent", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sess.Commands[h.Hello.PID]; !ok {
		t.Fatalf("cut session %+v does not run the agent %d", sess, h.Hello.PID)
	}
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not see the connection drop")
	}
	if !errors.Is(h.Err(), remote.ErrDisconnected) {
		t.Errorf("client error %v", h.Err())
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (alive(h.Hello.PID) || alive(svc)) {
		time.Sleep(200 * time.Millisecond)
	}
	if alive(svc) {
		t.Errorf("service process %d still runs after the watchdog", svc)
	}
	if alive(h.Hello.PID) {
		t.Errorf("agent %d still runs", h.Hello.PID)
	}
	out := onLab(t, "lab-sut", h.Binary+" clean --dry-run")
	if strings.Contains(out, "test-cut-001") {
		t.Errorf("clean on lab-sut still finds the run:\n%s", out)
	}
	if out := onLab(t, "lab-sut", "ls /run/ctrperf/owners 2>/dev/null | grep agent- || true"); strings.TrimSpace(out) != "" {
		t.Errorf("owner records left on lab-sut: %s", out)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	return f[0] != "Z"
}

// BenchmarkAgentCPUWhileSamplingLab measures the agent's own CPU on
// lab-sut while its samplers run at 1 s: utime+stime of the agent process
// from /proc/<pid>/stat (the lab shares this machine's pid namespace) over
// 60 s of sampling. Must stay under 1 % of a core. A measurement, not a
// test: `make bench` runs it (-bench AgentCPUWhileSamplingLab -benchtime
// 1x) and prints the figure (%core); `make test` does not wait its minute.
func BenchmarkAgentCPUWhileSamplingLab(b *testing.B) {
	lab.Require(b)
	testenv.Ctrperf(b)
	h := dial(b, "lab-sut", remote.SSHOptions{})
	b.ResetTimer()
	for range b.N { // one window per iteration; -benchtime 1x: one
		pct := agentCPU(b, h, 60*time.Second)
		b.ReportMetric(pct, "%core")
	}
}

// agentCPU samples through h's agent at 1 s for window and returns the
// agent's CPU over it in percent of a core, failing b when it is 1 % or
// more or when samples are missing.
func agentCPU(b *testing.B, h *remote.Host, window time.Duration) float64 {
	o := remote.NewObserver(h.Client, "cpu", &engine.Target{})
	if err := o.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	t0, c0 := time.Now(), cpuTicks(b, h.Hello.PID)
	time.Sleep(window)
	t1, c1 := time.Now(), cpuTicks(b, h.Hello.PID)
	s := o.Stop()
	if n, want := len(s.Samples), int(window/time.Second)*11/12; n < want {
		b.Errorf("%d samples in %s at 1 s, want at least %d", n, window, want)
	}
	const hz = 100 // USER_HZ on Linux
	pct := float64(c1-c0) / hz / t1.Sub(t0).Seconds() * 100
	b.Logf("agent pid %d on %s: %d ticks (utime+stime) in %.1f s while sampling at 1 s: %.3f %% of a core (%d samples)",
		h.Hello.PID, h.Hello.Facts.Hostname, c1-c0, t1.Sub(t0).Seconds(), pct, len(s.Samples))
	if pct >= 1 {
		b.Errorf("the agent used %.3f %% of a core while sampling: want under 1 %%", pct)
	}
	return pct
}

func cpuTicks(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields 14 and 15 of stat: utime, stime (index 11, 12 after the comm).
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// TestFarDiskFullLab fills the disk where the binary is cached on lab-sut:
// the copy fails as a full disk, with its path.
func TestFarDiskFullLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	onLab(t, "lab-sut", "rm -rf ~/"+remote.CacheDir)
	lab.SmallFS(t, lab.Sut, "/root/.cache", 1<<20)
	_, err := remote.Dial(context.Background(), dest(t, "lab-sut"), remote.SSHOptions{Config: labConfig})
	if !errors.Is(err, remote.ErrDiskFull) || !strings.Contains(err.Error(), remote.CacheDir) {
		t.Fatalf("dial with a full disk: %v", err)
	}
	t.Log(err)
	if out := onLab(t, "lab-sut", "ls -A ~/"+remote.CacheDir+"/*/ 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("the failed copy left %q", out)
	}
}

// TestCleanAfterAgentKilledLab kills the agent itself (no watchdog can
// run): its owner record then names a dead owner, and `ctrperf clean` on
// the host removes what its session deployed; while the agent lived, clean
// kept it.
func TestCleanAfterAgentKilledLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	h := dial(t, "lab-sut", remote.SSHOptions{})
	host := remote.NewEngine(h.Client, agent.EngineRef{Runtime: engine.RuntimeHost}, nil)
	tg, err := host.Deploy(context.Background(), engine.DeploySpec{RunID: "test-killed-001", Network: engine.NetworkHost, Data: engine.DataBind,
		Services: []engine.Service{{Name: "idle", HostCommand: []string{agent.SelfBinary, "__idle"}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc := tg.Containers[0].PID
	if out := onLab(t, "lab-sut", h.Binary+" clean --dry-run"); !strings.Contains(out, "live") || !strings.Contains(out, "test-killed-001") {
		t.Errorf("clean --dry-run while the agent lives:\n%s", out)
	}
	if err := syscall.Kill(h.Hello.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
	if !alive(svc) {
		t.Fatalf("service %d died with the agent: nothing left to clean", svc)
	}
	// Only this run: the lab shares this machine's cgroups and pids, so a
	// sweep of everything on lab-sut would judge this machine's runs too.
	out := onLab(t, "lab-sut", h.Binary+" clean --run test-killed-001")
	t.Logf("clean on lab-sut after SIGKILL of the agent:\n%s", out)
	deadline := time.Now().Add(10 * time.Second)
	for alive(svc) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(svc) {
		t.Errorf("service %d survived clean", svc)
	}
	if out := onLab(t, "lab-sut", h.Binary+" clean --dry-run --run test-killed-001"); strings.TrimSpace(out) != "nothing to clean" {
		t.Errorf("after clean:\n%s", out)
	}
	// The dead agent's record: a full clean reaps it (not run here, see
	// above); the test removes it itself.
	onLab(t, "lab-sut", "rm -f /run/ctrperf/owners/agent-test-testcleanafteragentkilledlab-*")
}

// TestReplacedAgentBinaryRefusedLab: the binary cached on the host is
// named by its hash but may be replaced after the copy (another ctrperf
// writing the same path, a disk that corrupted it); hello compares the
// agent's own hash with the caller's and the error names the fix.
func TestReplacedAgentBinaryRefusedLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	first := dial(t, "lab-sut", remote.SSHOptions{})
	_ = first.Close(context.Background())
	// One byte more: still an ELF that runs, another build.
	onLab(t, "lab-sut", "echo >> "+first.Binary)
	t.Cleanup(func() { onLab(t, "lab-sut", "rm -f "+first.Binary) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := remote.Dial(ctx, dest(t, "lab-sut"), remote.SSHOptions{Config: labConfig, Session: "test-replaced"})
	if err == nil {
		_ = h.Close(context.Background())
		t.Fatal("dial to an agent of another build succeeded")
	}
	if !strings.Contains(err.Error(), "another ctrperf build") || !strings.Contains(err.Error(), "remove "+first.Binary) {
		t.Errorf("dial = %v; want the build named and the fix", err)
	}
}

// TestOptionsReachTheJumpHostLab: ssh hands a ProxyJump hop -F but none of
// the -o options, so BatchMode and StrictHostKeyChecking must come from
// the config both read: with --accept-new-host-key the hop's key, unknown
// too, is recorded (without, the hop asks on a terminal that is not there,
// or, in a terminal, stops ctrperf's background ssh with SIGTTIN).
func TestOptionsReachTheJumpHostLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	host := func(name, addr string) string {
		return fmt.Sprintf("Host %s\n  HostName %s\n  User root\n  IdentityFile /var/lib/ctrperf/lab/id_ed25519\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n", name, addr, known)
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	body := host("lab-sut", lab.Addr[lab.Sut]) + "  ProxyJump lab-load\n" + host("lab-load", lab.Addr[lab.Load])
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := remote.Dial(ctx, dest(t, "lab-sut"), remote.SSHOptions{Config: cfg, AcceptNewHostKey: true, Session: "test-jump"})
	if err != nil {
		t.Fatalf("dial via lab-load with accept-new: %v", err)
	}
	_ = h.Close(context.Background())
	b, _ := os.ReadFile(known)
	for _, a := range []string{lab.Addr[lab.Sut], lab.Addr[lab.Load]} {
		if !strings.Contains(string(b), a) {
			t.Errorf("known_hosts lacks %s: %q", a, b)
		}
	}
}

// TestStalledShellLab: a login whose shell never runs the command (here a
// forced command that sleeps, as a hung home directory or a profile that
// waits would) fails the dial within its budget, three times the connect
// timeout, with an error that names the cause and the check to run,
// instead of hanging (issue 35 item 8: ConnectTimeout bounded the TCP
// connect only, and clean --hosts had no budget).
func TestStalledShellLab(t *testing.T) {
	lab.Require(t)
	testenv.Ctrperf(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ctrperf-stall-"+strconv.Itoa(os.Getpid()), "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	// Only this key's logins stall: the other tests on lab-sut go on.
	tag := "ctrperf-stall-" + strconv.Itoa(os.Getpid())
	onLab(t, "lab-sut", fmt.Sprintf("echo 'command=\"sleep 120\",no-pty %s' >> /root/.ssh/authorized_keys", strings.TrimSpace(string(pub))))
	t.Cleanup(func() { onLab(t, "lab-sut", "sed -i '/"+tag+"/d' /root/.ssh/authorized_keys") })
	cfg := filepath.Join(dir, "ssh_config")
	body := fmt.Sprintf("Host lab-sut\n  HostName %s\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile /var/lib/ctrperf/lab/known_hosts\n  GlobalKnownHostsFile /dev/null\n", lab.Addr[lab.Sut], key)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	h, err := remote.Dial(ctx, dest(t, "lab-sut"), remote.SSHOptions{Config: cfg, Session: "test-stalled", ConnectTimeout: 2 * time.Second})
	took := time.Since(start)
	if err == nil {
		_ = h.Close(context.Background())
		t.Fatal("dial through a shell that never runs the command succeeded")
	}
	if !strings.Contains(err.Error(), "stalls after login") || !strings.Contains(err.Error(), "ssh lab-sut true") {
		t.Errorf("dial = %v; want the stall named with the check to run", err)
	}
	// 6 s of budget; a minute would be the test's own deadline.
	if took > 30*time.Second {
		t.Errorf("dial took %v to give up; its budget is 6 s", took)
	}
}

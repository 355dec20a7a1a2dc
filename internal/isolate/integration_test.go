package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ctrperf/internal/image"
	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

const spinRef = "ctrperf/isolate-spin:test"

// dockerOrSkip returns a client of the engine on DOCKER_HOST or the default
// socket for a test that also needs root (cpusets, IRQ affinities, RPS
// masks).
func dockerOrSkip(t testing.TB) *client.Client {
	t.Helper()
	testenv.RequireRoot(t, "to write cpusets, IRQ affinities and RPS masks")
	return testenv.Docker(t)
}

// The spin image, built once and shared by the package's tests (issue 25;
// kept, as before, for the next run's cache); the ctrperf command is
// testenv.Ctrperf's, one build per test process.
var (
	spinOnce sync.Once
	spinErr  error
)

// tenants starts n spin containers labelled for isolation and this run.
func tenants(t testing.TB, cli *client.Client, runID string, n int) []string {
	t.Helper()
	spinOnce.Do(func() {
		_, spinErr = image.BuildGo(context.Background(), cli, image.GoImage{Ref: spinRef, Package: "./internal/isolate/testdata/spin"})
	})
	if spinErr != nil {
		t.Fatalf("build spin image: %v", spinErr)
	}
	t.Cleanup(func() { removeRun(cli, runID) })
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, startTenant(t, cli, runID, i))
	}
	return ids
}

func startTenant(t testing.TB, cli *client.Client, runID string, i int) string {
	ctx := context.Background()
	labels := map[string]string{"ctrperf.managed": "true", "ctrperf.run": runID, LabelIsolate: "true"}
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: spinRef, Labels: labels},
		HostConfig: &container.HostConfig{}, Name: fmt.Sprintf("ctrperf-%s-t%d", runID, i)})
	if err != nil {
		t.Errorf("create tenant %d: %v", i, err)
		return ""
	}
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Errorf("start tenant %d: %v", i, err)
	}
	return c.ID
}

func removeRun(cli *client.Client, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", "ctrperf.run="+runID)})
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// snapshot is every value the controller may change.
type snapshot map[string]string

func takeSnapshot(t *testing.T, cli *client.Client, ids []string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{}
	cs := realFS(cli)
	for _, id := range ids {
		v, err := cs.CPUs(ctx, id)
		if err != nil {
			t.Fatalf("cpuset of %s: %v", id, err)
		}
		s["cpuset "+id[:12]] = v
		cl, err := cs.Class(ctx, id)
		if err != nil {
			t.Fatalf("CPU class of %s: %v", id, err)
		}
		s["class "+id[:12]] = cl.String()
		insp, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := HostVeth(kernel.DefaultFS(), insp.Container.State.Pid)
		if err != nil {
			t.Fatal(err)
		}
		m, err := SysRPS{Kernel: kernel.DefaultFS(), NCPU: 2}.Masks(dev)
		if err != nil {
			t.Fatal(err)
		}
		for q, v := range m {
			s["rps "+dev+"/"+q] = v
		}
	}
	irqs, err := NetworkIRQs(kernel.DefaultFS())
	if err != nil {
		t.Fatal(err)
	}
	for _, irq := range irqs {
		v, err := ProcIRQ{Kernel: kernel.DefaultFS()}.Affinity(irq.Num)
		if err != nil {
			t.Fatal(err)
		}
		s[fmt.Sprintf("irq %d", irq.Num)] = v.String()
	}
	return s
}

func diff(a, b snapshot) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q -> %q", k, v, b[k]))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new "+k)
		}
	}
	return strings.Join(out, "; ")
}

// realFS reads and writes the real cgroups of containers of cli's engine.
func realFS(cli *client.Client) CgroupFS { return DockerCgroups(cli, kernel.DefaultFS()) }

func realController(t *testing.T, cli *client.Client, runID, stateDir string, policy Policy, log *bytes.Buffer, tune ...func(*Params)) *Controller {
	t.Helper()
	top, err := DiscoverTopology(kernel.DefaultFS())
	if err != nil {
		t.Fatal(err)
	}
	// A 2-CPU machine shares its CPUs with host processes (and here with
	// parallel builds), so a spinning tenant may reach well under 90 % of
	// its fair share: count 50 % as saturated.
	rt := &DockerRuntime{Client: cli, Labels: []string{"ctrperf.run=" + runID}, Kernel: kernel.DefaultFS()}
	fs := CgroupFS{Layout: rt.layout(), Dirs: rt}
	params := Params{Policy: policy, Demote: true, HotThreshold: 0.5, CoolThreshold: 0.2, Interval: 200 * time.Millisecond, IRQRotate: time.Second}
	for _, f := range tune {
		f(&params)
	}
	ctl, err := New(Config{Params: params,
		CheckpointPath: filepath.Join(stateDir, "checkpoint.json"), NCPU: len(top.CPUs)},
		top, rt, fs, fs, WithDemoter(fs), WithStall(fs),
		WithIRQ(ProcIRQ{Kernel: kernel.DefaultFS()}, func() ([]IRQ, error) { return NetworkIRQs(kernel.DefaultFS()) }),
		WithRPS(SysRPS{Kernel: kernel.DefaultFS(), NCPU: len(top.CPUs)}, func(pid int) (string, error) { return HostVeth(kernel.DefaultFS(), pid) }),
		WithDecisionLog(log))
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// TestChurnDocker: 100 containers start and go while the controller runs:
// no error, never an empty cpuset, no stale state.
func TestChurnDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	// The first Docker test of the file, and bound by the engine's
	// container starts and removals: the later tests' ctrperf command is
	// built meanwhile (issue 25; none of churn's checks is on time).
	testenv.StartCtrperf()
	runID := fmt.Sprintf("iso%d", time.Now().UnixNano()%1_000_000)
	tenants(t, cli, runID, 0) // builds the image, registers cleanup
	var log bytes.Buffer
	state := t.TempDir()
	ctl := realController(t, cli, runID, state, PolicyPaper, &log)
	ctx, cancel := context.WithCancel(context.Background())
	rt := ctl.rt.(*DockerRuntime)
	done := make(chan error, 1)
	var logMu sync.Mutex
	go func() { done <- ctl.Run(ctx, rt.Events(ctx)) }()

	const total, parallel = 100, 4
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	began := time.Now()
	for i := 0; i < total; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			id := startTenant(t, cli, runID, i)
			if id == "" {
				return
			}
			// A life of 50-350 ms (was 200-800 ms; issue 25): the engine's
			// create, start and remove take about as long again, and the
			// controller steps on every start and destroy event, so it
			// still meets each tenant alive, starting or already gone.
			time.Sleep(time.Duration(50+rand.Intn(300)) * time.Millisecond)
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer rcancel()
			if _, err := cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Errorf("remove tenant %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	t.Logf("%d tenants started and removed, %d at a time, in %s", total, parallel, time.Since(began).Round(10*time.Millisecond))
	// A few more steps with nothing left. Was a fixed second; now the
	// wait ends two intervals after the controller has forgotten every
	// tenant, and never later than that second, so the stale-state check
	// below is at least as strict as before.
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) && len(ctl.Status().Containers) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(min(2*ctl.cfg.Params.Interval, time.Until(end)))
	cancel()
	<-done
	logMu.Lock()
	defer logMu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(line, `"kind":"error"`) {
			t.Errorf("controller error during churn: %s", line)
		}
		if strings.Contains(line, `"new":""`) && strings.Contains(line, `"kind":"cpuset"`) {
			t.Errorf("empty cpuset written: %s", line)
		}
	}
	if n := len(ctl.Status().Containers); n != 0 {
		t.Errorf("stale state: %d containers still placed after all were removed", n)
	}
	if err := ctl.Restore(context.Background()); err != nil {
		t.Errorf("restore after churn: %v", err)
	}
	if !strings.Contains(log.String(), `"kind":"cpuset"`) {
		t.Errorf("controller never placed anything during churn")
	}
}

// TestRestoreAfterHotTenantDocker: a hot tenant is confined (strict), the
// quiet ones keep their CPU, IRQs and RPS move to the pool, and Restore puts
// every cpuset, IRQ affinity and RPS mask back exactly.
func TestRestoreAfterHotTenantDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	runID := fmt.Sprintf("iso%d", time.Now().UnixNano()%1_000_000)
	ids := tenants(t, cli, runID, 3)
	before := takeSnapshot(t, cli, ids)
	var log bytes.Buffer
	// The lowest weight, Docker's default demotion (auto); the other tests
	// demote to cpu.idle.
	ctl := realController(t, cli, runID, t.TempDir(), PolicyStrict, &log, func(p *Params) { p.DemoteClass = DemoteWeight })
	ctx := context.Background()
	step := func() {
		time.Sleep(200 * time.Millisecond)
		if err := ctl.Step(ctx); err != nil {
			t.Fatalf("step: %v\n%s", err, log.String())
		}
	}
	step()
	if _, err := cli.ContainerKill(ctx, ids[0], client.ContainerKillOptions{Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var hotAt time.Time
	for time.Now().Before(deadline) {
		step()
		if ctl.Status().Containers != nil {
			for _, c := range ctl.Status().Containers {
				if c.ID == ids[0] && c.Hot {
					hotAt = time.Now()
				}
			}
		}
		if !hotAt.IsZero() {
			break
		}
	}
	if hotAt.IsZero() {
		t.Fatalf("tenant never turned hot:\n%s", log.String())
	}
	during := takeSnapshot(t, cli, ids)
	if got := during["cpuset "+ids[0][:12]]; got != "0" {
		t.Errorf("hot tenant cpuset %q, want the reserved shared CPU 0 (nobody pinned: 2 normal tenants, 1 CPU outside the pool)", got)
	}
	if got := during["class "+ids[0][:12]]; got != "idle=0 cpu.shares=2" {
		t.Errorf("hot tenant class %q, want demoted to the lowest weight (idle=0 cpu.shares=2)", got)
	}
	if d := diff(before, during); d == "" {
		t.Errorf("controller changed nothing")
	}
	if err := ctl.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if d := diff(before, takeSnapshot(t, cli, ids)); d != "" {
		t.Errorf("not restored exactly: %s", d)
	}
}

// TestSignalsRestoreDocker runs the real command: SIGTERM restores on exit;
// SIGKILL leaves a checkpoint that `isolate restore` (and a restart) undoes.
func TestSignalsRestoreDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	runID := fmt.Sprintf("iso%d", time.Now().UnixNano()%1_000_000)
	ids := tenants(t, cli, runID, 2)
	before := takeSnapshot(t, cli, ids)
	if _, err := cli.ContainerKill(context.Background(), ids[0], client.ContainerKillOptions{Signal: "USR1"}); err != nil { // it spins from now on
		t.Fatal(err)
	}
	bin := testenv.Ctrperf(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			state := t.TempDir()
			var out bytes.Buffer
			// --demote-class idle: this test is about an idle group, whose
			// weight the kernel refuses to change.
			cmd := exec.Command(bin, "isolate", "run", "--policy", "shield", "--demote-class", "idle", "--hot-threshold", "0.4", "--cool-threshold", "0.1", "--irq-rotate", "1s",
				"--metrics", "", "--state-dir", state, "--label", "ctrperf.run="+runID)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until it has demoted the hot tenant (and pinned the other,
			// alone outside the shared CPU).
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				var s Status
				b, err := os.ReadFile(filepath.Join(state, "status.json"))
				if err == nil && json.Unmarshal(b, &s) == nil && len(s.Containers) == 2 && (s.Containers[0].Demoted || s.Containers[1].Demoted) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Duration(rand.Intn(1000)) * time.Millisecond) // a random point
			if d := diff(before, takeSnapshot(t, cli, ids)); d == "" {
				t.Fatalf("controller changed nothing before the signal:\n%s", out.String())
			}
			_ = cmd.Process.Signal(sig)
			_ = cmd.Wait()
			if sig == syscall.SIGKILL {
				if d := diff(before, takeSnapshot(t, cli, ids)); d == "" {
					t.Fatalf("SIGKILL should have left changes for restore to undo")
				}
				r := exec.Command(bin, "isolate", "restore", "--state-dir", state)
				if b, err := r.CombinedOutput(); err != nil {
					t.Fatalf("isolate restore: %v\n%s", err, b)
				}
			}
			if d := diff(before, takeSnapshot(t, cli, ids)); d != "" {
				t.Errorf("after %s: not restored exactly: %s\n%s", sig, d, out.String())
			}
		})
	}
}

// TestLifecycleDocker: while the controller runs, the pinned tenant is
// paused and unpaused, its cpuset is changed with `docker update`, and the
// demoted (hot) tenant is restarted. Nothing is forgotten while paused, the
// update becomes the tenant's new original (never the controller's own
// value), the restart's fresh cgroup is noticed, and the log has no error.
func TestLifecycleDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	top, err := DiscoverTopology(kernel.DefaultFS())
	if err != nil {
		t.Fatal(err)
	}
	if len(top.CPUs) < 2 {
		t.Skip("needs 2 CPUs: one for the shared pool, one to pin the quiet tenant to")
	}
	runID := fmt.Sprintf("iso%d", time.Now().UnixNano()%1_000_000)
	ids := tenants(t, cli, runID, 2)
	hot, quiet := ids[0], ids[1]
	ctx := context.Background()
	fs := realFS(cli)
	origQuiet, err := fs.CPUs(ctx, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerKill(ctx, hot, client.ContainerKillOptions{Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	ctl := realController(t, cli, runID, t.TempDir(), PolicyShield, &log.Buffer)
	ctl.log = &log
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx, ctl.rt.(*DockerRuntime).Events(runCtx)) }()
	stopped := false
	stop := func() {
		if !stopped {
			cancel()
			<-done
			stopped = true
		}
	}
	defer stop()
	waitFor := func(what string, ok func(Status) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if ok(ctl.Status()) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: not within 20 s; status %+v\n%s", what, ctl.Status(), log.String())
	}
	row := func(s Status, id string) ContainerStatus {
		for _, c := range s.Containers {
			if c.ID == id {
				return c
			}
		}
		return ContainerStatus{}
	}
	pinned := func(s Status) bool { return row(s, hot).Demoted && row(s, quiet).Pinned }
	waitFor("hot tenant demoted and quiet tenant pinned", pinned)
	want := row(ctl.Status(), quiet).CPUs

	// Pause: still managed, its original kept.
	if _, err := cli.ContainerPause(ctx, quiet, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if r := row(ctl.Status(), quiet); r.ID == "" || ctl.ckptCopy().CPUSets[quiet] != origQuiet {
		t.Errorf("paused tenant dropped (%+v) or its original lost (%q)", r, ctl.ckptCopy().CPUSets[quiet])
	}
	if _, err := cli.ContainerUnpause(ctx, quiet, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}

	// docker update --cpuset-cpus 0: the new original; the placement comes back.
	if _, err := cli.ContainerUpdate(ctx, quiet, client.ContainerUpdateOptions{Resources: &container.Resources{CpusetCpus: "0"}}); err != nil {
		t.Fatal(err)
	}
	waitFor("update taken as the new original", func(s Status) bool { return ctl.ckptCopy().CPUSets[quiet] == "0" })
	waitFor("placement applied again", func(s Status) bool {
		cur, err := fs.CPUs(ctx, quiet)
		return err == nil && cur == want
	})

	// Restart the demoted tenant: a fresh cgroup (idle=0), not hot any more.
	if _, err := cli.ContainerRestart(ctx, hot, client.ContainerRestartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("restarted tenant normal again", func(s Status) bool { r := row(s, hot); return r.ID != "" && !r.Hot && !r.Demoted })
	cl, err := fs.Class(ctx, hot)
	if err != nil || cl.Idle != 0 || cl.Weight != 1024 {
		t.Errorf("restarted tenant's class %s (%v), want idle=0 cpu.shares=1024", cl, err)
	}

	stop()
	if err := ctl.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ := fs.CPUs(ctx, quiet); cur != "0" {
		t.Errorf("quiet tenant restored to %q, want its updated original \"0\"", cur)
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(line, `"kind":"error"`) {
			t.Errorf("controller error: %s", line)
		}
	}
	if !strings.Contains(log.String(), `"kind":"drift"`) {
		t.Errorf("no drift event for the update or the restart:\n%s", log.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the control loop and the test.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// TestRestartLeavesChangedClassDocker: the controller demotes a hot tenant
// and is SIGKILLed; the operator gives the tenant a new weight (leaving the
// idle class first: the kernel refuses a weight for an idle group) with
// `docker update --cpu-shares`; the next start finds the checkpoint, leaves
// the new weight alone instead of writing back the original, and says why
// in the decision log.
func TestRestartLeavesChangedClassDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	runID := fmt.Sprintf("iso%d", time.Now().UnixNano()%1_000_000)
	ids := tenants(t, cli, runID, 2)
	hot := ids[0]
	ctx := context.Background()
	fs := realFS(cli)
	if _, err := cli.ContainerKill(ctx, hot, client.ContainerKillOptions{Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	bin := testenv.Ctrperf(t)
	state := t.TempDir()
	run := func() (*exec.Cmd, *syncBuffer) {
		var out syncBuffer
		// --cool-after 600: the demoted spinner gets almost no CPU on a
		// busy machine (other packages' tests beside this one), looks calm
		// and was undemoted within the second status.json lagged behind;
		// the SIGKILL must find the demotion in place.
		// --demote-class idle: this test is about an idle group, whose
		// weight the kernel refuses to change.
		cmd := exec.Command(bin, "isolate", "run", "--policy", "shield", "--demote-class", "idle", "--hot-threshold", "0.4", "--cool-threshold", "0.1", "--cool-after", "600",
			"--irq=false", "--rps=false", "--metrics", "", "--state-dir", state, "--label", "ctrperf.run="+runID)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
		return cmd, &out
	}
	waitStatus := func(what string, out *syncBuffer, ok func(Status) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			var s Status
			b, err := os.ReadFile(filepath.Join(state, "status.json"))
			if err == nil && json.Unmarshal(b, &s) == nil && ok(s) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: not within 20 s\n%s", what, out.String())
	}

	first, out := run()
	waitStatus("hot tenant demoted", out, func(s Status) bool {
		return slices.ContainsFunc(s.Containers, func(c ContainerStatus) bool { return c.ID == hot && c.Demoted })
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	_ = os.Remove(filepath.Join(state, "status.json"))
	if cl, err := fs.Class(ctx, hot); err != nil || cl.Idle != 1 {
		t.Fatalf("after SIGKILL the tenant's class is %s (%v), want the controller's idle=1 left behind", cl, err)
	}

	// The operator: the tenant is quiet now, out of the idle class, and
	// gets a weight of its own.
	if _, err := cli.ContainerKill(ctx, hot, client.ContainerKillOptions{Signal: "USR2"}); err != nil {
		t.Fatal(err)
	}
	cl, err := fs.Class(ctx, hot)
	if err != nil {
		t.Fatal(err)
	}
	cl.Idle = 0
	if err := fs.SetClass(ctx, hot, cl); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerUpdate(ctx, hot, client.ContainerUpdateOptions{Resources: &container.Resources{CPUShares: 512}}); err != nil {
		t.Fatalf("docker update --cpu-shares 512: %v", err)
	}

	second, out := run()
	waitStatus("second controller running", out, func(Status) bool { return true })
	if cl, err := fs.Class(ctx, hot); err != nil || cl.Idle != 0 || cl.Weight != 512 {
		t.Errorf("after the restart the tenant's class is %s (%v), want the operator's idle=0 cpu.shares=512", cl, err)
	}
	log, err := os.ReadFile(filepath.Join(state, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var why *Event
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var e Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "left_alone" && e.Container == hot {
			why = &e
		}
	}
	if why == nil || !strings.Contains(why.Reason, ReasonLeftAlone) || !strings.Contains(why.Reason, "cpu.shares=512") {
		t.Errorf("decision log does not say why the class was left alone (want a left_alone event for %s naming cpu.shares=512):\n%s", short(hot), log)
	}
	_ = second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("second controller: %v\n%s", err, out.String())
	}
	if cl, err := fs.Class(ctx, hot); err != nil || cl.Idle != 0 || cl.Weight != 512 {
		t.Errorf("after the second controller stopped the tenant's class is %s (%v), want idle=0 cpu.shares=512", cl, err)
	}
}

// TestNoFlappingSaturatedDocker: two CPU-bound containers the controller
// does not manage (normal class) saturate the 2 CPUs beside a managed
// spinner and a quiet tenant. The spinner turns hot and is demoted, which
// starves it; the decision log must then show no flapping — at most one
// hot/normal transition of the spinner in 12 s. Before issue 36 its usage
// fell below cool_threshold while it was starved, it was undemoted after
// cool_after samples and turned hot again a few samples later.
func TestNoFlappingSaturatedDocker(t *testing.T) {
	cli := dockerOrSkip(t)
	runID := fmt.Sprintf("isoflap%d", time.Now().UnixNano()%1_000_000)
	ids := tenants(t, cli, runID, 2)
	ctx := context.Background()
	// The saturators: the same spin image, without the isolate label.
	for i := range 2 {
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: spinRef,
			Labels: map[string]string{"ctrperf.managed": "true", "ctrperf.run": runID}},
			HostConfig: &container.HostConfig{}, Name: fmt.Sprintf("ctrperf-%s-sat%d", runID, i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "USR1"}); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	ctl := realController(t, cli, runID, t.TempDir(), PolicyShield, &log)
	defer func() {
		if err := ctl.Restore(context.Background()); err != nil {
			t.Errorf("restore: %v", err)
		}
	}()
	if _, err := cli.ContainerKill(ctx, ids[0], client.ContainerKillOptions{Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(12 * time.Second)
	for time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
		if err := ctl.Step(ctx); err != nil {
			t.Fatalf("step: %v\n%s", err, log.String())
		}
	}
	transitions, demoted := 0, false
	dec := json.NewDecoder(&log)
	for {
		var e Event
		if err := dec.Decode(&e); err != nil {
			break
		}
		if e.Container != ids[0] {
			continue
		}
		switch e.Kind {
		case "hot", "normal":
			transitions++
			t.Logf("%s %s: %s", e.Time.Format("15:04:05.000"), e.Kind, e.Reason)
		case "demote":
			demoted = true
		}
	}
	if !demoted {
		t.Fatalf("the spinner was never demoted: the test did not reach the case it is for")
	}
	if transitions > 1 {
		t.Errorf("%d hot/normal transitions of the demoted spinner in 12 s on saturated CPUs, want at most 1 (flapping)", transitions)
	}
}

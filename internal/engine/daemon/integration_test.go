package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

// requireDockerRoot skips unless this host can run private engines (root and
// dockerd); with CTRPERF_REQUIRE_DOCKER=1 it fails instead.
func requireDockerRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "private engines")
	if _, err := exec.LookPath("dockerd"); err != nil {
		testenv.SkipOrFail(t, "needs dockerd (Debian package docker.io)")
	}
}

func testRunID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "t" + hex.EncodeToString(b)
}

// assertNothingLeft checks every kind of thing a private engine owns.
func assertNothingLeft(t *testing.T, st *State) {
	t.Helper()
	o := buildOptions(nil)
	if st.PID != 0 && procAlive(kernel.DefaultFS(), st.PID) {
		t.Errorf("dockerd pid %d still running", st.PID)
	}
	if pids := pidsMatching(kernel.DefaultFS(), st.ExecRoot); len(pids) > 0 {
		t.Errorf("processes of exec-root %s still running: %v", st.ExecRoot, pids)
	}
	mi, err := kernel.Mounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{st.ExecRoot, st.DataRoot, stateDir(o, st.Name), filepath.Join(o.enginesDir(), st.Name+".lock")}
	if st.Loop != nil {
		dirs = append(dirs, st.Loop.Mount)
		if devs := loopDevicesOf(kernel.DefaultFS(), st.Loop.Image); len(devs) > 0 {
			t.Errorf("loop devices still attached to %s: %v", st.Loop.Image, devs)
		}
		if _, err := os.Stat(st.Loop.Image); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("loop image %s still exists", st.Loop.Image)
		}
	}
	if m := kernel.MountsUnder(mi, dirs...); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", d)
		}
	}
	if _, err := netlink.LinkByName(st.Bridge); err == nil {
		t.Errorf("bridge %s still exists", st.Bridge)
	}
	if rules, err := saveAll(context.Background(), execIPTables{}); err == nil {
		if left := rulesOf(rules, st.Bridge, st.Subnet); len(left) > 0 {
			t.Errorf("iptables rules of %s left: %v", st.Bridge, left)
		}
	}
}

func TestPrivateBtrfsLoopNoProxyDocker(t *testing.T) {
	requireDockerRoot(t)
	testenv.StartCtrperf() // for TestPrivateEngineStartInterruptedKeepsRulesDocker, meanwhile
	ctx := context.Background()
	runID := testRunID(t)
	// Witness rules stand for another engine's port rules: they name an
	// interface of this test that carries no traffic, so they match nothing,
	// and only this test adds or removes them, unlike the rules of engines other
	// engineers' tests churn concurrently on a shared machine.
	witness := "ctrperfw" + runID[1:8]
	// The interface exists (one end of a veth pair, down, carrying
	// nothing): restore leaves out the rules of interfaces that are gone,
	// as a removed network's.
	peer := "ctrperfv" + runID[1:8]
	if out, err := exec.CommandContext(ctx, "ip", "link", "add", witness, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
		t.Fatalf("ip link add %s type veth: %v: %s", witness, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", witness).Run() })
	witnesses := [][]string{{"-t", "nat", "DOCKER", "-i", witness, "-j", "RETURN"}, {"-t", "filter", "DOCKER-ISOLATION-STAGE-1", "-i", witness, "-j", "RETURN"}}
	for _, w := range witnesses {
		if err := (execIPTables{}).Run(ctx, append([]string{"-w", w[0], w[1], "-I", w[2], "1"}, w[3:]...)...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range witnesses {
			(execIPTables{}).Run(context.Background(), append([]string{"-w", w[0], w[1], "-D", w[2]}, w[3:]...)...)
		}
	})
	before, err := saveAll(ctx, execIPTables{})
	if err != nil {
		t.Fatal(err)
	}
	spec := engine.EngineSpec{StorageDriver: "btrfs", DataRoot: "loop-btrfs", UserlandProxy: boolp(false)}
	t0 := time.Now()
	d, err := Start(ctx, spec, runID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("private engine %s (btrfs on loop-btrfs) answered after %s; warnings: %v", d.Name(), time.Since(t0).Round(time.Millisecond), d.Warnings)
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), runID) })

	info, err := d.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.StorageDriver != "btrfs" || !info.Private || info.UserlandProxy == nil || *info.UserlandProxy {
		t.Errorf("info = %+v, want btrfs, private, userland proxy off", info)
	}
	if info.DataRoot != st.DataRoot {
		t.Errorf("data root %s, want %s", info.DataRoot, st.DataRoot)
	}
	mi, err := kernel.Mounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var loopMount *kernel.Mount
	for i, m := range mi {
		if m.Point == st.Loop.Mount {
			loopMount = &mi[i]
		}
	}
	if loopMount == nil || loopMount.FSType != "btrfs" || !strings.HasPrefix(loopMount.Source, "/dev/loop") {
		t.Errorf("data root %s is not on a btrfs loop mount: %+v", st.DataRoot, loopMount)
	} else if fsOf(mi, info.DataRoot) != "btrfs" {
		t.Errorf("data root %s is on %s", info.DataRoot, fsOf(mi, info.DataRoot))
	}
	if f, ok := FlagsOf(kernel.DefaultFS(), d.Host()); !ok || f.UserlandProxy || !f.IPTables {
		t.Errorf("dockerd command line flags = %+v (found %v), want proxy off, iptables on", f, ok)
	}
	// Starting it must not have cost the other engines their port rules.
	now, err := saveAll(ctx, execIPTables{})
	if err != nil {
		t.Fatal(err)
	}
	if left := rulesOf(now, witness, ""); len(left) != len(witnesses) {
		t.Errorf("starting a private engine lost other engines' rules: %d of %d witness rules left: %v", len(left), len(witnesses), left)
	}
	if lost := missingRules(dockerChainRules(before), dockerChainRules(now)); len(lost) > 0 {
		t.Logf("rules gone since the snapshot (other tests remove networks concurrently): %v", lost)
	}

	nw, err := d.Client().NetworkCreate(ctx, "ctrperf-net-"+runID, client.NetworkCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close (stop dockerd, unmount, detach loop, remove bridge and rules) took %s", time.Since(t1).Round(time.Millisecond))
	assertNothingLeft(t, &st)
	if _, err := netlink.LinkByName("br-" + nw.ID[:12]); err == nil {
		t.Errorf("Close left the bridge of a user-defined network")
	}
	// --userland-proxy=false hooked nat OUTPUT into DOCKER for loopback
	// too; left behind, that hook sends 127.0.0.1 traffic for the user's
	// published ports away from their docker-proxy, and it hangs.
	if len(st.AddedJumps) == 0 {
		t.Logf("the engine added no jumps into DOCKER (a hook was already there)")
	}
	after, err := saveAll(ctx, execIPTables{})
	if err != nil {
		t.Fatal(err)
	}
	if extra := missingRules(jumpRules(after), jumpRules(before)); len(extra) > 0 {
		t.Errorf("Close left jumps into DOCKER that were not there before: %v", extra)
	}
	if lost := missingRules(jumpRules(before), jumpRules(after)); len(lost) > 0 {
		t.Errorf("the other engines' jumps into DOCKER are gone after Start and Close: %v", lost)
	}
}

// buildSleeperImage imports a FROM-scratch image holding a static sleeper
// into d, tagged for this run and labelled as ctrperf's.
func buildSleeperImage(t *testing.T, d *Daemon, ref string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sleeper")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/sleeper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sleeper: %v\n%s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "sleeper", Mode: 0o755, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(body)
	tw.Close()
	rc, err := d.Client().ImageImport(context.Background(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`CMD ["/sleeper"]`, "LABEL " + engine.LabelManaged + "=true"}})
	if err != nil {
		t.Fatalf("import %s into %s: %v", ref, d.Name(), err)
	}
	defer rc.Close()
	if err := loadStreamError(rc); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	t.Cleanup(func() {
		d.Client().ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
}

// TestCopyImagesAndCleanAllAfterKillDocker: images copied from the user's
// engine into a private overlay2 engine on a loop-ext4 data root; a container
// runs; then the dockerd is SIGKILLed like a killed run, and CleanAll(runID)
// must leave nothing: no engine, containerd, container process, mount, loop
// device, bridge, rules or state.
func TestCopyImagesAndCleanAllAfterKillDocker(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	runID := testRunID(t)
	user, err := Default(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close(ctx)
	ref := "ctrperf-test-sleeper:" + runID
	buildSleeperImage(t, user, ref)

	spec := engine.EngineSpec{StorageDriver: "overlay2", DataRoot: "loop-ext4"}
	t0 := time.Now()
	d, err := Start(ctx, spec, runID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("private engine %s (overlay2 on loop-ext4) answered after %s", d.Name(), time.Since(t0).Round(time.Millisecond))
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), runID) })

	if err := CopyImages(ctx, user, d, ref); err != nil {
		t.Fatal(err)
	}
	if err := CopyImages(ctx, user, d, ref); err != nil {
		t.Fatalf("copying an image already there: %v", err)
	}
	if err := CopyImages(ctx, user, d, "ctrperf-test-absent:"+runID); err == nil || !strings.Contains(err.Error(), "not in engine") {
		t.Errorf("copying an absent image: %v", err)
	}
	// A user-defined network (as for app + DB split): its br-* bridge is
	// named by dockerd alone, so only the engine can remove it.
	nw, err := d.Client().NetworkCreate(ctx, "ctrperf-net-"+runID, client.NetworkCreateOptions{Labels: map[string]string{engine.LabelManaged: "true", engine.LabelRun: runID}})
	if err != nil {
		t.Fatal(err)
	}
	userBridge := "br-" + nw.ID[:12]
	c, err := d.Client().ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: ref, Labels: map[string]string{engine.LabelManaged: "true", engine.LabelRun: runID}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode("ctrperf-net-" + runID)},
		Name:       "ctrperf-sleeper-" + runID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client().ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	ci, err := d.Client().ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctrPID := ci.Container.State.Pid
	if ctrPID == 0 || !procAlive(kernel.DefaultFS(), ctrPID) {
		t.Fatalf("container process %d is not running", ctrPID)
	}

	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	ls, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == st.Name && l.Alive {
			t.Errorf("List says killed engine %s is alive", l.Name)
		}
	}
	done, err := CleanAll(ctx, runID)
	t.Logf("CleanAll(%s) removed:\n%s", runID, strings.Join(done, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if procAlive(kernel.DefaultFS(), ctrPID) {
		t.Errorf("container process %d survived CleanAll", ctrPID)
	}
	if _, err := netlink.LinkByName(userBridge); err == nil {
		t.Errorf("bridge %s of the user-defined network survived CleanAll", userBridge)
	}
	if rules, err := saveAll(ctx, execIPTables{}); err == nil {
		if left := rulesOf(rules, userBridge, ""); len(left) > 0 {
			t.Errorf("iptables rules of %s survived CleanAll: %v", userBridge, left)
		}
	}
	assertNothingLeft(t, &st)
	if err := d.Close(ctx); err != nil {
		t.Errorf("Close after CleanAll must be harmless: %v", err)
	}
}

func TestPrivateVfsDocker(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	runID := testRunID(t)
	d, err := Start(ctx, engine.EngineSpec{StorageDriver: "vfs"}, runID)
	if err != nil {
		t.Fatal(err)
	}
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), runID) })
	info, err := d.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.StorageDriver != "vfs" || info.UserlandProxy == nil || !*info.UserlandProxy {
		t.Errorf("info = %+v, want vfs with the userland proxy on (dockerd's default)", info)
	}
	// Asking again for the same engine shares it instead of starting another.
	again, err := Start(ctx, engine.EngineSpec{StorageDriver: "vfs"}, runID)
	if err != nil {
		t.Fatal(err)
	}
	if again.owned || again.State().PID != st.PID {
		t.Errorf("second Start owned=%v pid=%d, want the running engine %d shared", again.owned, again.State().PID, st.PID)
	}
	again.Close(ctx)
	if !procAlive(kernel.DefaultFS(), st.PID) {
		t.Fatal("closing a shared handle stopped the engine")
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, &st)
}

func TestStartFailuresLeaveNothingRoot(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	runID := testRunID(t)
	fakeDockerd := filepath.Join(t.TempDir(), "dockerd")
	script := "#!/bin/sh\necho 'failed to start daemon: error initializing graphdriver: driver not supported' >&2\nexit 1\n"
	if err := os.WriteFile(fakeDockerd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		spec    engine.EngineSpec
		opts    []Option
		wantErr string
	}{
		{"unknown driver fails before anything starts", engine.EngineSpec{StorageDriver: "overlay3"}, nil, `unknown storage driver "overlay3"`},
		{"devicemapper says why", engine.EngineSpec{StorageDriver: "devicemapper"}, nil, "no device-mapper"},
		{"btrfs on the native root says which data root", engine.EngineSpec{StorageDriver: "btrfs"}, nil, "needs data_root: loop-btrfs"},
		{"a dockerd that dies shows its log", engine.EngineSpec{StorageDriver: "vfs", DataRoot: "loop-xfs"}, []Option{WithDockerd(fakeDockerd)}, "driver not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d, err := Start(ctx, tt.spec, runID, tt.opts...)
			if err == nil {
				d.Close(ctx)
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q lacks %q", err, tt.wantErr)
			}
			st := newState(buildOptions(nil), engineName(tt.spec, runID), runID, tt.spec)
			assertNothingLeft(t, st)
		})
	}
}

// TestDefaultStartsPrivateDocker: when no engine answers (DOCKER_HOST points
// at a socket nobody serves), Default starts ctrperf's own engine; Close
// stops it but keeps its data root, so the image cache survives.
func TestDefaultStartsPrivateDocker(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "nobody.sock"))
	opts := []Option{WithRunDir(filepath.Join(dir, "run")), WithLibDir(filepath.Join(dir, "lib"))}
	t0 := time.Now()
	d, err := Default(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("default private engine answered after %s", time.Since(t0).Round(time.Millisecond))
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), "", opts...) })
	info, err := d.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Private || info.Name != "ctrperf-default" || info.DataRoot != filepath.Join(dir, "lib", "engines", "default") {
		t.Errorf("info = %+v, want the private default engine with its data root under the lib dir", info)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if procAlive(kernel.DefaultFS(), st.PID) {
		t.Errorf("dockerd %d still running after Close", st.PID)
	}
	if _, err := os.Stat(filepath.Join(st.DataRoot, "image")); err != nil {
		t.Errorf("the default engine's data root must persist: %v", err)
	}
	if _, err := os.Stat(stateDir(buildOptions(opts), st.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state of a closed engine left: %v", err)
	}
	if _, err := netlink.LinkByName(st.Bridge); err == nil {
		t.Errorf("bridge %s left", st.Bridge)
	}
}

// TestCleanAllWithoutReviveDocker: a killed engine that cannot be revived
// (its own bridge is gone too) still has its user-defined network bridges
// and their rules removed, found through its network store.
func TestCleanAllWithoutReviveDocker(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	runID := testRunID(t)
	d, err := Start(ctx, engine.EngineSpec{StorageDriver: "vfs"}, runID)
	if err != nil {
		t.Fatal(err)
	}
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), runID) })
	nw, err := d.Client().NetworkCreate(ctx, "ctrperf-net-"+runID, client.NetworkCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userBridge := "br-" + nw.ID[:12]
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	if _, err := deleteBridge(st.Bridge); err != nil {
		t.Fatal(err)
	}
	if revivable(buildOptions(nil), &st) {
		t.Fatal("an engine without its bridge must not be revived")
	}
	done, err := CleanAll(ctx, runID)
	t.Logf("CleanAll(%s):\n%s", runID, strings.Join(done, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(userBridge); err == nil {
		t.Errorf("bridge %s survived", userBridge)
	}
	if rules, err := saveAll(ctx, execIPTables{}); err == nil {
		if left := rulesOf(rules, userBridge, ""); len(left) > 0 {
			t.Errorf("rules of %s survived: %v", userBridge, left)
		}
	}
	assertNothingLeft(t, &st)
}

// TestPrivateOverlayLoopXFSDocker starts overlay2 on a loop-mounted xfs
// image (xfs must be formatted with d_type, which mkfs.xfs does by
// default, or overlay2 refuses it) and checks the data root's filesystem.
func TestPrivateOverlayLoopXFSDocker(t *testing.T) {
	requireDockerRoot(t)
	ctx := context.Background()
	runID := testRunID(t)
	d, err := Start(ctx, engine.EngineSpec{StorageDriver: "overlay2", DataRoot: "loop-xfs"}, runID)
	if err != nil {
		t.Fatal(err)
	}
	st := *d.State()
	t.Cleanup(func() { CleanAll(context.Background(), runID) })
	info, err := d.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.StorageDriver != "overlay2" {
		t.Errorf("storage driver %q, want overlay2", info.StorageDriver)
	}
	mi, err := kernel.Mounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var loopMount *kernel.Mount
	for i, m := range mi {
		if st.Loop != nil && m.Point == st.Loop.Mount {
			loopMount = &mi[i]
		}
	}
	if loopMount == nil || loopMount.FSType != "xfs" || !strings.HasPrefix(loopMount.Source, "/dev/loop") {
		t.Errorf("data root %s is not on an xfs loop mount: %+v", st.DataRoot, loopMount)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, &st)
}

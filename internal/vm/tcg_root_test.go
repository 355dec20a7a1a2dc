package vm_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/agent"
	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/vm"
)

// One emulated guest for the package's tests (a boot under TCG takes
// about half a minute here): booted by the first test that needs it, shut
// down by TestMain, which then checks that nothing of it is left.
var shared struct {
	once  sync.Once
	m     *vm.Machine
	eng   *vm.Engine
	info  engine.Info
	boot  time.Duration
	err   error
	state vm.State
}

// guestSpec is the shared guest: one vCPU, so that the other tests of
// make test's lanes keep a core.
var guestSpec = plan.VMSpec{Accel: vm.AccelTCG, VCPUs: 1, Memory: 1 << 30}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.eng != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := shared.eng.Close(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "shut the shared guest down: %v\n", err)
			code = 1
		}
		cancel()
		if left := leftovers(shared.state); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "the shared guest left %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedGuest is the package's guest, booted on first use. It skips
// (fails under CTRPERF_REQUIRE_DOCKER=1) without root, QEMU or a guest
// kernel.
func sharedGuest(t *testing.T) (*vm.Engine, engine.Info) {
	t.Helper()
	testenv.RequireRoot(t, "a guest's tap device and its QEMU")
	self := testenv.Ctrperf(t)
	shared.once.Do(func() {
		shared.m, shared.err = vm.ThisMachine(self, "vmtest-"+fmt.Sprint(os.Getpid()), os.Stderr)
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		shared.eng, shared.info, shared.err = vm.Open(ctx, shared.m, guestSpec, remote.ClientOptions{Session: "vmtest"})
		shared.boot = time.Since(start)
		if shared.eng != nil {
			shared.state = shared.eng.Guest().State
		}
	})
	if shared.m == nil {
		testenv.SkipOrFail(t, "no emulated guest here: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.eng, shared.info
}

// leftovers is what of guest s exists: its QEMU, tap, run directory,
// overlay.
func leftovers(s vm.State) []string {
	var out []string
	for _, p := range []string{s.Dir, s.DataDir, "/sys/class/net/" + s.Tap} {
		if p == "/sys/class/net/" {
			continue // no tap: the user-mode network
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "\x00-name\x00"+s.Name+"\x00") {
			out = append(out, "QEMU "+filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}

func TestGuestBootsRoot(t *testing.T) {
	eng, info := sharedGuest(t)
	t.Logf("booted in %s: %+v", shared.boot.Round(100*time.Millisecond), *info.VM)
	g := eng.Guest()
	if info.Runtime != "vm" || info.VM == nil || !info.VM.Emulated || info.VM.Kernel != shared.m.Kernel.Version || info.VM.Address != g.GuestIP.Addr().String() {
		t.Errorf("info %+v (vm %+v)", info, info.VM)
	}
	if f := g.Client.Hello.Facts; f.Hostname != "ctrperf-guest" || f.CPUs != 1 || f.Kernel != shared.m.Kernel.Version {
		t.Errorf("the agent's host is not the guest: %+v", f)
	}
	if err := eng.Ping(context.Background()); err != nil {
		t.Error(err)
	}
}

// guestProvider hands every vm configuration the shared guest (its Close
// is TestMain's) and the rest the real engines.
type guestProvider struct {
	real *bench.Engines
	eng  *vm.Engine
	info engine.Info
}

type keepOpen struct{ *vm.Engine }

func (keepOpen) Close(context.Context) error { return nil }

func (p guestProvider) Engine(ctx context.Context, rt engine.Runtime, spec engine.EngineSpec) (engine.Engine, engine.Info, error) {
	if rt == engine.RuntimeVM {
		return keepOpen{p.eng}, p.info, nil
	}
	return p.real.Engine(ctx, rt, spec)
}

func (p guestProvider) Close(ctx context.Context) error { return p.real.Close(ctx) }

// runInGuest runs plan src (its configuration "g" in the shared guest) and
// returns its records.
func runInGuest(t *testing.T, src string) []results.RunRecord {
	t.Helper()
	eng, info := sharedGuest(t)
	return runOn(t, eng, info, src)
}

// runOn runs plan src, its configuration "g" on the guest of eng.
func runOn(t *testing.T, eng *vm.Engine, info engine.Info, src string) []results.RunRecord {
	t.Helper()
	p, err := bench.ParsePlan("guest.yaml", []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	var log strings.Builder
	_, err = bench.Run(ctx, p, bench.Options{Out: out, Engines: guestProvider{real: &bench.Engines{RunID: "vmtest"}, eng: eng, info: info},
		Observers: bench.SystemObservers(), Progress: &bench.Lines{W: &log}})
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "warning: teardown") {
		t.Error("a run's teardown in the guest failed (above)")
	}
	f, err := os.Open(filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []results.RunRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r results.RunRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	for _, r := range recs {
		if r.Config != "g" {
			continue
		}
		if r.Status != results.StatusOK || !r.Emulated || r.Engine == nil || r.Engine.VM == nil || !r.Engine.VM.Emulated {
			t.Errorf("guest run %s: status %s (%s), emulated %v, engine %+v", r.RunID, r.Status, r.Error, r.Emulated, r.Engine)
		}
		if r.System == nil || len(r.System.Samples) == 0 {
			t.Errorf("guest run %s: no samples of the guest", r.RunID)
		} else if _, two := r.System.Samples[len(r.System.Samples)-1].CPU["cpu1"]; two {
			t.Errorf("guest run %s sampled a second CPU: this machine's, not the guest's one", r.RunID)
		}
	}
	return recs
}

// TestGuestCommandRoot: the user's command runs in the guest (nproc is
// the guest's one vCPU, not this machine's), timed there.
func TestGuestCommandRoot(t *testing.T) {
	recs := runInGuest(t, `name: vmcmd
workload: command
app:
  command: "sh -c 'echo cpus=$(nproc) kernel=$(uname -r)'"
load: {runs: 2, warmup_runs: 0, timeout: 1m, figure: cpus, better: higher, figure_regex: 'cpus=(?P<value>[0-9]+)'}
repetitions: 1
warmup: 0s
duration: 2s
baseline: g
configurations:
  - name: g
    runtime: vm
    vm: {accel: tcg, vcpus: 1, memory: 1g}
`)
	if len(recs) != 1 || recs[0].Result == nil || recs[0].Result.Metrics["cpus"] != 1 {
		t.Fatalf("records %+v: want one run whose command saw 1 CPU", recs)
	}
}

// TestGuestWebRoot: ticketd in the guest, the load on this machine
// dialling the guest's address over the tap.
func TestGuestWebRoot(t *testing.T) {
	recs := runInGuest(t, `name: vmweb
workload: web
load: {rate: 5}
app: {db: sqlite}
repetitions: 1
warmup: 1s
duration: 2s  # the path works or not: no figure is compared
baseline: g
configurations:
  - name: g
    runtime: vm
    vm: {accel: tcg, vcpus: 1, memory: 1g}
`)
	if len(recs) != 1 || recs[0].Result == nil || recs[0].Result.Metrics[results.MetricThroughput] <= 0 {
		t.Fatalf("records %+v: want one run with requests served", recs)
	}
	if e := recs[0].Result.Metrics["error_rate"]; e > 0 {
		t.Errorf("error rate %v through the tap", e)
	}
}

// TestGuestFileioRoot: fio in the guest on its own disk (the overlay on
// virtio-blk).
func TestGuestFileioRoot(t *testing.T) {
	recs := runInGuest(t, `name: vmfio
workload: fileio
load: {job: fsync, size: 16M, direct: false}
repetitions: 1
warmup: 1s
duration: 2s  # the mechanism, not a figure
baseline: g
configurations:
  - name: g
    runtime: vm
    vm: {accel: tcg, vcpus: 1, memory: 1g}
`)
	if len(recs) != 1 || recs[0].Result == nil || recs[0].Result.Metrics["write_iops"] <= 0 {
		t.Fatalf("records %+v: want one fio run with writes", recs)
	}
}

// TestGuestUserNetVirtiofsRoot: a guest of its own (one more boot) on
// QEMU's user-mode network with its data on virtiofs: web's load on this
// machine dials a port QEMU forwards, and each record says that a
// userspace relay is in the path; fio writes its files on the directory
// shared from this machine (virtiofsd); nothing of the guest is left, its
// virtiofsd neither.
func TestGuestUserNetVirtiofsRoot(t *testing.T) {
	sharedGuest(t) // the machine, and the skip without one
	spec := plan.VMSpec{Accel: vm.AccelTCG, VCPUs: 1, Memory: 1 << 30, Network: vm.NetworkUser, Disk: vm.DiskVirtiofs}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	eng, info, err := vm.Open(ctx, shared.m, spec, remote.ClientOptions{Session: "vmtest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted in %s", time.Since(start).Round(100*time.Millisecond))
	s := eng.Guest().State
	defer func() {
		if err := eng.Close(context.Background()); err != nil {
			t.Error(err)
		}
		left := leftovers(s)
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), s.Dir+"/virtiofs.sock") {
				left = append(left, "virtiofsd "+filepath.Base(filepath.Dir(p)))
			}
		}
		if len(left) > 0 {
			t.Errorf("the guest left %v", left)
		}
	}()
	if s.Tap != "" || info.VM.Network != vm.NetworkUser || info.VM.Disk != vm.DiskVirtiofs {
		t.Errorf("guest %+v, info %+v", s, *info.VM)
	}
	cfg := "  - name: g\n    runtime: vm\n    vm: {accel: tcg, vcpus: 1, memory: 1g, network: user, disk: virtiofs}\n"
	web := runOn(t, eng, info, "name: vmuser\nworkload: web\nload: {rate: 5}\napp: {db: sqlite}\nrepetitions: 1\nwarmup: 1s\nduration: 2s\nbaseline: g\nconfigurations:\n"+cfg)
	if len(web) != 1 || web[0].Result == nil || web[0].Result.Metrics[results.MetricThroughput] <= 0 {
		t.Fatalf("records %+v: want one web run with requests served through QEMU's forward", web)
	}
	if p := web[0].Result.Path; p == nil || p.Kind != results.PathRelayed || len(p.Dialled) == 0 || !strings.HasPrefix(p.Dialled[0], "127.0.0.1:") ||
		!slices.ContainsFunc(web[0].Result.Notes, func(n string) bool { return strings.Contains(n, plan.RelayNote) }) {
		t.Errorf("path %+v, notes %q: want the relay said", p, web[0].Result.Notes)
	}
	// The mount, seen from the guest, and fio's files on it.
	mounted := runOn(t, eng, info, "name: vmfs\nworkload: command\napp: {command: \"sh -c 'echo mounts=$(grep -c virtiofs /proc/mounts)'\"}\n"+
		"load: {runs: 1, warmup_runs: 0, timeout: 1m, figure: mounts, better: higher, figure_regex: 'mounts=(?P<value>[0-9]+)'}\nrepetitions: 1\nwarmup: 0s\nduration: 1s\nbaseline: g\nconfigurations:\n"+cfg)
	if len(mounted) != 1 || mounted[0].Result == nil || mounted[0].Result.Metrics["mounts"] != 1 {
		t.Errorf("records %+v: want the guest to see one virtiofs mount at %s", mounted, vm.GuestDataDir)
	}
	fio := runOn(t, eng, info, "name: vmfio\nworkload: fileio\nload: {job: fsync, size: 16M, direct: false}\nrepetitions: 1\nwarmup: 1s\nduration: 2s\nbaseline: g\nconfigurations:\n"+cfg)
	if len(fio) != 1 || fio[0].Result == nil || fio[0].Result.Metrics["write_iops"] <= 0 {
		t.Fatalf("records %+v: want one fio run with writes on virtiofs", fio)
	}
}

// TestGuestDockerRoot: a guest of its own with Docker inside (vm.docker,
// seed 003's "container in VM"): its dockerd answers the agent, an image
// is shipped into it from this machine's engine (docker save into a file,
// attached to the guest as a disk, docker load there, the disk detached
// and its file gone), a command runs in a container there (it sees
// /.dockerenv and the guest's one vCPU), the record says so, and after
// teardown and shutdown no container in the guest, no QEMU, tap or
// overlay is left.
func TestGuestDockerRoot(t *testing.T) {
	sharedGuest(t)    // the machine, and the skip without one
	testenv.Docker(t) // this machine's engine: the images shipped into the guest's
	real := &bench.Engines{RunID: "vmtest"}
	defer real.Close(context.Background())
	m := *shared.m
	m.Images = real.Images()
	spec := plan.VMSpec{Accel: vm.AccelTCG, VCPUs: 1, Memory: 1 << 30, Docker: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	eng, info, err := vm.Open(ctx, &m, spec, remote.ClientOptions{Session: "vmtest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted with dockerd answering in %s (engine %s, %s)", time.Since(start).Round(100*time.Millisecond), info.Version, info.StorageDriver)
	s := eng.Guest().State
	closed := false
	defer func() {
		if !closed {
			_ = eng.Close(context.Background())
		}
	}()
	if !info.VM.Docker || info.Version == "" || !strings.HasSuffix(info.Name, "-docker") {
		t.Errorf("info %+v (vm %+v): want the guest's Docker engine", info, *info.VM)
	}
	cfg := "  - name: g\n    runtime: vm\n    vm: {accel: tcg, vcpus: 1, memory: 1g, docker: true}\n"
	shipped := time.Now()
	// A few MB of image: the Debian base (915 MB) takes about 3 minutes
	// on a disk under emulation (the guest's dockerd loads it).
	img := shellImage(t)
	recs := runOn(t, eng, info, "name: vmdocker\nworkload: command\n"+
		"app: {image: "+img+", command: \"sh -c 'echo cpus=$(nproc) container=$(test -e /.dockerenv && echo 1 || echo 0)'\"}\n"+
		"load: {runs: 2, warmup_runs: 0, timeout: 1m, figure: container, better: higher, figure_regex: 'container=(?P<value>[0-9]+)'}\n"+
		"repetitions: 1\nwarmup: 0s\nduration: 2s\nbaseline: g\nconfigurations:\n"+cfg)
	t.Logf("the run, with the image shipped into the guest, took %s", time.Since(shipped).Round(100*time.Millisecond))
	if len(recs) != 1 || recs[0].Result == nil || recs[0].Result.Metrics["container"] != 1 {
		t.Fatalf("records %+v: want one run whose command ran in a container", recs)
	}
	if r := recs[0]; r.Engine == nil || r.Engine.VM == nil || !r.Engine.VM.Docker || r.Engine.Runtime != "vm" {
		t.Errorf("record's engine %+v: want runtime vm with Docker inside", r.Engine)
	}
	// The image went on a disk, which is detached, its file gone.
	if sh := eng.Guest().Shipments(); len(sh) != 1 || sh[0].Bytes == 0 || len(sh[0].Images) != 1 {
		t.Errorf("shipments %+v: want the image's archive on one disk", sh)
	} else {
		t.Logf("shipped %d bytes: save %s, attach %s, load %s, detach %s", sh[0].Bytes, sh[0].Save, sh[0].Attach, sh[0].Load, sh[0].Detach)
	}
	if left, _ := filepath.Glob(filepath.Join(s.DataDir, "ctrperf-ship-*")); len(left) > 0 {
		t.Errorf("the shipment left %v", left)
	}
	// Nothing of the run is left in the guest's engine: its agent's
	// sweep (a dry run) finds none of ctrperf's containers there.
	var swept agent.CleanResult
	if err := eng.Guest().Client.Call(ctx, agent.MethodClean, agent.CleanParams{DryRun: true, Force: true}, &swept, nil); err != nil {
		t.Error(err)
	}
	for _, o := range swept.Found {
		if strings.HasPrefix(o.What, "container ") {
			t.Errorf("the run left container %+v in the guest's engine", o)
		}
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Error(err)
	}
	closed = true
	if l := leftovers(s); len(l) > 0 {
		t.Errorf("the guest left %v", l)
	}
}

// shellImage is an image of this machine's engine with only what the
// command workload's container needs (sh, mkdir, sleep, date, nproc and their
// libraries, copied from this machine): a few MB to ship into a guest.
func shellImage(t *testing.T) string {
	t.Helper()
	cli := testenv.Docker(t)
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"/bin/sh": sh} // in the image → on this machine
	for _, p := range []string{"/bin/mkdir", "/bin/sleep", "/bin/date", "/usr/bin/nproc"} {
		files[p] = p
	}
	for _, bin := range slices.Collect(maps.Values(files)) {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", bin, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				files[f] = f
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for p := range files {
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.New()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		body, err := os.ReadFile(files[p])
		if err != nil {
			t.Fatal(err)
		}
		sum.Write(body)
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := "ctrperf-vmtest-sh:" + hex.EncodeToString(sum.Sum(nil)[:6])
	ctx := context.Background()
	body, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, body)
	body.Close()
	return ref
}

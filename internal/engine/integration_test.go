package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"

	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

// Integration tests: names ending in Docker need the Docker engine, names
// ending in Root need root. Both skip when that is missing, unless
// CTRPERF_REQUIRE_DOCKER=1 (CI), where they fail (see testenv).
//
// Parallel tests: each deploys under a run id of its own and checks only
// that run's objects (by label, name, port, path), and none measures time,
// so they call t.Parallel: a deploy mostly waits on the engine, and the
// package's wall time is what `make test` pays (TestKillDocker also runs
// its four children at once). TestPublishedNoUserlandProxyDocker starts a
// private dockerd (which flushes and restores the shared iptables chains)
// and stays sequential: Go runs it before any parallel test starts, so no
// test of this package runs beside it.

// dockerClient is the engine the Docker tests deploy on; they need root
// too (bind directories, network namespaces).
func dockerClient(t *testing.T) client.APIClient {
	t.Helper()
	testenv.RequireRoot(t, "bind directories, network namespaces")
	return testenv.Docker(t)
}

func newRunID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "enginetest-" + hex.EncodeToString(b)
}

var (
	tinyOnce sync.Once
	tinyBin  string
	tinyErr  error
	tinyDir  string
)

// tinyBinary builds testdata/tinyhttp as a static binary, once per test binary.
func tinyBinary(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		tinyDir, tinyErr = os.MkdirTemp("", "ctrperf-enginetest-")
		if tinyErr != nil {
			return
		}
		tinyBin = filepath.Join(tinyDir, "tinyhttp")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tinyBin, "./testdata/tinyhttp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			tinyErr = fmt.Errorf("build tinyhttp: %v\n%s", err, out)
		}
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyBin
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// tinyImage builds a FROM-scratch image of tinyhttp with the SDK, tagged by
// the binary's digest and labelled ctrperf.managed, reused across tests and
// runs.
func tinyImage(t *testing.T, cli client.APIClient) string {
	t.Helper()
	bin := tinyBinary(t)
	imageOnce.Do(func() {
		data, err := os.ReadFile(bin)
		if err != nil {
			imageErr = err
			return
		}
		sum := sha256.Sum256(data)
		ref := "ctrperf-enginetest-tinyhttp:" + hex.EncodeToString(sum[:6])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cli.ImageInspect(ctx, ref); err == nil {
			imageRef = ref
			return
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		dockerfile := []byte("FROM scratch\nCOPY tinyhttp /tinyhttp\nENTRYPOINT [\"/tinyhttp\"]\n")
		for _, f := range []struct {
			name string
			mode int64
			data []byte
		}{{"Dockerfile", 0o644, dockerfile}, {"tinyhttp", 0o755, data}} {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
				imageErr = err
				return
			}
			if _, err := tw.Write(f.data); err != nil {
				imageErr = err
				return
			}
		}
		if err := tw.Close(); err != nil {
			imageErr = err
			return
		}
		resp, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true,
			Labels: map[string]string{LabelManaged: "true"}})
		if err != nil {
			imageErr = fmt.Errorf("build %s: %w", ref, err)
			return
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			imageErr = fmt.Errorf("build %s: %v\n%s", ref, err, out)
			return
		}
		imageRef = ref
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageRef
}

// tinyService is a tinyhttp server service answering "ok NAME".
func tinyService(img, name string) Service {
	return Service{Name: name, Image: img, Command: []string{"serve", ":{{port:" + name + ":8080}}", name}, Ports: []int{8080},
		DataDir: "/data", Ready: &ReadyCheck{Port: 8080, HTTPPath: "/", Timeout: 30 * time.Second}}
}

func httpGet(t *testing.T, tg *Target, addr, path string) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: tg.Dialer(), DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s%s: %s %s", addr, path, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

func deploy(t *testing.T, e Engine, spec DeploySpec) *Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg, err := e.Deploy(ctx, spec)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Teardown(context.Background(), tg); err != nil {
			t.Errorf("Teardown: %v", err)
		}
	})
	return tg
}

// leftovers lists everything of a run that still exists: Docker objects by
// label, bind and host data directories, client netns and veth, host
// cgroups, host state, processes naming the run.
func leftovers(t *testing.T, cli client.APIClient, runID string) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	if cli != nil {
		f := client.Filters{}.Add("label", LabelRun+"="+runID)
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs.Items {
			left = append(left, "container "+strings.Join(c.Names, ","))
		}
		// Also by name, in case a label were ever missing.
		cs, err = cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("name", NamePrefix+"-"+runID)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs.Items {
			left = append(left, "container by name "+strings.Join(c.Names, ","))
		}
		ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns.Items {
			left = append(left, "network "+n.Name)
		}
		vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs.Items {
			left = append(left, "volume "+v.Name)
		}
	}
	nsName, hostIf, peerIf := externalNames(runID)
	paths := []string{filepath.Join(netnsDir, nsName), filepath.Join(DefaultBindRoot, runID),
		filepath.Join(DefaultHostDataRoot, runID), filepath.Join(DefaultRunDir, "host", runID+".json")}
	for _, c := range v1Controllers {
		paths = append(paths, filepath.Join(DefaultCgroupRoot, c, NamePrefix, runID))
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, "path "+p)
		}
	}
	for _, l := range []string{hostIf, peerIf} {
		if _, err := netlink.LinkByName(l); err == nil {
			left = append(left, "link "+l)
		}
	}
	if out, err := execIPTables(ctx, "-t", "nat", "-S", "OUTPUT"); err == nil {
		for _, r := range parseLoopbackRules(bytes.NewReader(out), runID) {
			left = append(left, fmt.Sprintf("iptables loopback rule for port %d", r.Port))
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(runID)) {
			left = append(left, "process "+e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}

func assertNothingLeft(t *testing.T, cli client.APIClient, runID string) {
	t.Helper()
	if left := leftovers(t, cli, runID); len(left) > 0 {
		t.Errorf("run %s left behind:\n  %s", runID, strings.Join(left, "\n  "))
	}
}

// proxyFor reports whether a docker-proxy process serves host port port.
func proxyFor(port string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "docker-proxy" {
			continue
		}
		for i, a := range args {
			if a == "-host-port" && i+1 < len(args) && args[i+1] == port {
				return true
			}
		}
	}
	return false
}

func TestNetworkModesDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	tests := []struct {
		desc  string
		mode  NetworkMode
		check func(t *testing.T, tg *Target, ep Endpoint)
	}{
		{"published: 127.0.0.1 through docker-proxy", NetworkPublished, func(t *testing.T, tg *Target, ep Endpoint) {
			host, port, _ := net.SplitHostPort(ep.Addr)
			if host != "127.0.0.1" || port == "8080" {
				t.Errorf("endpoint %s, want 127.0.0.1 on a daemon-chosen port", ep.Addr)
			}
			if !proxyFor(port) {
				t.Errorf("no docker-proxy process with -host-port %s", port)
			}
			out, err := execIPTables(context.Background(), "-t", "nat", "-S", "OUTPUT")
			if err != nil {
				t.Fatal(err)
			}
			if rules := parseLoopbackRules(bytes.NewReader(out), tg.RunID); len(rules) != 1 || itoa(rules[0].Port) != port {
				t.Errorf("loopback rules of the run = %v, want one keeping port %s on docker-proxy", rules, port)
			}
		}},
		{"published-external: dialled from the client namespace", NetworkPublishedExternal, func(t *testing.T, tg *Target, ep Endpoint) {
			host, _, _ := net.SplitHostPort(ep.Addr)
			if !strings.HasPrefix(host, "198.1") || !strings.HasSuffix(host, ".1") {
				t.Errorf("endpoint %s, want the host side of a 198.18.0.0/15 veth", ep.Addr)
			}
			// External load tools run through `ip netns exec <Netns>`.
			out, err := exec.Command("ip", "netns", "exec", tg.Netns, "ip", "-4", "-o", "addr").CombinedOutput()
			if err != nil {
				t.Fatalf("ip netns exec %s: %v\n%s", tg.Netns, err, out)
			}
			if peer := strings.TrimSuffix(host, ".1") + ".2/30"; !strings.Contains(string(out), peer) {
				t.Errorf("client namespace %s addresses:\n%s\nwant %s", tg.Netns, out, peer)
			}
			if _, err := tg.Dialer()(context.Background(), "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "only addresses") {
				t.Errorf("dial outside 198.18.0.0/15 from the namespace = %v, want refused", err)
			}
		}},
		{"container-ip: the bridge address", NetworkContainerIP, func(t *testing.T, tg *Target, ep Endpoint) {
			if want := net.JoinHostPort(tg.Containers[0].IP, "8080"); ep.Addr != want {
				t.Errorf("endpoint %s, want %s", ep.Addr, want)
			}
		}},
		{"host: --net=host on an allocated port", NetworkHost, func(t *testing.T, tg *Target, ep Endpoint) {
			host, port, _ := net.SplitHostPort(ep.Addr)
			if host != "127.0.0.1" || port == "8080" {
				t.Errorf("endpoint %s, want 127.0.0.1 on an allocated port", ep.Addr)
			}
			if tg.Containers[0].IP != "" {
				t.Errorf("host-network container has IP %q", tg.Containers[0].IP)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel() // runs of their own; nothing here counts another's
			runID := newRunID(t)
			tg := deploy(t, d, DeploySpec{RunID: runID, Network: tc.mode, Data: DataLayer, Services: []Service{tinyService(img, "app")}})
			ep, err := tg.Endpoint("app", 8080)
			if err != nil {
				t.Fatal(err)
			}
			if got := httpGet(t, tg, ep.Addr, "/"); got != "ok app" {
				t.Errorf("GET / = %q, want ok app", got)
			}
			c := tg.Containers[0]
			if c.PID <= 0 || !strings.Contains(c.CgroupPath, c.ID) || c.Name != ObjectName(runID, "app") {
				t.Errorf("container = %+v, want PID, name and a cgroup path naming the id", c)
			}
			tc.check(t, tg, ep)
			if err := d.Teardown(context.Background(), tg); err != nil {
				t.Fatal(err)
			}
			if err := d.Teardown(context.Background(), tg); err != nil {
				t.Errorf("second Teardown: %v", err)
			}
			assertNothingLeft(t, cli, runID)
		})
	}
}

func TestDataPlacementsDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	for _, data := range []DataPlacement{DataLayer, DataVolume, DataBind, DataTmpfs} {
		t.Run(string(data), func(t *testing.T) {
			t.Parallel() // runs of their own; nothing here counts another's
			runID := newRunID(t)
			tg := deploy(t, d, DeploySpec{RunID: runID, Network: NetworkContainerIP, Data: data, Services: []Service{tinyService(img, "app")}})
			res, err := d.Exec(context.Background(), tg, "app", []string{"/tinyhttp", "write", "/data/probe", runID})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec write: %+v %v", res, err)
			}
			res, err = d.Exec(context.Background(), tg, "app", []string{"/tinyhttp", "cat", "/data/probe"})
			if err != nil || res.ExitCode != 0 || string(res.Stdout) != runID {
				t.Fatalf("exec cat = %q (stderr %q, exit %d), %v", res.Stdout, res.Stderr, res.ExitCode, err)
			}
			inr, err := cli.ContainerInspect(context.Background(), tg.Containers[0].ID, client.ContainerInspectOptions{})
			in := inr.Container
			if err != nil {
				t.Fatal(err)
			}
			var hostFile string
			switch data {
			case DataLayer:
				if len(in.Mounts) != 0 || len(in.HostConfig.Tmpfs) != 0 {
					t.Errorf("layer placement has mounts %+v tmpfs %v", in.Mounts, in.HostConfig.Tmpfs)
				}
			case DataVolume:
				if len(in.Mounts) != 1 || in.Mounts[0].Type != "volume" || in.Mounts[0].Name != ObjectName(runID, "app") || in.Mounts[0].Destination != "/data" {
					t.Fatalf("mounts = %+v, want volume %s at /data", in.Mounts, ObjectName(runID, "app"))
				}
				hostFile = filepath.Join(in.Mounts[0].Source, "probe")
			case DataBind:
				want := filepath.Join(DefaultBindRoot, runID, "app")
				if len(in.Mounts) != 1 || in.Mounts[0].Type != "bind" || in.Mounts[0].Source != want {
					t.Fatalf("mounts = %+v, want bind of %s", in.Mounts, want)
				}
				hostFile = filepath.Join(want, "probe")
			case DataTmpfs:
				if _, ok := in.HostConfig.Tmpfs["/data"]; !ok {
					t.Fatalf("HostConfig.Tmpfs = %v, want /data", in.HostConfig.Tmpfs)
				}
				mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", tg.Containers[0].PID))
				if err != nil {
					t.Fatal(err)
				}
				if !regexpTmpfsAt(string(mi), "/data") {
					t.Errorf("no tmpfs at /data in the container's mountinfo:\n%s", mi)
				}
			}
			if hostFile != "" {
				b, err := os.ReadFile(hostFile)
				if err != nil || string(b) != runID {
					t.Errorf("data on the host at %s = %q, %v; want %q", hostFile, b, err, runID)
				}
			}
			if err := d.Teardown(context.Background(), tg); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, cli, runID)
		})
	}
}

func regexpTmpfsAt(mountinfo, dir string) bool {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && len(f) > 4 && f[4] == dir && f[i+1] == "tmpfs" {
				return true
			}
		}
	}
	return false
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestResourcesDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	runID := newRunID(t)
	s := tinyService(img, "app")
	s.Resources = Resources{CPUSet: "1", CPUShares: 512, CPUs: 0.5, MemoryBytes: 64 << 20}
	tg := deploy(t, d, DeploySpec{RunID: runID, Network: NetworkContainerIP, Data: DataLayer, Services: []Service{s}})
	cg := tg.Containers[0].CgroupPath
	checks := map[string]string{
		"cpuset/" + cg + "/cpuset.cpus":           "1",
		"cpu/" + cg + "/cpu.shares":               "512",
		"cpu/" + cg + "/cpu.cfs_quota_us":         "50000",
		"memory/" + cg + "/memory.limit_in_bytes": "67108864",
	}
	for p, want := range checks {
		if got := readTrim(t, filepath.Join(DefaultCgroupRoot, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

func TestSplitDeploymentDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	for _, mode := range []NetworkMode{NetworkPublished, NetworkHost} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel() // runs of their own; nothing here counts another's
			runID := newRunID(t)
			front := tinyService(img, "front")
			front.Env = map[string]string{"UPSTREAM": "{{addr:db:8080}}"}
			tg := deploy(t, d, DeploySpec{RunID: runID, Network: mode, Data: DataVolume, Services: []Service{front, tinyService(img, "db")}})
			ep, err := tg.Endpoint("front", 8080)
			if err != nil {
				t.Fatal(err)
			}
			if got := httpGet(t, tg, ep.Addr, "/upstream"); got != "ok db" {
				t.Errorf("front's view of db = %q, want ok db", got)
			}
			if len(tg.Containers) != 2 || tg.Containers[0].Service != "db" || tg.Containers[1].Service != "front" {
				t.Errorf("containers %+v, want db deployed before front", tg.Containers)
			}
		})
	}
}

func TestBadInputLeavesNothingDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	failing := tinyService(img, "app")
	failing.Command = []string{"fail", "the app cannot start: missing config"}
	failing.Ready.Timeout = 10 * time.Second
	tests := []struct {
		desc    string
		spec    func(runID string) DeploySpec
		wantErr []string
	}{
		{"missing image", func(r string) DeploySpec {
			s := tinyService("ctrperf-enginetest-no-such-image:0", "app")
			return DeploySpec{RunID: r, Network: NetworkPublished, Data: DataVolume, Services: []Service{s}}
		}, []string{"never pulls", "docker build -t ctrperf-enginetest-no-such-image:0", "docker load"}},
		{"service dies before ready: its output is in the error", func(r string) DeploySpec {
			return DeploySpec{RunID: r, Network: NetworkPublishedExternal, Data: DataBind, Services: []Service{failing, tinyService(img, "db")}}
		}, []string{"exited with status 3", "missing config"}},
		{"unknown data placement", func(r string) DeploySpec {
			return DeploySpec{RunID: r, Network: NetworkPublished, Data: "nfs", Services: []Service{tinyService(img, "app")}}
		}, []string{`unknown data placement "nfs"`}},
		{"template naming an unknown service", func(r string) DeploySpec {
			s := tinyService(img, "app")
			s.Env = map[string]string{"UPSTREAM": "{{addr:cache:11211}}"}
			return DeploySpec{RunID: r, Network: NetworkContainerIP, Data: DataVolume, Services: []Service{s, tinyService(img, "db")}}
		}, []string{`unknown service "cache"`}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel() // runs of their own; nothing here counts another's
			runID := newRunID(t)
			tg, err := d.Deploy(context.Background(), tc.spec(runID))
			if err == nil {
				d.Teardown(context.Background(), tg)
				t.Fatal("Deploy succeeded, want an error")
			}
			if tg != nil {
				t.Error("failed Deploy returned a target")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			assertNothingLeft(t, cli, runID)
		})
	}
}

func TestRunIDInUseDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	runID := newRunID(t)
	spec := DeploySpec{RunID: runID, Network: NetworkContainerIP, Data: DataLayer, Services: []Service{tinyService(img, "app")}}
	tg := deploy(t, d, spec)
	if _, err := d.Deploy(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("second deploy under the same run id: %v, want refused", err)
	}
	if got := httpGet(t, tg, tg.Endpoints[0].Addr, "/"); got != "ok app" {
		t.Errorf("the first deployment was disturbed: %q", got)
	}
}

func TestCleanAfterAbandonedRunDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	runID := newRunID(t)
	ctx := context.Background()
	_, err := d.Deploy(ctx, DeploySpec{RunID: runID, Network: NetworkPublishedExternal, Data: DataBind,
		Services: []Service{tinyService(img, "app"), tinyService(img, "db")}})
	if err != nil {
		t.Fatal(err)
	}
	// Should a check below fail, the abandoned run must not outlive the
	// test: a later package's clean would remove it and its iptables rules
	// under that package's own checks.
	t.Cleanup(func() { _, _ = Clean(context.Background(), cli, runID) })
	if len(leftovers(t, cli, runID)) == 0 {
		t.Fatal("deployed run shows no objects: the leftovers check is blind")
	}
	dry, err := Clean(ctx, cli, runID, CleanDryRun())
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) < 6 || len(leftovers(t, cli, runID)) == 0 {
		t.Fatalf("dry run listed %v and must remove nothing", dry)
	}
	removed, err := Clean(ctx, cli, runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != len(dry) {
		t.Errorf("removed %v, dry run said %v", removed, dry)
	}
	assertNothingLeft(t, cli, runID)
}

func TestHostRuntimeRoot(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	testenv.RequireRoot(t, "cgroups, mounts")
	bin := tinyBinary(t)
	h := NewBareMetal()
	runID := newRunID(t)
	front := Service{Name: "front", HostCommand: []string{bin, "serve", "127.0.0.1:{{port:front:8080}}", runID}, Ports: []int{8080},
		Env: map[string]string{"UPSTREAM": "{{addr:db:8080}}"}, DataDir: "/data",
		Resources: Resources{CPUSet: "1", CPUShares: 256},
		Ready:     &ReadyCheck{Port: 8080, HTTPPath: "/", Timeout: 20 * time.Second}}
	db := Service{Name: "db", HostCommand: []string{bin, "serve", "127.0.0.1:{{port:db:8080}}", "db"}, Ports: []int{8080},
		Ready: &ReadyCheck{Port: 8080, Timeout: 20 * time.Second}}
	tg := deploy(t, h, DeploySpec{RunID: runID, Network: NetworkHost, Data: DataTmpfs, Services: []Service{front, db}})

	ep, err := tg.Endpoint("front", 8080)
	if err != nil {
		t.Fatal(err)
	}
	if got := httpGet(t, tg, ep.Addr, "/"); got != "ok "+runID {
		t.Errorf("GET / = %q", got)
	}
	if got := httpGet(t, tg, ep.Addr, "/upstream"); got != "ok db" {
		t.Errorf("front's view of db = %q, want ok db", got)
	}
	c := tg.Containers[1]
	if c.Service != "front" || c.PID <= 0 || c.CgroupPath != "/ctrperf/"+runID+"/front" {
		t.Fatalf("front = %+v", c)
	}
	cg, err := CgroupPath(kernel.DefaultFS(), c.PID)
	if err != nil || cg != c.CgroupPath {
		t.Errorf("process is in cgroup %q (%v), target says %q", cg, err, c.CgroupPath)
	}
	if got := readTrim(t, filepath.Join(DefaultCgroupRoot, "cpuset", c.CgroupPath, "cpuset.cpus")); got != "1" {
		t.Errorf("cpuset.cpus = %q, want 1", got)
	}
	if got := readTrim(t, filepath.Join(DefaultCgroupRoot, "cpu", c.CgroupPath, "cpu.shares")); got != "256" {
		t.Errorf("cpu.shares = %q, want 256", got)
	}
	dataDir := filepath.Join(DefaultHostDataRoot, runID, "front")
	if !isMountPoint(kernel.DefaultFS(), dataDir) {
		t.Errorf("tmpfs placement: %s is not a mount point", dataDir)
	}
	// Nothing a service leaves in its tmpfs is a setuid program or device
	// for anyone else, nor reachable by other users.
	if opts, ok := hasMountOptions(t, dataDir, "nosuid", "nodev"); !ok {
		t.Errorf("tmpfs %s mounted with %q, want nosuid and nodev", dataDir, opts)
	}
	if fi, err := os.Stat(filepath.Dir(dataDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run data directory %s: %v %v, want mode 0700", filepath.Dir(dataDir), fi.Mode(), err)
	}
	res, err := h.Exec(context.Background(), tg, "front", []string{"/bin/cat", "/proc/self/cgroup"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), ":/ctrperf/"+runID+"/front") {
		t.Errorf("exec ran outside the service cgroup: %q %q %v", res.Stdout, res.Stderr, err)
	}
	res, err = h.Exec(context.Background(), tg, "front", []string{"/bin/sh", "-c", "exit 7"})
	if err != nil || res.ExitCode != 7 {
		t.Errorf("exec exit code = %d, %v; want 7", res.ExitCode, err)
	}
	if err := h.Teardown(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	if err := syscallKill0(c.PID); err == nil && !isZombie(kernel.DefaultFS(), c.PID) {
		t.Errorf("process %d survived teardown", c.PID)
	}
	assertNothingLeft(t, nil, runID)
}

func TestHostRuntimeBadInputRoot(t *testing.T) {
	testenv.RequireRoot(t, "cgroups, mounts")
	bin := tinyBinary(t)
	h := NewBareMetal()
	busy, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	tests := []struct {
		desc    string
		spec    func(r string) DeploySpec
		wantErr string
	}{
		{"literal port already in use", func(r string) DeploySpec {
			return DeploySpec{RunID: r, Network: NetworkHost, Data: DataLayer, Services: []Service{
				{Name: "app", HostCommand: []string{bin, "serve", fmt.Sprintf(":%d", port)}, Ports: []int{port}}}}
		}, fmt.Sprintf("port %d of service \"app\" is already in use", port)},
		{"container-ip with the host runtime", func(r string) DeploySpec {
			return DeploySpec{RunID: r, Network: NetworkContainerIP, Data: DataLayer, Services: []Service{
				{Name: "app", HostCommand: []string{bin}, Ports: []int{80}}}}
		}, `network "container-ip" needs containers`},
		{"process that dies: its output in the error", func(r string) DeploySpec {
			return DeploySpec{RunID: r, Network: NetworkHost, Data: DataBind, Services: []Service{
				{Name: "app", HostCommand: []string{bin, "fail", "no config for " + r}, Ports: []int{8080}, Ready: &ReadyCheck{Port: 8080, Timeout: 10 * time.Second}}}}
		}, "no config for"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			runID := newRunID(t)
			tg, err := h.Deploy(context.Background(), tc.spec(runID))
			if err == nil {
				h.Teardown(context.Background(), tg)
				t.Fatal("Deploy succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want it to contain %q", err, tc.wantErr)
			}
			assertNothingLeft(t, nil, runID)
		})
	}
}

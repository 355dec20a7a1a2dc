package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/testenv"
)

// startPodman starts a podman service for session and the image ref in
// its store (copied from the user's engine, as bench does), both gone when
// the test ends.
func startPodman(t *testing.T, session string) (*Daemon, *Daemon, string) {
	t.Helper()
	testenv.Podman(t)
	def, err := Probe(context.Background(), 5*time.Second)
	if err != nil {
		testenv.SkipOrFail(t, "no Docker engine answers (the images are built there): %v", err)
	}
	t.Cleanup(func() { def.Close(context.Background()) })
	img := testenv.TinyHTTPImage(t, def.Client())
	pd, err := StartPodman(context.Background(), session)
	if err != nil {
		t.Fatalf("StartPodman: %v", err)
	}
	t.Cleanup(func() {
		pd.Client().ImageRemove(context.Background(), img, client.ImageRemoveOptions{Force: true})
		if err := pd.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	start := time.Now()
	if err := CopyImages(context.Background(), def, pd, img); err != nil {
		t.Fatalf("CopyImages into podman: %v", err)
	}
	t.Logf("docker save | podman load of %s: %v", img, time.Since(start).Round(time.Millisecond))
	return def, pd, img
}

// podmanEngine is the Docker engine on a podman service, as bench opens it.
func podmanEngine(t *testing.T, pd *Daemon) *engine.Docker {
	t.Helper()
	info, err := pd.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Runtime != string(engine.RuntimePodman) || !strings.HasPrefix(info.Version, "4.") || info.UserlandProxy == nil || *info.UserlandProxy || !info.Private {
		t.Errorf("Info = %+v, want runtime podman 4.x, private, no userland proxy", info)
	}
	return engine.NewDocker(pd.Client(), engine.WithRuntime(engine.Runtime(info.Runtime)), engine.WithEngineName(pd.Name()),
		engine.WithUserlandProxy(*info.UserlandProxy), engine.WithAcceptForwarded())
}

func tinyService(img string) engine.Service {
	return engine.Service{Name: "app", Image: img, Command: []string{"serve", ":{{port:app:8080}}", "app"}, Ports: []int{8080},
		DataDir: "/data", Ready: &engine.ReadyCheck{Port: 8080, HTTPPath: "/", Timeout: 30 * time.Second}}
}

func get(t *testing.T, tg *engine.Target, addr string) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: tg.Dialer(), DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// podmanLeftovers are the objects on the service labelled with runID, and
// the run's bind directory.
func podmanLeftovers(t *testing.T, cli client.APIClient, runID string) []string {
	t.Helper()
	ctx := context.Background()
	f := client.Filters{}.Add("label", engine.LabelRun+"="+runID)
	var left []string
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		left = append(left, "container "+strings.Join(c.Names, ","))
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
	if _, err := os.Lstat(filepath.Join(engine.DefaultBindRoot, runID)); err == nil {
		left = append(left, "bind directory of "+runID)
	}
	return left
}

// TestPodmanRuntimeDocker: runtime podman on a real podman service of
// ctrperf's own: the image copied from Docker into podman's store, every
// network (published through netavark's DNAT, not a proxy, from this
// machine and from a client namespace; the container IP; the host's) and data placement (layer, volume, bind, tmpfs) deployed
// and reached through the Docker engine on the service's socket, each
// container with its pid and cgroup, each run torn down to nothing, and
// the service, its socket and its state gone after Close.
func TestPodmanRuntimeDocker(t *testing.T) {
	session := "podmantest-" + testRunID(t)
	_, pd, img := startPodman(t, session)
	e := podmanEngine(t, pd)
	ps := *pd.podman
	if ps.Socket != filepath.Join("/run/ctrperf", "podman-"+session+".sock") || !ownedPID(kernel.DefaultFS(), ps.PID, ps.Socket) {
		t.Errorf("service %+v: want pid serving /run/ctrperf/podman-%s.sock", ps, session)
	}
	deploy := func(t *testing.T, net engine.NetworkMode, data engine.DataPlacement) *engine.Target {
		t.Helper()
		runID := session + "-" + testRunID(t)
		tg, err := e.Deploy(context.Background(), engine.DeploySpec{RunID: runID, Network: net, Data: data, Services: []engine.Service{tinyService(img)}})
		if err != nil {
			t.Fatalf("Deploy: %v", err)
		}
		t.Cleanup(func() {
			if err := e.Teardown(context.Background(), tg); err != nil {
				t.Errorf("Teardown: %v", err)
			}
			if left := podmanLeftovers(t, pd.Client(), runID); len(left) > 0 {
				t.Errorf("run %s left behind: %v", runID, left)
			}
		})
		c := tg.Containers[0]
		if tg.Runtime != engine.RuntimePodman || c.PID <= 0 || !strings.Contains(c.CgroupPath, c.ID) {
			t.Errorf("target runtime %s, container %+v: want podman, a pid and a cgroup naming the id", tg.Runtime, c)
		}
		if _, err := os.Stat(kernel.DefaultFS().Cgroup("memory", c.CgroupPath)); err != nil {
			t.Errorf("the container's memory cgroup: %v", err)
		}
		return tg
	}
	for _, tc := range []struct {
		net   engine.NetworkMode
		check func(t *testing.T, tg *engine.Target, ep engine.Endpoint)
	}{
		{engine.NetworkPublished, func(t *testing.T, tg *engine.Target, ep engine.Endpoint) {
			host, port, _ := net.SplitHostPort(ep.Addr)
			if host != "127.0.0.1" || port == "8080" {
				t.Errorf("endpoint %s, want 127.0.0.1 on a port podman chose", ep.Addr)
			}
			out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
			if err != nil {
				t.Fatal(err)
			}
			dnat := regexp.MustCompile(`-d 127\.0\.0\.1/32 -p tcp -m tcp --dport ` + port + ` -j DNAT --to-destination ` + regexp.QuoteMeta(tg.Containers[0].IP) + `:8080`)
			if !dnat.Match(out) {
				t.Errorf("no netavark DNAT of 127.0.0.1:%s to %s:8080 in the nat table:\n%s", port, tg.Containers[0].IP, out)
			}
		}},
		{engine.NetworkPublishedExternal, func(t *testing.T, tg *engine.Target, ep engine.Endpoint) {
			// Dialled from the client namespace (get uses the target's
			// dialer): netavark's DNAT in PREROUTING.
			if host, _, _ := net.SplitHostPort(ep.Addr); !strings.HasPrefix(host, "198.1") || tg.Netns == "" {
				t.Errorf("endpoint %s, netns %q: want the host side of a 198.18.0.0/15 veth", ep.Addr, tg.Netns)
			}
		}},
		{engine.NetworkContainerIP, func(t *testing.T, tg *engine.Target, ep engine.Endpoint) {
			if want := net.JoinHostPort(tg.Containers[0].IP, "8080"); ep.Addr != want {
				t.Errorf("endpoint %s, want %s", ep.Addr, want)
			}
		}},
		{engine.NetworkHost, func(t *testing.T, tg *engine.Target, ep engine.Endpoint) {
			if host, port, _ := net.SplitHostPort(ep.Addr); host != "127.0.0.1" || port == "8080" || tg.Containers[0].IP != "" {
				t.Errorf("endpoint %s, IP %q: want 127.0.0.1 on an allocated port, no IP", ep.Addr, tg.Containers[0].IP)
			}
		}},
	} {
		t.Run("network "+string(tc.net), func(t *testing.T) {
			tg := deploy(t, tc.net, engine.DataLayer)
			ep, err := tg.Endpoint("app", 8080)
			if err != nil {
				t.Fatal(err)
			}
			if got := get(t, tg, ep.Addr); got != "ok app" {
				t.Errorf("GET / = %q, want ok app", got)
			}
			tc.check(t, tg, ep)
		})
	}
	for _, data := range []engine.DataPlacement{engine.DataLayer, engine.DataVolume, engine.DataBind, engine.DataTmpfs} {
		t.Run("data "+string(data), func(t *testing.T) {
			tg := deploy(t, engine.NetworkContainerIP, data)
			ctx := context.Background()
			if res, err := e.Exec(ctx, tg, "app", []string{"/tinyhttp", "write", "/data/probe", tg.RunID}); err != nil || res.ExitCode != 0 {
				t.Fatalf("exec write: %+v %v", res, err)
			}
			if res, err := e.Exec(ctx, tg, "app", []string{"/tinyhttp", "cat", "/data/probe"}); err != nil || string(res.Stdout) != tg.RunID {
				t.Fatalf("exec cat = %q (%+v), %v", res.Stdout, res, err)
			}
			in, err := pd.Client().ContainerInspect(ctx, tg.Containers[0].ID, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var hostFile string
			switch m := in.Container.Mounts; data {
			case engine.DataVolume:
				if len(m) != 1 || m[0].Type != "volume" || m[0].Name != engine.ObjectName(tg.RunID, "app") {
					t.Fatalf("mounts %+v, want the run's volume", m)
				}
				hostFile = filepath.Join(m[0].Source, "probe")
			case engine.DataBind:
				hostFile = filepath.Join(engine.DefaultBindRoot, tg.RunID, "app", "probe")
			case engine.DataTmpfs:
				mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", tg.Containers[0].PID))
				if err != nil {
					t.Fatal(err)
				}
				if !regexp.MustCompile(`(?m) /data [^\n]* - tmpfs `).Match(mi) {
					t.Errorf("no tmpfs at /data in the container's mountinfo:\n%s", mi)
				}
			}
			if hostFile != "" {
				if b, err := os.ReadFile(hostFile); err != nil || string(b) != tg.RunID {
					t.Errorf("the data on the host at %s = %q, %v", hostFile, b, err)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	pd.Client().ImageRemove(context.Background(), img, client.ImageRemoveOptions{Force: true})
	if err := pd.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if procAlive(kernel.DefaultFS(), ps.PID) {
		t.Errorf("service pid %d still runs after Close", ps.PID)
	}
	for _, p := range []string{ps.Socket, filepath.Dir(ps.Config)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Close", p)
		}
	}
}

package engine_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
)

// dockerProxyFor reports whether a docker-proxy process serves host port port.
func dockerProxyFor(port string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != "docker-proxy" {
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

// TestPublishedNoUserlandProxyDocker: on a private engine started with
// --userland-proxy=false, a published port has no docker-proxy and still
// serves 127.0.0.1 (hairpin NAT), and from the client namespace (DNAT).
func TestPublishedNoUserlandProxyDocker(t *testing.T) {
	cli := engine.DockerClientForTest(t)
	img := engine.TinyImageForTest(t, cli)
	ctx := context.Background()
	runID := engine.NewRunIDForTest(t)
	user, err := daemon.Probe(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("user's engine: %v", err)
	}
	defer user.Client().Close()
	off := false
	priv, err := daemon.Start(ctx, engine.EngineSpec{UserlandProxy: &off}, runID)
	if err != nil {
		t.Fatalf("private engine without userland proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := priv.Close(context.Background()); err != nil {
			t.Errorf("close private engine: %v", err)
		}
		if _, err := daemon.CleanAll(context.Background(), runID); err != nil {
			t.Errorf("daemon.CleanAll: %v", err)
		}
	})
	if err := daemon.CopyImages(ctx, user, priv, img); err != nil {
		t.Fatal(err)
	}
	d := engine.NewDocker(priv.Client(), engine.WithEngineName(priv.Name()), engine.WithUserlandProxy(false))
	info, err := d.Info(ctx)
	if err != nil || info.UserlandProxy == nil || *info.UserlandProxy {
		t.Errorf("Info = %+v, %v; want userland proxy off", info, err)
	}
	for _, mode := range []engine.NetworkMode{engine.NetworkPublished, engine.NetworkPublishedExternal} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel() // runs of their own on the private engine, closed after both
			id := runID + string(mode[len(mode)-1])
			tg, err := d.Deploy(ctx, engine.DeploySpec{RunID: id, Network: mode, Data: engine.DataLayer,
				Services: []engine.Service{engine.TinyServiceForTest(img, "app")}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Teardown(ctx, tg); err != nil {
					t.Errorf("Teardown: %v", err)
				}
				if left := engine.LeftoversForTest(t, priv.Client(), id); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			}()
			ep, err := tg.Endpoint("app", 8080)
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(ep.Addr)
			if dockerProxyFor(port) {
				t.Errorf("docker-proxy serves port %s with the userland proxy off", port)
			}
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: tg.Dialer(), DisableKeepAlives: true}}
			resp, err := hc.Get("http://" + ep.Addr + "/")
			if err != nil {
				t.Fatalf("GET %s without proxy: %v", ep.Addr, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.TrimSpace(string(b)) != "ok app" {
				t.Errorf("GET / = %q", b)
			}
		})
	}
}

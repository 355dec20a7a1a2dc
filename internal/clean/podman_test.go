package clean

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
	"ctrperf/internal/testenv"
)

// TestCleanKilledPodmanDocker: a live session's podman service and runs
// are kept; a session of runtime podman killed with its
// run deployed (ctrperf SIGKILLed, its podman service left running; or the
// service killed too, its container left under conmon) leaves a service
// and a container that `ctrperf clean --run SESSION` removes — the service
// by its recorded pid and socket, started again when it died — while a
// user's container in podman's store, made by hand from one of ctrperf's
// images (so it carries ctrperf.managed), is never touched. A run whose
// service and its record are gone is found in podman's store.
func TestCleanKilledPodmanDocker(t *testing.T) {
	testenv.Podman(t)
	def, err := daemon.Probe(context.Background(), 5*time.Second)
	if err != nil {
		testenv.SkipOrFail(t, "no Docker engine answers (the images are built there): %v", err)
	}
	t.Cleanup(func() { def.Close(context.Background()) })
	img := testenv.TinyHTTPImage(t, def.Client())
	for _, tc := range []struct {
		desc          string
		killService   bool
		forgetService bool // its state gone too: only podman's store knows the run
	}{
		{"the service outlived its session", false, false},
		{"the service was killed too", true, false},
		{"the service and its state are gone", true, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			b := make([]byte, 4)
			rand.Read(b)
			session := "podmanclean-" + hex.EncodeToString(b)
			pd, err := daemon.StartPodman(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			if err := daemon.CopyImages(ctx, def, pd, img); err != nil {
				t.Fatal(err)
			}
			cli := pd.Client()
			e := engine.NewDocker(cli, engine.WithRuntime(engine.RuntimePodman), engine.WithEngineName(pd.Name()))
			svc := engine.Service{Name: "app", Image: img, Command: []string{"serve", ":8080", "app"}, Ports: []int{8080},
				Ready: &engine.ReadyCheck{Port: 8080, HTTPPath: "/", Timeout: 30 * time.Second}}
			run := session + "-001"
			if _, err := e.Deploy(ctx, engine.DeploySpec{RunID: run, Network: engine.NetworkContainerIP, Data: engine.DataLayer, Services: []engine.Service{svc}}); err != nil {
				t.Fatal(err)
			}
			user := "podmantest-user-" + hex.EncodeToString(b)
			uc, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: user, Config: &container.Config{Image: img, Cmd: []string{"serve", ":8081", "user"}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeByHand(t, session+"-check", uc.ID, img) })
			if _, err := cli.ContainerStart(ctx, uc.ID, client.ContainerStartOptions{}); err != nil {
				t.Fatal(err)
			}
			listed, err := daemon.ListPodman()
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(listed, func(l daemon.ListedPodman) bool { return l.RunID == session })
			if i < 0 || !listed[i].Alive {
				t.Fatalf("service of %s not listed alive: %+v", session, listed)
			}
			svcState := listed[i].PodmanService
			// While the session lives, its service and runs are kept.
			live := owner.Owners{{Record: owner.Record{Kind: "bench", Session: session, PID: os.Getpid()}, Live: true}}
			kept, err := Sweep(ctx, Options{RunID: session, Owners: engine.NewOwnership(live, false)})
			if err != nil || slices.ContainsFunc(kept, func(r string) bool { return strings.Contains(r, session) }) {
				t.Errorf("Sweep with the session live removed %v, %v", kept, err)
			}
			if err := pd.Ping(ctx, 3*time.Second); err != nil {
				t.Errorf("the live session's service: %v", err)
			}
			// The session dies without closing anything: its engine is
			// dropped (never Close), and the service is killed or not.
			if tc.killService {
				if err := syscall.Kill(svcState.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			if tc.forgetService {
				if err := os.RemoveAll(filepath.Dir(svcState.Config)); err != nil {
					t.Fatal(err)
				}
				os.Remove(svcState.Socket)
			}

			removed, err := Sweep(ctx, Options{RunID: session, Owners: engine.NewOwnership(owner.Owners{}, false)})
			if err != nil {
				t.Errorf("Sweep: %v", err)
			}
			got := strings.Join(removed, "\n")
			wants := []string{"container " + engine.ObjectName(run, "app"), "network " + engine.NetworkName(run)}
			if !tc.forgetService {
				wants = append(wants, "stopped podman service")
			}
			for _, want := range wants {
				if !strings.Contains(got, want) {
					t.Errorf("removed:\n%s\nwant %q", got, want)
				}
			}
			if strings.Contains(got, user) {
				t.Errorf("the user's container was removed:\n%s", got)
			}
			for _, pid := range pidsWith(svcState.Socket) {
				t.Errorf("process %d of the service's socket still runs", pid)
			}
			if _, err := os.Stat(svcState.Socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket %s still there", svcState.Socket)
			}
			if l, _ := daemon.ListPodman(); slices.ContainsFunc(l, func(l daemon.ListedPodman) bool { return l.RunID == session }) {
				t.Errorf("service of %s still recorded", session)
			}

			// What podman's store holds now, through a service of its own.
			check, err := daemon.StartPodman(ctx, session+"-check")
			if err != nil {
				t.Fatal(err)
			}
			defer check.Close(ctx)
			cs, err := check.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", engine.LabelRun+"="+run)})
			if err != nil || len(cs.Items) != 0 {
				t.Errorf("containers of run %s left: %+v, %v", run, cs.Items, err)
			}
			in, err := check.Client().ContainerInspect(ctx, uc.ID, client.ContainerInspectOptions{})
			if err != nil || in.Container.State == nil || !in.Container.State.Running {
				t.Errorf("the user's container %s: %+v, %v; want it running", user, in.Container.State, err)
			}
		})
	}
}

// removeByHand removes the user's container of the test, and the test's
// image, from podman's store through a podman service of the test's own.
func removeByHand(t *testing.T, session, id, img string) {
	ctx := context.Background()
	d, err := daemon.StartPodman(ctx, session)
	if err != nil {
		t.Errorf("remove the user's container: %v", err)
		return
	}
	defer d.Close(ctx)
	if _, err := d.Client().ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Errorf("remove the user's container: %v", err)
	}
	d.Client().ImageRemove(ctx, img, client.ImageRemoveOptions{Force: true})
}

// pidsWith are the live processes whose command line names mark.
func pidsWith(mark string) []int {
	fs := kernel.DefaultFS()
	pids, _ := fs.PIDs()
	var out []int
	for _, pid := range pids {
		if argv, err := fs.Cmdline(pid); err == nil && strings.Contains(strings.Join(argv, " "), mark) {
			out = append(out, pid)
		}
	}
	return out
}

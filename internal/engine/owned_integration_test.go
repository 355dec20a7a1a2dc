package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ctrperf/internal/owner"
)

// TestCleanLeavesUsersContainerDocker is issue 24's case: a user runs a
// container of their own from one of ctrperf's images (which carry
// ctrperf.managed, as ctrperf/debian-base does), and `ctrperf clean`
// must leave it alone while it still removes an orphaned run of
// ctrperf's on the same image.
func TestCleanLeavesUsersContainerDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if in, err := cli.ImageInspect(ctx, img); err != nil || in.Config == nil || in.Config.Labels[LabelManaged] != "true" {
		t.Fatalf("image %s must carry %s=true like ctrperf's own (%v)", img, LabelManaged, err)
	}

	runID := newRunID(t)
	userName := "user-own-" + strings.TrimPrefix(runID, "enginetest-")
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: userName,
		Config:     &container.Config{Image: img, Cmd: []string{"serve", "127.0.0.1:0", "user"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	if in, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err != nil || in.Container.Config.Labels[LabelManaged] != "true" {
		t.Fatalf("the user's container did not inherit %s from the image (%v): the test shows nothing", LabelManaged, err)
	}

	// An orphaned run of ctrperf's on the same image: no owner record.
	d := NewDocker(cli)
	if _, err := d.Deploy(ctx, DeploySpec{RunID: runID, Network: NetworkContainerIP, Data: DataBind,
		Services: []Service{tinyService(img, "app")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Clean(context.Background(), cli, runID) })

	// As `ctrperf clean` does: every run, live owners' objects kept. The
	// tests of other packages run beside this one and deploy without owner
	// records, so every other run on the engine counts as live here (read
	// again at each decision): the sweep still looks at every container of
	// ctrperf's images, the user's among them, and removes only this run's.
	owners, err := owner.Dir{}.List()
	if err != nil {
		t.Fatal(err)
	}
	own := NewOwnership(owners, false).Refreshing(func() (owner.Owners, error) {
		return othersLive(ctx, cli, owners, runID)
	})
	removed, err := cleanDocker(ctx, cli, "", false, own)
	if err != nil {
		t.Fatalf("clean: %v (removed %q)", err, removed)
	}
	t.Logf("clean removed %q", removed)
	for _, o := range own.Found() {
		if strings.Contains(o.What, userName) {
			t.Errorf("clean took the user's container for ctrperf's: %+v", o)
		}
	}
	if !slices.Contains(removed, "container "+ObjectName(runID, "app")) {
		t.Errorf("clean did not remove the orphaned run's container %s", ObjectName(runID, "app"))
	}
	in, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil || in.Container.State == nil || !in.Container.State.Running {
		t.Fatalf("the user's container %s did not survive clean: %v", userName, err)
	}
	if _, err := Clean(ctx, cli, runID); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, cli, runID)
}

// TestBindDirectoryModesDocker: a bind directory is writable by a
// container running as nobody, while its run directory is closed to every
// other local user.
func TestBindDirectoryModesDocker(t *testing.T) {
	t.Parallel() // a run of its own (see the note on parallel tests above dockerClient)
	cli := dockerClient(t)
	img := tinyImage(t, cli)
	d := NewDocker(cli)
	runID := newRunID(t)
	svc := tinyService(img, "app")
	svc.User = "65534:65534"
	tg := deploy(t, d, DeploySpec{RunID: runID, Network: NetworkContainerIP, Data: DataBind, Services: []Service{svc}})
	res, err := d.Exec(context.Background(), tg, "app", []string{"/tinyhttp", "write", "/data/probe", runID})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("nobody cannot write its bind directory: %+v %v", res, err)
	}
	for p, want := range map[string]os.FileMode{
		DefaultBindRoot:                              0o700,
		filepath.Join(DefaultBindRoot, runID):        0o700,
		filepath.Join(DefaultBindRoot, runID, "app"): 0o777,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", p, got, want)
		}
	}
	if err := d.Teardown(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, cli, runID)
}

// othersLive is owners plus a live owner (this test process) of every run
// id other than runID that labels a container, network or volume of
// ctrperf's on the engine now.
func othersLive(ctx context.Context, cli client.APIClient, owners owner.Owners, runID string) (owner.Owners, error) {
	f := client.Filters{}.Add("label", LabelManaged+"=true")
	ids := map[string]bool{}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Items {
		ids[c.Labels[LabelRun]] = true
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		ids[n.Labels[LabelRun]] = true
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, v := range vs.Items {
		ids[v.Labels[LabelRun]] = true
	}
	delete(ids, runID)
	delete(ids, "")
	rec := owner.Record{Kind: "test", PID: os.Getpid(), Command: os.Args[:1], Started: time.Now()}
	for id := range ids {
		rec.Objects = append(rec.Objects, id)
	}
	return append(slices.Clone(owners), owner.Status{Record: rec, Live: true, Reason: "another test's run"}), nil
}

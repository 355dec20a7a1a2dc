package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ctrperf/internal/testenv"
)

// testRunID names and labels what one test creates, so that its cleanup
// touches nothing of other tests running on the same engine.
func testRunID(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return "imgtest-" + hex.EncodeToString(b)
}

func runLabels(runID string) map[string]string {
	return map[string]string{LabelManaged: "true", "ctrperf.run": runID}
}

// removeImageAtEnd removes ref when the test ends.
func removeImageAtEnd(t *testing.T, cli *client.Client, ref string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Logf("remove %s: %v", ref, err)
		}
	})
}

// runContainer runs argv (nil: the image's own command) in a container of
// ref and returns its output and exit code; the container is removed.
func runContainer(t *testing.T, cli *client.Client, runID, ref string, argv []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("ctrperf-%s-%d", runID, time.Now().UnixNano()%1e6)
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: ref, Cmd: argv, Labels: runLabels(runID)},
		HostConfig: &container.HostConfig{NetworkMode: "none"}, Name: name})
	if err != nil {
		t.Fatalf("create container of %s: %v", ref, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		if _, err := cli.ContainerRemove(rctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container %s: %v", name, err)
		}
	}()
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	waitC, errC := wait.Result, wait.Error
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container of %s: %v", ref, err)
	}
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
	case err := <-errC:
		t.Fatalf("wait for container of %s: %v", ref, err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return out.String(), code
}

// TestBuildGoAndDerivedDocker builds a tiny Go program into a FROM-scratch
// image, checks that an unchanged program is not rebuilt, runs it, then
// derives an image adding a file and runs that.
func TestBuildGoAndDerivedDocker(t *testing.T) {
	t.Parallel() // its own run id, images and cache dir; no timing check (issue 25)
	cli := testenv.Docker(t)
	runID := testRunID(t)
	ctx := context.Background()
	g := GoImage{Name: "hello", Ref: "ctrperf-test/hello-" + runID + ":latest", Package: "./internal/image/testdata/hello", Args: []string{"one", "two"}}
	removeImageAtEnd(t, cli, g.Ref)
	var progress bytes.Buffer
	first, err := BuildGo(ctx, cli, g, WithLabels(runLabels(runID)), WithProgress(&progress))
	if err != nil {
		t.Fatalf("BuildGo: %v\n%s", err, progress.String())
	}
	if first.Action != ActionBuilt || first.Hash == "" || first.ID == "" {
		t.Errorf("first build: %+v", first)
	}
	again, err := BuildGo(ctx, cli, g, WithLabels(runLabels(runID)))
	if err != nil {
		t.Fatal(err)
	}
	if again.Action != ActionCached || again.ID != first.ID || again.Hash != first.Hash {
		t.Errorf("unchanged program: %+v, want cached %s", again, first.ID)
	}
	img, err := cli.ImageInspect(ctx, g.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if l := img.Config.Labels; l[LabelManaged] != "true" || l[LabelRecipe] != first.Hash || l[LabelName] != "hello" || l["ctrperf.run"] != runID {
		t.Errorf("labels %v", l)
	}
	if n := len(img.RootFS.Layers); n != 1 {
		t.Errorf("FROM-scratch image has %d layers, want 1 (the binary)", n)
	}
	if out, code := runContainer(t, cli, runID, g.Ref, nil); code != 0 || !strings.Contains(out, "hello from scratch: one two") {
		t.Errorf("run %s: exit %d, output %q", g.Ref, code, out)
	}

	d := Derived{Name: "hello-greeting", Ref: "ctrperf-test/hello-greeting-" + runID + ":latest", From: g.Ref,
		Files: map[string]File{"/etc/greeting": {Data: []byte("bonjour\n")}},
		Cmd:   []string{"-file", "/etc/greeting", "derived"}}
	removeImageAtEnd(t, cli, d.Ref) // runs before the parent's removal
	res, err := BuildFrom(ctx, cli, d, WithLabels(runLabels(runID)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != ActionBuilt {
		t.Errorf("derived: %+v", res)
	}
	out, code := runContainer(t, cli, runID, d.Ref, nil)
	if code != 0 || !strings.Contains(out, "hello from scratch: derived") || !strings.Contains(out, "file: bonjour") {
		t.Errorf("run %s: exit %d, output %q", d.Ref, code, out)
	}

	// A new recipe under the same ref: the image it displaces goes with it.
	d.Files["/etc/greeting"] = File{Data: []byte("hola\n")}
	var rebuild bytes.Buffer
	res2, err := BuildFrom(ctx, cli, d, WithLabels(runLabels(runID)), WithProgress(&rebuild))
	if err != nil {
		t.Fatal(err)
	}
	if res2.Action != ActionBuilt || res2.ID == res.ID {
		t.Fatalf("rebuild with another file: %+v, want a new image", res2)
	}
	if _, err := cli.ImageInspect(ctx, res.ID); err == nil {
		t.Errorf("the replaced image %s is still on the engine after the rebuild; progress %q", res.ID, rebuild.String())
	}
}

// TestDebianBaseDocker makes the Debian base image exist (debootstrap the
// first time on a machine, about two minutes; then cached by its recipe hash)
// and checks the tools the workloads need are in it. When the rootfs tarball
// is cached it also imports it under a test tag, the path a private engine
// takes.
func TestDebianBaseDocker(t *testing.T) {
	t.Parallel() // its own run id, images and cache dir; no timing check (issue 25)
	cli := testenv.Docker(t)
	runID := testRunID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	reg := Default()
	reg.SetProgress(testWriter{t})
	res, err := reg.Ensure(ctx, cli, []string{DebianBase.Name})
	if err != nil {
		t.Fatal(err)
	}
	ref := res[0].Ref
	t.Logf("%s: %s (%s)", ref, res[0].Action, res[0].ID)
	script := `for b in fio sysbench stress-ng bonnie++ nproc memcached mariadbd mariadb-install-db ip ps; do command -v $b >/dev/null || echo "missing $b"; done; mariadbd --version`
	out, code := runContainer(t, cli, runID, ref, []string{"sh", "-c", script})
	if code != 0 || strings.Contains(out, "missing") || !strings.Contains(out, "MariaDB") {
		t.Errorf("tools in %s: exit %d, output %q", ref, code, out)
	}

	if res[0].Action == ActionExternal {
		return
	}
	tarball := filepath.Join(CacheDir(), DebianBase.Name+"-"+res[0].Hash+".tar")
	if _, err := os.Stat(tarball); err != nil {
		t.Logf("no cached tarball (%v): import path not exercised", err)
		return
	}
	testRef := "ctrperf-test/base-import-" + runID + ":latest"
	removeImageAtEnd(t, cli, testRef)
	start := time.Now()
	id, err := importTarball(ctx, cli, tarball, testRef, imageLabels("base-import", res[0].Hash, runLabels(runID)), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %s as %s in %s", tarball, id, time.Since(start).Round(100*time.Millisecond))
	img, err := cli.ImageInspect(ctx, testRef)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.Labels[LabelRecipe] != res[0].Hash || len(img.Config.Cmd) == 0 {
		t.Errorf("imported image: labels %v, cmd %v", img.Config.Labels, img.Config.Cmd)
	}
	if out, code := runContainer(t, cli, runID, testRef, []string{"fio", "--version"}); code != 0 || !strings.HasPrefix(out, "fio-") {
		t.Errorf("fio in the imported image: exit %d, %q", code, out)
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

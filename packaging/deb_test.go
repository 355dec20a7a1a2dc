// Package packaging holds the files of ctrperf's Debian package (nfpm.yaml,
// the ctrperf-isolate unit, the commented isolate.yaml, maintainer scripts)
// and the test that installs the package in a clean Debian container.
package packaging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/testenv"
	"ctrperf/plans"
)

// installScript runs in the clean container: install, use, remove.
const installScript = `set -eu
dpkg -i /tmp/ctrperf.deb
cd /
ctrperf --version
echo "== doctor"
ctrperf doctor
echo "== plans"
ctrperf plans list
ctrperf bench validate smoke --quick >/dev/null
test -s /usr/share/man/man1/ctrperf-bench-run.1.gz
test -s /usr/share/bash-completion/completions/ctrperf
test -s /usr/share/zsh/vendor-completions/_ctrperf
test -s /usr/share/fish/vendor_completions.d/ctrperf.fish
test -s /usr/share/ctrperf/plans/smoke.yaml
grep -qx 'ExecStopPost=/usr/bin/ctrperf isolate restore --state-dir /run/ctrperf/isolate' /usr/lib/systemd/system/ctrperf-isolate.service
grep -q -- '--config /etc/ctrperf/isolate.yaml' /usr/lib/systemd/system/ctrperf-isolate.service
dpkg-query -W -f='${Conffiles}\n' ctrperf | grep -q /etc/ctrperf/isolate.yaml
dpkg -r ctrperf >/dev/null
test ! -e /usr/bin/ctrperf
test -e /etc/ctrperf/isolate.yaml # a conffile stays until purge
echo CTRPERF-DEB-OK
`

// TestDebInstallsDocker installs the Debian package (`make deb`, or the one
// CTRPERF_DEB names) in a clean container of the local Debian base image
// (never pulled), with no network and no source tree, and runs ctrperf
// doctor, plans list and bench validate of a built-in plan there.
func TestDebInstallsDocker(t *testing.T) {
	cli := testenv.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := image.Resolve(image.DebianBase.Name)
	if _, err := cli.ImageInspect(ctx, base); err != nil {
		testenv.SkipOrFail(t, "image %s is not on the engine (ctrperf images build debian-base): %v", base, err)
	}
	deb := os.Getenv("CTRPERF_DEB")
	if deb == "" {
		deb = makeDeb(t, ctx)
	}

	runID := fmt.Sprintf("debtest-%d", os.Getpid())
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: base, Cmd: []string{"/bin/sh", "-c", installScript},
			Labels: map[string]string{engine.LabelManaged: "true", engine.LabelRun: runID}},
		HostConfig: &container.HostConfig{NetworkMode: "none",
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: deb, Target: "/tmp/ctrperf.deb", ReadOnly: true}}},
		Name: "ctrperf-" + runID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		if _, err := cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container: %v", err)
		}
	})
	start := time.Now()
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int64
	wait := cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	waitC, errC := wait.Result, wait.Error
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		t.Fatalf("wait: %v", err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var logs bytes.Buffer
	if _, err := stdcopy.StdCopy(&logs, &logs, rc); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	t.Logf("%s installed, used and removed in %s", filepath.Base(deb), time.Since(start).Round(time.Millisecond))
	if code != 0 || !strings.Contains(out, "CTRPERF-DEB-OK") {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	doctor := out[strings.Index(out, "== doctor"):strings.Index(out, "== plans")]
	for _, want := range []string{"kernel ", "cgroups ", "docker engine ", "tools "} {
		if !strings.Contains(doctor, want) {
			t.Errorf("ctrperf doctor printed no %q line:\n%s", want, doctor)
		}
	}
	list := out[strings.Index(out, "== plans"):]
	for _, name := range plans.Names() {
		if !strings.Contains(list, "\n"+name+" ") {
			t.Errorf("ctrperf plans list lacks %s:\n%s", name, list)
		}
	}
	if !strings.Contains(out, "ctrperf ") || !strings.Contains(out, "go1.") {
		t.Errorf("no --version line:\n%s", out)
	}
}

// makeDeb runs `make deb` at the repository's root and returns the path
// of the package it printed last.
func makeDeb(t *testing.T, ctx context.Context) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "deb")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("make deb: %v\n%s%s", err, b, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	deb := filepath.Join(root, lines[len(lines)-1])
	if !strings.HasSuffix(deb, ".deb") {
		t.Fatalf("make deb did not end with the package's path:\n%s", b)
	}
	t.Logf("make deb: %s in %s", filepath.Base(deb), time.Since(start).Round(time.Millisecond))
	return deb
}

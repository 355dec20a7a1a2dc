// Package testenv gates the tests that need more than a Go toolchain: a
// Docker engine, root, a tool on PATH. Such a test says so by name (ending
// in Docker or Root) and, when what it needs is missing, skips — or fails
// when CI asks for every integration test to run (CTRPERF_REQUIRE_DOCKER=1;
// CTRPERF_REQUIRE_ROOT=1 for the tests that only need root), so that a
// broken CI machine cannot pass by skipping.
package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/labels"
	"ctrperf/internal/selfbin"
)

// Environment variables that turn a skip into a failure.
const (
	RequireDockerEnv = "CTRPERF_REQUIRE_DOCKER"
	RequireRootEnv   = "CTRPERF_REQUIRE_ROOT"
)

// Required reports whether CI requires every integration test to run.
func Required() bool { return os.Getenv(RequireDockerEnv) == "1" }

// SkipOrFail skips t with the message, or fails it under
// CTRPERF_REQUIRE_DOCKER=1.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// SkipOrFailRoot is SkipOrFail for a test that needs root rather than
// Docker: CTRPERF_REQUIRE_ROOT=1 makes it fail too.
func SkipOrFailRoot(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() || os.Getenv(RequireRootEnv) == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (or fails, see SkipOrFailRoot) unless the test runs as
// root; why says what root is needed for.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFailRoot(t, "needs root (%s)", why)
	}
}

// Docker returns a client of the engine on DOCKER_HOST or the default
// socket, closed when the test ends. Without an engine that answers within
// 5 s the test skips, or fails under CTRPERF_REQUIRE_DOCKER=1.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		SkipOrFail(t, "docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		SkipOrFail(t, "no Docker engine answers (start one with `make engine` or set DOCKER_HOST): %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Podman skips the test (or fails it under CTRPERF_REQUIRE_DOCKER=1,
// where scripts/bootstrap.sh has installed podman) unless podman and its
// network stack are installed and the test runs as root (runtime podman is
// rootful Podman); it returns podman's path. The test starts its own
// service (daemon.StartPodman): nothing of the user's answers for it.
func Podman(t testing.TB) string {
	t.Helper()
	RequireRoot(t, "runtime podman is rootful Podman")
	p, err := exec.LookPath("podman")
	if err != nil {
		SkipOrFail(t, "podman is not installed (scripts/bootstrap.sh installs podman, netavark and aardvark-dns)")
	}
	if _, err := os.Stat("/usr/lib/podman/netavark"); err != nil {
		SkipOrFail(t, "netavark is not installed (scripts/bootstrap.sh installs it): podman would fall back to CNI")
	}
	return p
}

// TinyHTTPImage imports internal/engine/testdata/tinyhttp (serve, write,
// cat) as a FROM-scratch image into the engine cli talks to, labelled
// ctrperf.managed like ctrperf's own images (so a container made from it
// by hand carries that label), tagged by the binary's digest; it is
// removed from that engine when the test ends.
func TinyHTTPImage(t testing.TB, cli client.APIClient) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tinyhttp")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./internal/engine/testdata/tinyhttp")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tinyhttp: %v\n%s", err, b)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	ref := "ctrperf-test-tinyhttp:" + hex.EncodeToString(sum[:6])
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "tinyhttp", Mode: 0o755, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/tinyhttp"]`, "LABEL " + labels.Managed + "=true"}})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("import %s: %v\n%s", ref, err, msg)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
	return ref
}

var ctrperfBuild struct {
	once sync.Once
	done chan struct{}
	path string
	err  error
}

// StartCtrperf starts Ctrperf's build in the background, for a package
// whose first tests wait on the engine and whose later ones run the
// command: the link (seconds on 2 cores) overlaps them. Ctrperf waits for it.
func StartCtrperf() {
	ctrperfBuild.once.Do(func() {
		ctrperfBuild.done = make(chan struct{})
		go func() {
			defer close(ctrperfBuild.done)
			ctrperfBuild.path, ctrperfBuild.err = buildCtrperf()
			if ctrperfBuild.err == nil {
				ctrperfBuild.err = os.Setenv(selfbin.Env, ctrperfBuild.path)
			}
		}()
	})
}

// Ctrperf builds a static ctrperf (CGO_ENABLED=0) once per test process
// and makes it the binary whose hidden commands the images and host runs
// use (CTRPERF_SELF_BINARY): a test binary is neither ctrperf nor, built
// with -race, static. It returns the binary's path; the test fails if the
// build does. A build StartCtrperf began is waited for.
func Ctrperf(t testing.TB) string {
	t.Helper()
	StartCtrperf()
	<-ctrperfBuild.done
	if ctrperfBuild.err != nil {
		t.Fatalf("build ctrperf for the images and host runs: %v", ctrperfBuild.err)
	}
	return ctrperfBuild.path
}

// buildCtrperf builds ./cmd/ctrperf of the module the test runs in into
// OUT/testbin of that module (out/ is the build's scratch, removed by
// `make clean`): a test process has no end hook to remove a temporary
// directory, and one under /tmp per test package and run piled up there.
// The binary is written under a name of this process and renamed over
// out/testbin/ctrperf, so packages tested side by side never see half a
// binary, and a process still running the previous one keeps its inode.
func buildCtrperf() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir := filepath.Join(root, "out", "testbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ctrperf")
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	// make build's link flags (version, commit and the commit's date):
	// the same source then builds the same bytes as bin/ctrperf, which
	// `make images kube-images` put in the images whose agents check the
	// caller's build.
	ld, err := exec.Command("make", "-s", "--no-print-directory", "-C", root, "ldflags").Output()
	if err != nil {
		return "", fmt.Errorf("make ldflags in %s: %w", root, err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace(string(ld)), "-o", tmp, "./cmd/ctrperf")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/ctrperf in %s: %w\n%s", root, err, b)
	}
	if err := os.Rename(tmp, bin); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return bin, nil
}

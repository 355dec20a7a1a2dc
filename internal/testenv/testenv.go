// Package testenv gates the tests that need more than a Go toolchain: a
// Docker engine, root, a tool on PATH. Such a test says so by name (ending
// in Docker or Root) and, when what it needs is missing, skips — or fails
// when CI asks for every integration test to run (CTRPERF_REQUIRE_DOCKER=1;
// CTRPERF_REQUIRE_ROOT=1 for the tests that only need root), so that a
// broken CI machine cannot pass by skipping.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
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

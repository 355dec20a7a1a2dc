package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/bench"
	"ctrperf/internal/exitcode"
)

// TestBenchRunFailsWhenNothingWasMeasured: a plan whose every run failed
// (the clitest workload's Drive always fails, as examples/hello does before
// `make example`) used to exit 0, so a CI job passed. It exits 1, and the
// last thing said is why.
func TestBenchRunFailsWhenNothingWasMeasured(t *testing.T) {
	dir := t.TempDir()
	planPath := filepath.Join(dir, "fails.yaml")
	if err := os.WriteFile(planPath, []byte("name: fails\nworkload: clitest\nrepetitions: 1\nwarmup: 0s\nduration: 1s\nbaseline: bare\nconfigurations:\n  - name: bare\n    runtime: host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := newBenchRunCmd(func(string) bench.EngineProvider { return &signalEngines{} })
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{planPath, "--out", out, "--observe=false", "--quiet", "--allow-concurrent"})
	err := cmd.Execute()
	if code := exitcode.Of(err); code != exitcode.Failure {
		t.Fatalf("exit %d (%v), want 1\nstdout:\n%s\nstderr:\n%s", code, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(err.Error(), "nothing was measured: none of the 1 runs succeeded (1 failed, 0 not run)") {
		t.Errorf("error %q does not say that every run failed", err)
	}
	if !strings.Contains(stdout.String(), "1 failed") {
		t.Errorf("the summary does not come first:\n%s", stdout.String())
	}
}

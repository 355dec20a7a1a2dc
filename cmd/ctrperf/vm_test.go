package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/testenv"
	"ctrperf/internal/vm"
)

// vmObjects are runtime vm's objects on this machine: guests' run
// directories and overlays, taps, and QEMU processes of ctrperf's guests
// (their -name).
func vmObjects() []string {
	var out []string
	for _, pat := range []string{filepath.Join(vm.RunDir, "ctrperf-vm-*"), filepath.Join(vm.DataDir, "ctrperf-vm-*"), "/sys/class/net/ctrperf-vm*"} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		args := strings.Split(string(b), "\x00")
		if i := slices.Index(args, "-name"); i >= 0 && i+1 < len(args) && strings.HasPrefix(args[i+1], "ctrperf-vm-") {
			out = append(out, "QEMU "+args[i+1])
		}
	}
	return out
}

// vmLifecyclePlan runs the command in an emulated guest: ok, then a
// configuration whose command fails, on the same guest (one boot).
func vmLifecyclePlan(command string) string {
	return `name: vmlife
workload: command
load: {runs: 1, warmup_runs: 0, timeout: 2m}
repetitions: 1
warmup: 0s
duration: 2s
baseline: ok
configurations:
  - name: ok
    runtime: vm
    vm: {accel: tcg, vcpus: 1, memory: 1g}
    app: {command: "` + command + `"}
  - name: fails
    runtime: vm
    vm: {accel: tcg, vcpus: 1, memory: 1g}
    app: {command: "false"}
`
}

// waitGuestReady waits until a guest's console says its agent port is
// served, then a little (the agent's hello, the deploy): the run is then
// in its drive.
func waitGuestReady(t *testing.T, b *benchProc, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		logs, _ := filepath.Glob(filepath.Join(vm.RunDir, "ctrperf-vm-*", "console.log"))
		for _, l := range logs {
			if c, _ := os.ReadFile(l); strings.Contains(string(c), vm.ReadyLine) {
				time.Sleep(8 * time.Second)
				return
			}
		}
		select {
		case err := <-b.done:
			t.Fatalf("bench ended before the guest booted: %v\n%s", err, b.stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("no guest booted within %s", within)
}

// TestBenchVMLifecycleRoot: an emulated guest is gone after a bench run
// that succeeds in one configuration and fails in another (one boot), after
// SIGINT (ctrperf's own shutdown), and after SIGKILL once `ctrperf clean`
// ran (QEMU by its pid file and the dead session's owner record). Three
// boots of about 30 s each.
func TestBenchVMLifecycleRoot(t *testing.T) {
	testenv.RequireRoot(t, "a guest's tap device and its QEMU")
	bin := testenv.Ctrperf(t)
	if _, err := vm.ThisMachine(bin, "probe", nil); err != nil {
		testenv.SkipOrFail(t, "no emulated guest here: %v", err)
	}
	if left := vmObjects(); len(left) > 0 {
		t.Fatalf("VM objects before the test (another run's?): %v", left)
	}
	dir := t.TempDir()
	planFile := func(name, command string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(vmLifecyclePlan(command)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("success and failure", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out := filepath.Join(dir, "out-done")
		cmd := exec.CommandContext(ctx, bin, "bench", "run", planFile("done", "true"), "--out", out)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("bench: %v\n%s", err, b)
		}
		recs, rerr := os.ReadFile(filepath.Join(out, "results.jsonl"))
		var status []string
		for _, l := range strings.Split(strings.TrimSpace(string(recs)), "\n") {
			var r struct {
				Config, Status string
				Emulated       bool
			}
			if err := json.Unmarshal([]byte(l), &r); err == nil && r.Emulated {
				status = append(status, r.Config+" "+r.Status)
			}
		}
		if rerr != nil || !slices.Equal(status, []string{"ok ok", "fails failed"}) {
			t.Errorf("emulated records %v (%v), want ok ok and fails failed; bench said:\n%s", status, rerr, b)
		}
		if left := vmObjects(); len(left) > 0 {
			t.Errorf("left after the run: %v", left)
		}
	})
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(sig.String(), " ", "-"))
			b := startBench(t, ctx, bin, planFile("sig", "sleep 60"), "--out", out)
			waitGuestReady(t, b, 3*time.Minute)
			if err := b.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-b.done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("bench did not end 2 minutes after %s; last line %q", sig, b.lastLine())
			}
			if sig == syscall.SIGINT {
				if code := b.cmd.ProcessState.ExitCode(); code != 130 {
					t.Errorf("exit status %d after SIGINT, want 130\n%s", code, b.stderr.String())
				}
			} else {
				if left := vmObjects(); !slices.ContainsFunc(left, func(s string) bool { return strings.HasPrefix(s, "QEMU ") }) {
					t.Errorf("after SIGKILL the guest's QEMU is gone already (%v): the test shows nothing of clean", left)
				}
				runCleanCmd(t, bin)
			}
			if left := vmObjects(); len(left) > 0 {
				t.Errorf("left after %s: %v", sig, left)
			}
		})
	}
}

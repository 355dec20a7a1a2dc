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
// (their -name). With guests named, only theirs (their directories and
// QEMU: a tap's slot may be another guest's by then).
func vmObjects(guests ...string) []string {
	mine := func(name string) bool {
		return len(guests) == 0 || slices.Contains(guests, name)
	}
	var out []string
	for _, pat := range []string{filepath.Join(vm.RunDir, "ctrperf-vm-*"), filepath.Join(vm.DataDir, "ctrperf-vm-*"), "/sys/class/net/ctrperf-vm*"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if len(guests) == 0 || (!strings.HasPrefix(p, "/sys/") && mine(filepath.Base(p))) {
				out = append(out, p)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		args := strings.Split(string(b), "\x00")
		if i := slices.Index(args, "-name"); i >= 0 && i+1 < len(args) && strings.HasPrefix(args[i+1], "ctrperf-vm-") && mine(args[i+1]) {
			out = append(out, "QEMU "+args[i+1])
		}
	}
	return out
}

// guestsIn are the guests a bench run's output says it booted ("vm:
// guest NAME (...) answered after ...").
func guestsIn(output string) []string {
	var out []string
	for _, l := range strings.Split(output, "\n") {
		if rest, ok := strings.CutPrefix(l, "vm: guest "); ok && strings.Contains(rest, " answered after ") {
			name, _, _ := strings.Cut(rest, " ")
			out = append(out, name)
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
duration: 1s
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

// waitGuestReady waits until bench says its guest's agent answered (the
// run then deploys and drives in it) and returns the guest's name.
func waitGuestReady(t *testing.T, b *benchProc, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if g := guestsIn(b.stderr.String()); len(g) > 0 {
			// The deploy: the run's command is started in the guest.
			time.Sleep(2 * time.Second)
			return g[0]
		}
		select {
		case err := <-b.done:
			t.Fatalf("bench ended before the guest booted: %v\n%s", err, b.stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("no guest booted within %s", within)
	return ""
}

// TestBenchVMLifecycleRoot: an emulated guest is gone after a bench run
// that succeeds in one configuration and fails in another (one boot), after
// SIGINT (ctrperf's own shutdown), and after SIGKILL once `ctrperf clean`
// ran (QEMU by its pid file and the dead session's owner record). The
// three bench runs go side by side (a boot of about 15 s each, one
// emulated vCPU each: make test runs this package alone), each checking
// its own guest (--allow-concurrent: they know of each other); at the end
// nothing of any guest is left.
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
	// Written before the runs start side by side.
	donePlan, sigPlan := planFile("done", "true"), planFile("sig", "sleep 60")
	t.Run("each", func(t *testing.T) {
		t.Run("success and failure", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out := filepath.Join(dir, "out-done")
			cmd := exec.CommandContext(ctx, bin, "bench", "run", donePlan, "--out", out, "--allow-concurrent")
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
			guests := guestsIn(string(b))
			if len(guests) != 1 {
				t.Fatalf("guests booted %v, want one for both configurations; bench said:\n%s", guests, b)
			}
			if left := vmObjects(guests...); len(left) > 0 {
				t.Errorf("left after the run: %v", left)
			}
		})
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
			t.Run(sig.String(), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				out := filepath.Join(dir, "out-"+strings.ReplaceAll(sig.String(), " ", "-"))
				b := startBench(t, ctx, bin, sigPlan, "--out", out, "--allow-concurrent")
				guest := waitGuestReady(t, b, 3*time.Minute)
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
					if left := vmObjects(guest); !slices.Contains(left, "QEMU "+guest) {
						t.Errorf("after SIGKILL the guest's QEMU is gone already (%v): the test shows nothing of clean", left)
					}
					// The other runs' sessions live: clean leaves their guests.
					runCleanCmd(t, bin)
				}
				if left := vmObjects(guest); len(left) > 0 {
					t.Errorf("left after %s: %v", sig, left)
				}
			})
		}
	})
	if left := vmObjects(); len(left) > 0 {
		t.Errorf("left after the three runs: %v", left)
	}
}

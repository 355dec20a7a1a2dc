package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/testenv"
)

// killPlan runs the web workload twice over: once on a private engine whose
// data root is a loop-mounted ext4 image (a dockerd, a loop device, mounts,
// a bridge of ctrperf's own) and once on the user's engine dialed from a
// client network namespace (a netns and a veth pair). Killing it mid-run
// exercises every kind of object ctrperf creates.
const killPlan = `name: killtest
workload: web
app: {db: sqlite, hash_cost: 8, seed_tickets: 10}
load: {rate: 20}
repetitions: 2
warmup: 1s
duration: 1s
seed: 7
baseline: private-loop
configurations:
  - name: private-loop
    runtime: docker
    network: published
    engine: {data_root: loop-ext4}
  - name: external
    runtime: docker
    network: published-external
`

// Environment of the SIGKILL trials: how many (`make test` runs a few,
// `make reliability` 20) and the seed of their kill delays (a failure logs
// the seed; setting it again replays the same plans and delays).
const (
	killTrialsEnv = "CTRPERF_KILL_TRIALS"
	killSeedEnv   = "CTRPERF_KILL_SEED"
)

// killTrialPlans are the shipped plans the SIGKILL trials take in turn, in
// their quick variants at one repetition (onceQuick: each configuration
// once makes and removes every kind of object that three times does, in a
// third of the time), cut with --only to the configurations that create
// the most: smoke as it ships (host processes and cgroups, docker-proxy,
// the user's engine); network's private engine with userland_proxy: false
// (a dockerd, its bridge and iptables rules, hairpin NAT) and its client
// namespace (a netns, a veth pair, DNAT on the user's engine); storage's
// private engines on loop-file data roots (ext4 and btrfs images on loop
// devices, mounts). window bounds the kill delay: about the plan's length
// at one repetition (12, 40 and 59 s on 2 cores, 2026-11-26; smoke's 12 s
// since its quick run's shorter window, 2026-11-29), so kills land
// in engine start-up, image copies, deploys, warm-ups, measured windows,
// teardowns and, rarely, after the end.
var killTrialPlans = []struct {
	plan   string
	args   []string
	window time.Duration
}{
	{"smoke.yaml", []string{"--quick"}, 12 * time.Second},
	{"network.yaml", []string{"--quick", "--only", "docker-published-noproxy,docker-published-external"}, 40 * time.Second},
	{"storage.yaml", []string{"--quick", "--only", "overlay2-loopext4-layer,btrfs-layer"}, 60 * time.Second},
}

// quickRepetitions is the repetitions: line of a plan's quick: section.
var quickRepetitions = regexp.MustCompile(`(?m)^(quick:[ \t]*(?:#.*)?\n(?:(?:[ \t].*)?\n)*?[ \t]+repetitions:)[ \t]*\d+`)

// quickDuration is the duration: line of a plan's quick: section.
var quickDuration = regexp.MustCompile(`(?m)^(quick:[ \t]*(?:#.*)?\n(?:(?:[ \t].*)?\n)*?[ \t]+duration:)[ \t]*\S+`)

// quickWindow sets the measured window of the plan file path's quick:
// section to d.
func quickWindow(t *testing.T, path, d string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !quickDuration.Match(b) {
		t.Fatalf("%s: no duration: in its quick: section", path)
	}
	if err := os.WriteFile(path, quickDuration.ReplaceAll(b, []byte("${1} "+d)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// onceQuick writes the shipped plan src into dir with its quick: section at
// one repetition and returns the copy's path.
func onceQuick(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !quickRepetitions.Match(b) {
		t.Fatalf("%s: no repetitions: in its quick: section", src)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, quickRepetitions.ReplaceAll(b, []byte("${1} 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// benchProc is a `ctrperf bench run` under test, its output kept.
type benchProc struct {
	cmd     *exec.Cmd
	stderr  lockedBuffer // read while bench runs
	mu      sync.Mutex
	last    string        // the last progress line
	started chan struct{} // closed when "run 2/" starts
	done    chan error    // cmd.Wait's result, once
}

func startBench(t *testing.T, ctx context.Context, bin string, args ...string) *benchProc {
	t.Helper()
	b := &benchProc{started: make(chan struct{}), done: make(chan error, 1)}
	b.cmd = exec.CommandContext(ctx, bin, append([]string{"bench", "run"}, args...)...)
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b.cmd.Stderr = &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		closed := false
		for sc.Scan() {
			b.mu.Lock()
			b.last = sc.Text()
			b.mu.Unlock()
			if !closed && strings.HasPrefix(sc.Text(), "run 2/") {
				close(b.started)
				closed = true
			}
		}
		b.done <- b.cmd.Wait()
	}()
	return b
}

// lockedBuffer is a process's output, read while the process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (b *benchProc) lastLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// checkResults finds every line of OUT/results.jsonl but a last one cut by
// SIGKILL a complete record; with needRecord, at least one.
func checkResults(t *testing.T, out string, sig syscall.Signal, needRecord bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "results.jsonl"))
	if os.IsNotExist(err) && !needRecord {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if needRecord && (len(lines) == 0 || lines[0] == "") {
		t.Fatal("results.jsonl has no record of the finished first run")
	}
	for i, l := range lines {
		if l == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			// A SIGKILL may cut the last line; the resume repairs it.
			if sig == syscall.SIGKILL && i == len(lines)-1 {
				continue
			}
			t.Errorf("results.jsonl line %d is not a JSON record: %v", i+1, err)
		}
	}
}

// runCleanCmd runs `ctrperf clean`, bounded in time, and marks t failed
// if it fails; the leftover check after it still says what was left.
func runCleanCmd(t *testing.T, bin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "clean").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ctrperf clean did not finish in 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Errorf("ctrperf clean: %v\n%s", err, out)
		return
	}
	t.Logf("ctrperf clean (%s):\n%s", time.Since(start).Round(100*time.Millisecond), out)
}

// envInt is a non-negative integer from the environment, or def.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// TestBenchKillDocker interrupts `ctrperf bench run`. SIGINT, once the
// second run of killPlan has started: it must tear down by itself. Then
// SIGKILL trials (CTRPERF_KILL_TRIALS, default 3) over the shipped plans
// at random moments (seed CTRPERF_KILL_SEED, logged), each followed by
// `ctrperf clean`. After each, no ctrperf object may exist that was not
// there before (see ctrperfObjects), and every complete line of
// results.jsonl is a record.
func TestBenchKillDocker(t *testing.T) {
	testenv.RequireRoot(t, "bench runs and cleans up as root")
	cli := testenv.Docker(t)

	dir := t.TempDir()
	// The package's one static build (testenv.Ctrperf, shared with every
	// package's tests): the images it carries are not rebuilt for it.
	bin := testenv.Ctrperf(t)
	planFile := filepath.Join(dir, "kill.yaml")
	if err := os.WriteFile(planFile, []byte(killPlan), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("SIGINT tears down by itself", func(t *testing.T) {
		before := ctrperfObjects(t, cli, bin)
		out := filepath.Join(dir, "out-sigint")
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		b := startBench(t, ctx, bin, planFile, "--out", out)
		// Interrupt once the second run has started (the first finished,
		// so a record exists), at a random moment of its deploy (about
		// 0.5 s on the user's engine), warm-up (1 s) or measured window
		// (1 s): the window's length changes nothing of the teardown.
		select {
		case <-b.started:
		case <-time.After(4 * time.Minute):
			_ = b.cmd.Process.Kill()
			<-b.done
			t.Fatalf("the second run never started; stderr:\n%s", b.stderr.String())
		}
		delay := time.Duration(rand.IntN(2500)) * time.Millisecond
		time.Sleep(delay)
		// The interrupt must find something to tear down, or the test
		// proves nothing.
		live := newObjects(before, ctrperfObjects(t, cli, bin))
		if len(live) == 0 {
			t.Errorf("no ctrperf object exists %s into run 2: the interrupt would test nothing", delay)
		}
		t.Logf("sending SIGINT %s into run 2, with %d objects alive (e.g. %s)", delay, len(live), strings.Join(live[:min(2, len(live))], "; "))
		if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := <-b.done
		if ctx.Err() != nil {
			t.Fatalf("ctrperf did not exit after SIGINT; stderr:\n%s", b.stderr.String())
		}
		t.Logf("ctrperf exited: %v", err)
		if left := newObjects(before, ctrperfObjects(t, cli, bin)); len(left) > 0 {
			t.Errorf("left behind:\n  %s\nstderr:\n%s", strings.Join(left, "\n  "), b.stderr.String())
		}
		checkResults(t, out, syscall.SIGINT, true)
	})

	trials := envInt(t, killTrialsEnv, 3)
	seed := uint64(envInt(t, killSeedEnv, time.Now().UnixNano()))
	t.Logf("%d SIGKILL trials, seed %d (replay: %s=%d %s=%d)", trials, seed, killTrialsEnv, trials, killSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	plansDir := filepath.Join(dir, "plans")
	if err := os.Mkdir(plansDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tp := range killTrialPlans {
		onceQuick(t, filepath.Join("..", "..", "plans", tp.plan), plansDir)
	}
	for i := range int(trials) {
		tp := killTrialPlans[i%len(killTrialPlans)]
		delay := time.Duration(rng.Int64N(int64(tp.window/time.Millisecond))) * time.Millisecond
		name := fmt.Sprintf("SIGKILL %d of %d %s at %s", i+1, trials, strings.TrimSuffix(tp.plan, ".yaml"), delay)
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			before := ctrperfObjects(t, cli, bin)
			out := filepath.Join(dir, fmt.Sprintf("out-kill-%d", i+1))
			ctx, cancel := context.WithTimeout(context.Background(), tp.window+2*time.Minute)
			defer cancel()
			args := append([]string{filepath.Join(plansDir, tp.plan), "--out", out}, tp.args...)
			t.Logf("seed %d: ctrperf bench run %s, SIGKILL after %s", seed, strings.Join(args, " "), delay)
			b := startBench(t, ctx, bin, args...)
			select {
			case err := <-b.done:
				t.Logf("the plan ended before the kill (%v), in %s; checking what it left", err, time.Since(start).Round(100*time.Millisecond))
			case <-time.After(delay):
				live := newObjects(before, ctrperfObjects(t, cli, bin))
				t.Logf("SIGKILL during %q, %d objects alive (e.g. %s)", b.lastLine(), len(live), strings.Join(live[:min(3, len(live))], "; "))
				if err := b.cmd.Process.Kill(); errors.Is(err, os.ErrProcessDone) {
					// It ended at the kill's moment (its stdout not yet
					// drained): as if it had ended before.
					t.Logf("the plan ended at the kill's moment; checking what it left")
				} else if err != nil {
					t.Fatal(err)
				}
				<-b.done
			}
			runCleanCmd(t, bin)
			if left := newObjects(before, ctrperfObjects(t, cli, bin)); len(left) > 0 {
				t.Errorf("left behind by %s killed after %s (during %q), seed %d:\n  %s\nstderr:\n%s",
					tp.plan, delay, b.lastLine(), seed, strings.Join(left, "\n  "), b.stderr.String())
			}
			checkResults(t, out, syscall.SIGKILL, false)
			t.Logf("trial took %s", time.Since(start).Round(100*time.Millisecond))
		})
	}
}

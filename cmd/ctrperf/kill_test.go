package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"ctrperf/internal/engine"
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
duration: 8s
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

// ctrperfObjects lists what ctrperf may leave on the machine: objects
// labelled ctrperf.managed on the user's engine, private dockerd processes,
// loop devices backed by ctrperf files, mounts and network namespaces with
// ctrperf in their name.
func ctrperfObjects(t *testing.T, cli client.APIClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var objs []string
	f := filters.NewArgs(filters.Arg("label", engine.LabelManaged+"=true"))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range cs {
		objs = append(objs, "container "+strings.Join(c.Names, ","))
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	for _, n := range ns {
		objs = append(objs, "network "+n.Name)
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs.Volumes {
		objs = append(objs, "volume "+v.Name)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(argv[0]) == "dockerd" && strings.Contains(string(b), "ctrperf") {
			objs = append(objs, "dockerd "+strings.Join(argv, " "))
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), "ctrperf") {
			objs = append(objs, "loop "+strings.TrimSpace(string(b)))
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, "ctrperf") {
				objs = append(objs, "mount "+line)
			}
		}
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.Contains(e.Name(), "ctrperf") {
				objs = append(objs, "netns "+e.Name())
			}
		}
	}
	slices.Sort(objs)
	return objs
}

// newObjects is what after has and before had not.
func newObjects(before, after []string) []string {
	var added []string
	for _, o := range after {
		if !slices.Contains(before, o) {
			added = append(added, o)
		}
	}
	return added
}

// TestBenchKillDocker kills `ctrperf bench run` at a random point of a run
// (SIGINT: it must tear down by itself; SIGKILL: `ctrperf clean` must) and
// then finds no ctrperf object that was not there before, and a
// results.jsonl whose every line is a complete record.
func TestBenchKillDocker(t *testing.T) {
	testenv.RequireRoot(t, "bench runs and cleans up as root")
	cli := testenv.Docker(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "ctrperf")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build ctrperf: %v\n%s", err, out)
	}
	planFile := filepath.Join(dir, "kill.yaml")
	if err := os.WriteFile(planFile, []byte(killPlan), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc  string
		sig   syscall.Signal
		clean bool
	}{
		{"SIGINT tears down by itself", syscall.SIGINT, false},
		{"SIGKILL then ctrperf clean", syscall.SIGKILL, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := ctrperfObjects(t, cli)
			out := filepath.Join(dir, fmt.Sprintf("out-%d", tc.sig))
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "bench", "run", planFile, "--out", out)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Kill once the second run has started (the first finished, so a
			// record exists), at a random moment of its deploy, warm-up or
			// measured window.
			started := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stdout)
				closed := false
				for sc.Scan() {
					if !closed && strings.HasPrefix(sc.Text(), "run 2/") {
						close(started)
						closed = true
					}
				}
			}()
			select {
			case <-started:
			case <-time.After(4 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("the second run never started; stderr:\n%s", stderr.String())
			}
			delay := time.Duration(rand.IntN(6000)) * time.Millisecond
			time.Sleep(delay)
			// The kill must find something to leave behind, or the test
			// proves nothing.
			live := newObjects(before, ctrperfObjects(t, cli))
			if len(live) == 0 {
				t.Errorf("no ctrperf object exists %s into run 2: the kill would test nothing", delay)
			}
			t.Logf("sending %v %s into run 2, with %d objects alive (e.g. %s)", tc.sig, delay, len(live), strings.Join(live[:min(2, len(live))], "; "))
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if tc.sig == syscall.SIGINT && ctx.Err() != nil {
				t.Fatalf("ctrperf did not exit after SIGINT; stderr:\n%s", stderr.String())
			}
			t.Logf("ctrperf exited: %v", err)

			if tc.clean {
				cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer ccancel()
				if out, err := exec.CommandContext(cctx, bin, "clean").CombinedOutput(); err != nil {
					t.Fatalf("ctrperf clean: %v\n%s", err, out)
				} else {
					t.Logf("ctrperf clean:\n%s", out)
				}
			}
			if left := newObjects(before, ctrperfObjects(t, cli)); len(left) > 0 {
				t.Errorf("left behind:\n  %s\nstderr:\n%s", strings.Join(left, "\n  "), stderr.String())
			}

			b, err := os.ReadFile(filepath.Join(out, "results.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) == 0 || lines[0] == "" {
				t.Fatal("results.jsonl has no record of the finished first run")
			}
			for i, l := range lines {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					// A SIGKILL may cut the last line; the resume repairs it.
					if tc.sig == syscall.SIGKILL && i == len(lines)-1 {
						continue
					}
					t.Errorf("results.jsonl line %d is not a JSON record: %v", i+1, err)
				}
			}
		})
	}
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"

	"github.com/moby/moby/client"
)

// TestBenchPrivateEngineKilledDocker kills the private dockerd of a
// configuration (userland proxy off) by its PID in the middle of the first
// run's drive: that run is failed with the engine named, the next run
// either succeeds on the restarted engine or is not_run with a reason, Run
// returns within a bound, and nothing of the engine is left afterwards.
func TestBenchPrivateEngineKilledDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "private engines")
	if _, err := exec.LookPath("dockerd"); err != nil {
		testenv.SkipOrFail(t, "needs dockerd (Debian package docker.io)")
	}
	wl := newTinyWorkload(t, ctx, cli)
	p, err := ParsePlan("fault.yaml", []byte(`
name: fault
workload: benchtiny
repetitions: 2
warmup: 300ms
duration: 3s
baseline: noproxy
configurations:
  - name: noproxy
    runtime: docker
    network: published
    engine: {userland_proxy: false}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}

	engs := &Engines{RunID: "faulttest"}
	var st daemon.State // the private engine's, as it was when killed
	var killed int
	wl.onDrive = func(env workload.Env) {
		if killed != 0 {
			return
		}
		for _, d := range engs.daemons {
			if d.Private() && d.State() != nil {
				st = *d.State()
			}
		}
		if st.PID == 0 || !strings.Contains(cmdline(st.PID), st.Socket) {
			t.Errorf("no private dockerd of this run found (state %+v)", st)
			return
		}
		killed = st.PID
		go func() {
			time.Sleep(time.Second) // mid-drive: after the warm-up, well before the end
			if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
				t.Errorf("kill dockerd %d: %v", killed, err)
			}
		}()
	}
	out := filepath.Join(t.TempDir(), "out")
	var log bytes.Buffer
	start := time.Now()
	sum, err := Run(ctx, p, Options{Out: out, Engines: engs, EngineCheck: 200 * time.Millisecond,
		Workload: func(string) (workload.Workload, error) { return wl, nil },
		Progress: &Lines{W: &log}})
	took := time.Since(start)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took > 3*time.Minute {
		t.Errorf("Run took %s", took)
	}
	if killed == 0 {
		t.Fatal("the private dockerd was never killed")
	}
	recs := readRecords(t, out)
	if len(recs) != 2 || len(sum.Records) != 2 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	first, second := recs[0], recs[1]
	if want := fmt.Sprintf("engine %s stopped answering during drive: ", st.Name); first.Status != results.StatusFailed || !strings.HasPrefix(first.Error, want) {
		t.Errorf("first run: status %s error %q, want failed with %q", first.Status, first.Error, want)
	}
	switch second.Status {
	case results.StatusOK:
		if second.Engine == nil || second.Engine.Name != st.Name || second.Result.Metrics[results.MetricThroughput] <= 0 {
			t.Errorf("second run on the restarted engine: %+v", second)
		}
	case results.StatusNotRun:
		if !strings.Contains(second.Error, st.Name) {
			t.Errorf("second run not_run without the engine's reason: %q", second.Error)
		}
	default:
		t.Errorf("second run: status %s error %q, want ok on the restarted engine or not_run", second.Status, second.Error)
	}

	// Nothing of the private engine is left: no dockerd (the killed one
	// or its successor), containerd or shim, no mounts, no state, no
	// bridge; no socket that answers.
	if kernel.ProcAlive("/proc", killed) {
		t.Errorf("killed dockerd %d still alive", killed)
	}
	for _, mark := range []string{st.Socket, st.ExecRoot} {
		if pids := processesWith(mark); len(pids) > 0 {
			t.Errorf("processes of the private engine (%s) left: %v", mark, pids)
		}
	}
	mi, err := kernel.Mounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if m := kernel.MountsUnder(mi, st.ExecRoot, st.DataRoot); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, p := range []string{filepath.Dir(st.Socket), st.ExecRoot, st.DataRoot} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
	if kernel.LinkExists("/sys", st.Bridge) {
		t.Errorf("bridge %s left", st.Bridge)
	}
	for _, rec := range recs {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", engine.LabelRun+"="+rec.RunID)})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("run %s left %d containers on the default engine", rec.RunID, len(list.Items))
		}
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

// processesWith lists live processes whose command line contains mark.
func processesWith(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if kernel.ProcAlive("/proc", pid) && strings.Contains(cmdline(pid), mark) {
			out = append(out, pid)
		}
	}
	return out
}

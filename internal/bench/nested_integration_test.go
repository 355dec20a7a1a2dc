package bench

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
	"ctrperf/internal/workload"
)

// TestNestedEngineDocker runs a workload on the default engine and on a
// nested one (a dockerd in a container of the default engine, Docker in
// Docker): both runs must measure, the nested record must name its engine
// as nested, and afterwards nothing of the run is left on the default
// engine: no container, no volume (the nested engine's data root), no
// socket directory. The workload is benchtiny: its image (a few MB) is
// copied into the nested engine in well under a second, where the Debian
// base of the real workloads (~900 MB) took most of the test's time; what
// is checked does not depend on the workload.
func TestNestedEngineDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cli := testenv.Docker(t)
	wl := newTinyWorkload(t, ctx, cli)
	p, err := ParsePlan("nested.yaml", []byte(`
name: nested
workload: benchtiny
repetitions: 1
warmup: 0s
duration: 500ms
baseline: docker
configurations:
  - name: docker
    runtime: docker
    network: host
  - name: nested
    runtime: docker
    network: host
    engine: {nested: true}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The nested dockerd runs in the host's network namespace: it must not
	// touch the default engine's bridge (with --bridge=none a dockerd
	// deletes docker0 at start).
	_, docker0Err := net.InterfaceByName("docker0")
	out := filepath.Join(t.TempDir(), "out")
	var seen []string              // containers of the default engine while the nested run was observed
	cgroups := map[string]string{} // run id: the container's cgroup, as its observer got it
	obs := func(tg *engine.Target) Observer {
		for _, c := range tg.Containers {
			// The nested engine reports pids in its container's namespace;
			// the target must hold the host's, whose cgroup is the inner
			// container's own (never another process's).
			if c.PID > 0 && c.CgroupPath != "" && strings.Contains(c.CgroupPath, c.ID) {
				if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/cpu", c.CgroupPath)); err == nil {
					cgroups[tg.RunID] = c.CgroupPath
				}
			}
		}
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", engine.LabelRun+"=nestedtest")})
		if err == nil {
			for _, c := range list.Items {
				seen = append(seen, strings.Join(c.Names, ","))
			}
		}
		return &fakeObserver{}
	}
	_, err = Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: "nestedtest"},
		Observers: obs, Workload: func(string) (workload.Workload, error) { return wl, nil }, Progress: Discard{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readRecords(t, out) {
		if r.Status != results.StatusOK {
			t.Fatalf("%s: %s %s", r.Config, r.Status, r.Error)
		}
		if r.Result.Metrics[results.MetricThroughput] <= 0 {
			t.Errorf("%s: no throughput: %v", r.Config, r.Result.Metrics)
		}
		if r.Config == "nested" && (r.Engine == nil || !r.Engine.Nested || r.Engine.Name != "ctrperf-nested-overlay2-nestedtest") {
			t.Errorf("nested run's engine: %+v", r.Engine)
		}
		if cgroups[r.RunID] == "" {
			t.Errorf("%s: the observer got no cgroup of the run's own container (host pid mapping)", r.Config)
		}
	}
	if len(seen) == 0 || !strings.Contains(strings.Join(seen, " "), "ctrperf-nested-overlay2-nestedtest") {
		t.Errorf("no outer container of the nested engine seen during the run: %v", seen)
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", engine.LabelRun+"=nestedtest")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d containers of the nested engine left behind", len(list.Items))
	}
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", engine.LabelRun+"=nestedtest")})
	if err != nil {
		t.Fatal(err)
	}
	if len(vols.Items) != 0 {
		t.Errorf("%d volumes of the nested engine left behind", len(vols.Items))
	}
	if _, err := net.InterfaceByName("docker0"); docker0Err == nil && err != nil {
		t.Errorf("the default engine's bridge docker0 is gone after the nested engine: %v", err)
	}
	if m, _ := filepath.Glob("/run/ctrperf/x/nested-*"); len(m) != 0 {
		t.Errorf("socket directories left behind: %v", m)
	}
}

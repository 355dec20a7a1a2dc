package bench

import (
	"context"
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

// TestKVClientContainerDocker runs seed 004's memslap the way the seed did:
// the generator in a container of its own on the run's network, dialing
// memcached's container IP (`load.client: container`), next to the same
// load from the host. While deployed, the client must be a second container
// of the run (ctrperf's image, idle until exec); the record must hold the
// operations the client measured, with latencies; afterwards nothing of the
// run is left.
func TestKVClientContainerDocker(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := testenv.Docker(t)
	testenv.Ctrperf(t)
	p, err := ParsePlan("kvclient.yaml", []byte(`
name: kvclient
workload: kv
repetitions: 1
warmup: 100ms
duration: 1s
baseline: from-host
load: {mode: closed, concurrency: 2, mix: set}
configurations:
  - name: from-host
    runtime: docker
    network: container-ip
  - name: from-container
    runtime: docker
    network: container-ip
    load: {client: container}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ins := &inspector{ctx: ctx, cli: cli}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: "kvclienttest"}, Observers: ins.observe,
		Workload: workload.Get, Progress: Discard{}}); err != nil {
		t.Fatal(err)
	}
	if ins.err != nil {
		t.Fatal(ins.err)
	}
	for _, r := range readRecords(t, out) {
		if r.Status != results.StatusOK {
			t.Fatalf("%s: %s %s", r.Config, r.Status, r.Error)
		}
		m := r.Result
		op := m.Operations["set"]
		if op == nil || op.Count < 100 || op.ErrorCount() != 0 || op.Histogram == "" {
			t.Errorf("%s: set operations %+v", r.Config, op)
		}
		cs := ins.byRun[r.RunID]
		driver := m.Tools["memcached-driver"]
		switch r.Config {
		case "from-host":
			if len(cs) != 1 || strings.Contains(driver, "container") {
				t.Errorf("from-host: %d containers, driver %q; want the server alone, driven from the host", len(cs), driver)
			}
		case "from-container":
			if len(cs) != 2 || !strings.Contains(driver, "in a container") {
				t.Fatalf("from-container: %d containers, driver %q; want server and client", len(cs), driver)
			}
			var clientSeen bool
			for _, c := range cs {
				if c.Config.Labels[engine.LabelService] == "client" {
					clientSeen = true
					if got := strings.Join(append(c.Config.Entrypoint, c.Config.Cmd...), " "); got != "/ctrperf __idle" || c.HostConfig.NetworkMode.IsHost() {
						t.Errorf("client container runs %q on network %q", got, c.HostConfig.NetworkMode)
					}
				}
			}
			if !clientSeen {
				t.Error("no container of service client")
			}
		}
		args := client.Filters{}.Add("label", engine.LabelRun+"="+r.RunID)
		left, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: args})
		if err != nil || len(left.Items) > 0 {
			t.Errorf("run %s left %d containers (%v)", r.RunID, len(left.Items), err)
		}
	}
}

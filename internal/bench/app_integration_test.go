package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/engine"
	ctrimage "ctrperf/internal/image"
	"ctrperf/internal/plan"
	"ctrperf/internal/report"
	"ctrperf/internal/results"

	"github.com/moby/moby/client"
)

// TestBenchAppFromDockerfileDocker is the user's path of workload app: a
// Dockerfile context in a directory of their own (not one of ctrperf's
// images), a host command as the bare-metal baseline, a short plan through
// the real engines, a report with a ratio and an interval for every
// configuration, and nothing left behind.
func TestBenchAppFromDockerfileDocker(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := rootDocker(t, ctx, "host runtime cgroups")

	root, err := ctrimage.ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The user's project: a static server, its Dockerfile, a plan.
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("itest-app-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "server"), "./internal/engine/testdata/tinyhttp")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build server: %v\n%s", err, out)
	}
	files := map[string]string{
		"Dockerfile":    "FROM scratch\nCOPY server /server\nENTRYPOINT [\"/server\"]\n",
		".dockerignore": "*.yaml\n",
		"plan.yaml": `name: itest-app
workload: app
repetitions: 3
warmup: 100ms
duration: 300ms
app:
  build: .
  port: 8080
  command: [serve, "{{listen:app}}:{{port:app:8080}}", app]
  host_command: [./server, serve, "{{listen:app}}:{{port:app:8080}}", app]
  data_dir: /data
  ready: {path: /, timeout: 20s}
load:
  path: /
  concurrency: 2
baseline: bare-metal
configurations:
  - name: bare-metal
    runtime: host
  - name: docker-published
    runtime: docker
    network: published
  - name: docker-volume
    runtime: docker
    network: container-ip
    data: volume
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := LoadPlan(filepath.Join(dir, "plan.yaml"), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	imgName := "app-" + filepath.Base(dir)
	t.Cleanup(func() {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		if _, err := ctrimage.Remove(rctx, cli, []string{imgName}); err != nil {
			t.Errorf("remove the test's image: %v", err)
		}
		left, err := cli.ImageList(rctx, client.ImageListOptions{Filters: client.Filters{}.Add("label", ctrimage.LabelName+"="+imgName)})
		if err != nil || len(left.Items) > 0 {
			t.Errorf("images of %s left: %v %v", imgName, left.Items, err)
		}
	})

	out := filepath.Join(t.TempDir(), "out")
	var log strings.Builder
	sum, err := Run(ctx, p, Options{Out: out, Engines: &Engines{RunID: "apptest"}, Progress: &Lines{W: &log}})
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	recs := readRecords(t, out)
	if sum.OK != 9 {
		for _, r := range recs {
			t.Logf("%s %s: %s", r.Config, r.Status, r.Error)
		}
		t.Fatalf("%d ok runs of 9", sum.OK)
	}
	// The image is built once and named by its context.
	imgs, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("label", ctrimage.LabelName+"="+imgName)})
	if err != nil || len(imgs.Items) != 1 || !strings.HasPrefix(imgs.Items[0].RepoTags[0], "ctrperf/"+imgName+":") || imgs.Items[0].Labels[engine.LabelManaged] != "true" {
		t.Errorf("built images %+v (%v)", imgs.Items, err)
	}

	rep, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Configs {
		if c.Runs != 3 {
			t.Errorf("%s: %d runs", c.Name, c.Runs)
		}
		if c.Name == p.Baseline {
			continue
		}
		cmp, ok := c.VsBaseline[results.MetricThroughput]
		if !ok || cmp.Ratio == nil || cmp.CILow == nil || cmp.CIHigh == nil || *cmp.CILow > *cmp.Ratio || *cmp.CIHigh < *cmp.Ratio {
			t.Errorf("%s: throughput vs baseline %+v", c.Name, cmp)
		}
	}

	// Nothing of the runs is left: containers, volumes.
	for _, rec := range recs {
		args := client.Filters{}.Add("label", engine.LabelRun+"="+rec.RunID)
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: args})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: args})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs.Items)+len(vs.Items) > 0 {
			t.Errorf("run %s left %d containers and %d volumes", rec.RunID, len(cs.Items), len(vs.Items))
		}
	}
}

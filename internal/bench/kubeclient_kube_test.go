package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

// labKubeconfig is the lab cluster's (make kube-up).
const labKubeconfig = "/var/lib/ctrperf/kube/kubeconfig"

// TestClientPodsKube runs kv with kubernetes.client: pod, clients: 2 on
// the lab cluster: memcached on kube-node-1 behind a Service, the load
// from two generator pods on kube-node-2, through the real program (bench
// links no client-go: the runtime is cmd/ctrperf's). The record must be
// one merged measurement holding both pods' counts, its histogram theirs
// added, and the run must leave no pod behind.
func TestClientPodsKube(t *testing.T) {
	t.Parallel() // beside TestOLTPOnPodsKube: each waits mostly on its own namespace's deletion
	r, b := runKubePlan(t, "pods.yaml", `name: kube-client-pods
workload: kv
repetitions: 1
warmup: 500ms
duration: 3s
baseline: pods
load: {mode: closed, concurrency: 4, mix: set}
configurations:
  - name: pods
    runtime: kubernetes
    network: service
    kubernetes: {kubeconfig: `+labKubeconfig+`, node: kube-node-1, client: pod, clients: 2, client_node: kube-node-2}
`)
	if r.Status != results.StatusOK {
		t.Fatalf("%s: %s: %s\n%s", r.Config, r.Status, r.Error, b)
	}
	m := r.Result
	op := m.Operations["set"]
	p1, p2 := m.Metrics[ClientPodMetric(1, results.MetricThroughput)], m.Metrics[ClientPodMetric(2, results.MetricThroughput)]
	t.Logf("set: %d operations; pods %.0f/s + %.0f/s = %.0f/s; start skew %.1f ms; notes:\n%s", op.Count, p1, p2,
		m.Metrics[results.MetricThroughput], m.Metrics["client_pods_start_skew_ms"], strings.Join(m.Notes, "\n"))
	if op == nil || op.Count < 100 || op.Histogram == "" || op.ErrorCount() != 0 {
		t.Fatalf("merged set operation %+v", op)
	}
	h, err := results.DecodeHistogram(op.Histogram)
	if err != nil || h.TotalCount() != op.Count {
		t.Errorf("merged histogram holds %d of %d operations (%v)", h.TotalCount(), op.Count, err)
	}
	if m.Metrics["client_pods"] != 2 || p1 <= 0 || p2 <= 0 {
		t.Errorf("client pods %v, their rates %v and %v", m.Metrics["client_pods"], p1, p2)
	}
	if got := m.Metrics[results.MetricThroughput]; got < 0.99*(p1+p2) || got > 1.01*(p1+p2) {
		t.Errorf("throughput %.1f is not the pods' sum %.1f", got, p1+p2)
	}
	if m.Load == nil || m.Load.Concurrency != 4 {
		t.Errorf("load %+v: want the plan's 4 connections in all", m.Load)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{"(ctrperf agent; 2 on kube-node-2)", "the load split over them (closed loop: concurrency 4 as 2+2"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q", want)
		}
	}
	if s := m.Metrics["client_pods_start_skew_ms"]; s > 1000 {
		t.Errorf("the pods' windows began %.0f ms apart", s)
	}
	// Nothing of the session left: its namespace goes with the run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc := exec.CommandContext(ctx, "bin/kube", "kubectl", "--kubeconfig", labKubeconfig, "get", "pods", "-A", "-l", "ctrperf.managed=true", "-o", "name")
	kc.Dir = filepath.Join("..", "..")
	if left, err := kc.CombinedOutput(); err != nil {
		t.Logf("kubectl: %v: %s", err, left)
	} else if strings.Contains(string(left), "client") {
		t.Errorf("client pods left: %s", left)
	}
}

// runKubePlan runs plan (a file name and its text) through the real
// program on the lab cluster and returns its one record and the program's
// output; no lab cluster fails the test under CTRPERF_REQUIRE_KUBE=1 and
// skips it otherwise.
func runKubePlan(t *testing.T, name, plan string) (results.RunRecord, []byte) {
	t.Helper()
	if _, err := os.Stat(labKubeconfig); err != nil {
		if os.Getenv("CTRPERF_REQUIRE_KUBE") == "1" {
			t.Fatalf("no lab cluster (make kube-up): %v", err)
		}
		t.Skipf("no lab cluster (make kube-up): %v", err)
	}
	bin := testenv.Ctrperf(t)
	dir := t.TempDir()
	planFile := filepath.Join(dir, name)
	if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	// --allow-concurrent: the cluster tests of this package run side by
	// side (their checks count their own run's pods and records only).
	b, err := exec.CommandContext(ctx, bin, "bench", "run", planFile, "--out", out, "--allow-concurrent").CombinedOutput()
	t.Logf("bench run took %s", time.Since(t0).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, b)
	}
	recs := readRecords(t, out)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	return recs[0], b
}

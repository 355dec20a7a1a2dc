package bench

import (
	"testing"

	"ctrperf/internal/results"
)

// TestOLTPOnPodsKube runs the oltp workload on the lab cluster, its data
// on a local PersistentVolume: MariaDB in a pod must pass the engine's
// ready check, which dials the pod's address from this machine (a
// mariadbd bound to the pod's loopback never would), and sysbench, exec'd
// into the pod, must report transactions. Through the real program, as
// TestClientPodsKube.
func TestOLTPOnPodsKube(t *testing.T) {
	t.Parallel() // beside TestClientPodsKube, each in a session of its own
	r, b := runKubePlan(t, "oltp.yaml", `name: kube-oltp
workload: oltp
app: {innodb_buffer_pool_size: 32M}
load: {threads: 2, tables: 1, table_size: 1000}
repetitions: 1
warmup: 1s
duration: 3s
baseline: pod
configurations:
  - name: pod
    runtime: kubernetes
    data: local-pv
    kubernetes: {kubeconfig: `+labKubeconfig+`, node: kube-node-2}
`)
	if r.Status != results.StatusOK || r.Result == nil {
		t.Fatalf("%s: %s: %s\n%s", r.Config, r.Status, r.Error, b)
	}
	if tps := r.Result.Metrics["tps"]; tps <= 0 {
		t.Errorf("tps %v (metrics %v)", tps, r.Result.Metrics)
	}
	if r.Engine == nil || r.Engine.Kube == nil || len(r.Engine.Kube.Pods) != 1 || r.Engine.Kube.Pods[0].Node != "kube-node-2" {
		t.Errorf("engine %+v, want one pod on kube-node-2", r.Engine)
	}
}

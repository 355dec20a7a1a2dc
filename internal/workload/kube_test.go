package workload

import (
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
)

// TestToolsOnKubernetes: a tool workload takes a pod's own network (the
// default) or its node's, and no other; fio never asks a memory emptyDir
// (a tmpfs) for O_DIRECT.
func TestToolsOnKubernetes(t *testing.T) {
	for _, n := range []engine.NetworkMode{plan.NetworkPodIP, plan.NetworkHostNetwork} {
		if _, _, err := (FileIO{}).Decode(Knobs{Runtime: plan.RuntimeKubernetes, Network: n, Data: plan.DataEmptyDir}); err != nil {
			t.Errorf("fileio on %s: %v", n, err)
		}
	}
	_, _, err := (FileIO{}).Decode(Knobs{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService})
	if err == nil || !strings.Contains(err.Error(), "has nothing to measure") {
		t.Errorf("fileio on service: %v", err)
	}
	l, _ := ParseFileIOLoad(nil)
	if direct, _, note := wantDirect(l, plan.DataEmptyDirMemory); direct || !strings.Contains(note, "tmpfs") {
		t.Errorf("emptydir-memory: direct %v (%s)", direct, note)
	}
}

// TestKVClientOnKubernetes: kv's client container is marked as the load
// generator (runtime kubernetes places it on kubernetes.client_node) and,
// on a cluster, dials the endpoint's own path (a ClusterIP, a NodePort).
func TestKVClientOnKubernetes(t *testing.T) {
	c := Config{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService, Data: plan.DataLayer, App: DefaultKVApp}
	l := DefaultKVLoad
	l.Client = kvClientContainer
	c.Load = l
	svcs, err := (KV{}).Services(c)
	if err != nil || len(svcs) != 2 || svcs[1].Labels[labels.Role] != "client" {
		t.Fatalf("services %+v %v", svcs, err)
	}
	tg := &engine.Target{Runtime: plan.RuntimeKubernetes, Network: plan.NetworkService,
		Containers: []engine.Container{{Service: "kv", IP: "198.19.64.12"}}}
	ep := engine.Endpoint{Service: "kv", Port: 11211, Addr: "198.19.96.20:11211"}
	if got, err := kvAddrFromClient(tg, ep); err != nil || got != "198.19.96.20:11211" {
		t.Errorf("client dials %q %v, want the ClusterIP", got, err)
	}
}

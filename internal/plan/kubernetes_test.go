package plan

import (
	"reflect"
	"strings"
	"testing"
)

const kubePlanHead = "name: kube\nworkload: testweb\nbaseline: base\nconfigurations:\n  - {name: base, runtime: host}\n"

func TestKubernetesKnobs(t *testing.T) {
	src := kubePlanHead +
		"  - {name: pod, runtime: kubernetes}\n" +
		"  - name: svc\n" +
		"    runtime: kubernetes\n" +
		"    network: service\n" +
		"    data: emptydir-memory\n" +
		"    resources: {cpus: 1, memory: 256m}\n" +
		"    kubernetes: {kubeconfig: /k/config, context: lab, node: node-2, qos: guaranteed, proxy_mode: nftables}\n"
	p, err := Parse("kube.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := p.Config("pod")
	if pod.Network != NetworkPodIP || pod.Data != DataLayer || !pod.Kube.IsZero() {
		t.Errorf("defaults of runtime kubernetes: network %q data %q kube %+v", pod.Network, pod.Data, pod.Kube)
	}
	svc, _ := p.Config("svc")
	want := KubeSpec{Kubeconfig: "/k/config", Context: "lab", Node: "node-2", QoS: "guaranteed", ProxyMode: "nftables"}
	if svc.Kube != want {
		t.Errorf("kube = %+v, want %+v", svc.Kube, want)
	}
	// The cluster is the engine: two clusters are two engines.
	if svc.Engine.Kube != want || svc.Engine.Key() == pod.Engine.Key() {
		t.Errorf("engine keys %q and %q", svc.Engine.Key(), pod.Engine.Key())
	}
	if !svc.Engine.IsDefault() {
		t.Error("a cluster is no Docker engine knob")
	}
	canon, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(canon), "engine:") || !strings.Contains(string(canon), "kubernetes:") {
		t.Fatalf("canonical form:\n%s", canon)
	}
	again, err := Parse("canon.yaml", canon, Options{Schema: testSchema{}})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
	}
	svc2, _ := again.Config("svc")
	if !reflect.DeepEqual(svc2.Knobs.Kube, want) || svc2.Network != NetworkService || svc2.Data != DataEmptyDirMemory {
		t.Errorf("after canonical: %+v", svc2.Knobs)
	}
	if m := svc.KnobMap(); m["kubernetes"] == nil {
		t.Errorf("KnobMap has no kubernetes: %v", m)
	}
	if d := svc.describeKnobs(); !strings.Contains(d, "kube{context=lab,node=node-2,qos=guaranteed,proxy=nftables}") {
		t.Errorf("describe: %s", d)
	}
}

func TestKubernetesMatrixAxes(t *testing.T) {
	src := "name: kube\nworkload: testweb\nbaseline: k-pod-ip\nmatrix:\n" +
		"  base: {runtime: kubernetes}\n  name: \"k-{network}\"\n  network: [pod-ip, service, nodeport, host-network]\n"
	p, err := Parse("kube.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Names(); !reflect.DeepEqual(got, []string{"k-pod-ip", "k-service", "k-nodeport", "k-host-network"}) {
		t.Errorf("configs %v", got)
	}
	src = "name: kube\nworkload: testweb\nbaseline: n1\nmatrix:\n" +
		"  base: {runtime: kubernetes}\n  name: \"{kubernetes.node}\"\n  kubernetes.node: [n1, n2]\n"
	p, err = Parse("kube.yaml", []byte(src), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := p.Config("n2"); !ok || c.Kube.Node != "n2" {
		t.Errorf("configs %v", p.Names())
	}
}

// TestKubernetesRefusals: each knob that means nothing on a cluster (or a
// kubernetes knob elsewhere) is refused at its line, saying why.
func TestKubernetesRefusals(t *testing.T) {
	cases := []struct {
		name, configs string
		line          int
		want          string
	}{
		{"docker network", "  - {name: b, runtime: kubernetes, network: published}\n", 6, `"published" is not a network of runtime kubernetes; expected one of "pod-ip", "service", "nodeport", "host-network"`},
		{"docker data", "  - {name: b, runtime: kubernetes, data: volume}\n", 6, `"volume" is not a data placement of runtime kubernetes`},
		{"pod-ip on docker", "  - {name: b, runtime: docker, network: pod-ip}\n", 6, `"pod-ip" needs runtime kubernetes`},
		{"service on host", "  - {name: b, runtime: host, network: service}\n", 6, `"service" needs runtime kubernetes (runtime host has host)`},
		{"emptydir on docker", "  - {name: b, runtime: docker, data: emptydir}\n", 6, `"emptydir" needs runtime kubernetes`},
		{"block on docker", "  - name: b\n    runtime: docker\n    kubernetes: {node: n1}\n", 8, `the kubernetes block needs runtime kubernetes`},
		{"engine knob", "  - {name: b, runtime: kubernetes, engine: {storage_driver: vfs}}\n", 6, `engine knobs select a Docker engine; runtime kubernetes`},
		{"filesystem", "  - {name: b, runtime: kubernetes, data: hostpath, filesystem: {type: ext4}}\n", 6, `a node of the cluster does not see`},
		{"cpuset", "  - {name: b, runtime: kubernetes, resources: {cpuset: \"0\"}}\n", 6, `Kubernetes has no cpuset for a pod`},
		{"shares", "  - {name: b, runtime: kubernetes, resources: {cpu_shares: 512}}\n", 6, `from its CPU request`},
		{"guaranteed without limits", "  - {name: b, runtime: kubernetes, kubernetes: {qos: guaranteed}}\n", 6, `guaranteed needs resources.cpus and resources.memory`},
		{"guaranteed half a CPU", "  - name: b\n    runtime: kubernetes\n    resources: {cpus: 0.5, memory: 64m}\n    kubernetes: {qos: guaranteed}\n", 8, `pins whole CPUs only`},
		{"besteffort with limits", "  - {name: b, runtime: kubernetes, resources: {cpus: 1}, kubernetes: {qos: besteffort}}\n", 6, `besteffort sets no requests or limits`},
		{"unknown key", "  - {name: b, runtime: kubernetes, kubernetes: {nodes: n1}}\n", 6, `unknown key; did you mean "node"?`},
		{"bad proxy mode", "  - {name: b, runtime: kubernetes, kubernetes: {proxy_mode: userspace}}\n", 6, `"userspace" is not valid; expected one of "iptables", "nftables", "ipvs"`},
		{"client pod of a workload that execs", "  - {name: b, runtime: kubernetes, kubernetes: {client: pod}}\n", 6, `pod: workload testweb's driver cannot run in a generator pod`},
		{"clients without client pod", "  - name: b\n    runtime: kubernetes\n    kubernetes: {clients: 2}\n", 8, `generator pods need kubernetes.client: pod`},
		{"client node elsewhere", "  - {name: b, runtime: docker, kubernetes: {client_node: n2}}\n", 6, `the kubernetes block needs runtime kubernetes`},
		{"kubelet dir not absolute", "  - {name: b, runtime: kubernetes, kubernetes: {kubelet_dir: var/lib/kubelet}}\n", 6, `want an absolute path on the nodes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("kube.yaml", []byte(kubePlanHead+tc.configs), Options{Schema: testSchema{}})
			if n := wantFieldError(t, err, tc.line, tc.want); n > 1 && tc.name != "filesystem" {
				t.Errorf("more than one error: %v", err)
			}
		})
	}
}

const kubeKVHead = "name: kube\nworkload: kv\nbaseline: base\nconfigurations:\n  - {name: base, runtime: host}\n"

// TestPlanClientPods (runtime kubernetes; no "Kube" in the name, which
// marks the lab cluster's integration tests): client: pod with clients: N for the workloads
// whose driver runs in a generator pod; one pod is the default and
// writing it changes nothing (engine, record, hash).
func TestPlanClientPods(t *testing.T) {
	src := kubeKVHead +
		"  - {name: one, runtime: kubernetes, kubernetes: {client: pod}}\n" +
		"  - {name: one-written, runtime: kubernetes, kubernetes: {client: pod, clients: 1}}\n" +
		"  - name: three\n    runtime: kubernetes\n    network: service\n    load: {concurrency: 6}\n" +
		"    kubernetes: {client: pod, clients: 3, client_node: n2}\n"
	p, err := Parse("kube.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := p.Config("one")
	written, _ := p.Config("one-written")
	three, _ := p.Config("three")
	if one.Kube.ClientPods() != 1 || written.Kube != one.Kube || one.Engine.Key() != written.Engine.Key() {
		t.Errorf("one pod: %+v (%d pods) vs written %+v", one.Kube, one.Kube.ClientPods(), written.Kube)
	}
	if !reflect.DeepEqual(one.KnobMap(), written.KnobMap()) {
		t.Errorf("clients: 1 changed the record's knobs: %v vs %v", written.KnobMap(), one.KnobMap())
	}
	want := KubeSpec{Client: "pod", Clients: 3, ClientNode: "n2"}
	if three.Kube != want || three.Kube.ClientPods() != 3 || three.Engine.Key() == one.Engine.Key() {
		t.Errorf("three: %+v, key %q", three.Kube, three.Engine.Key())
	}
	if d := three.describeKnobs(); !strings.Contains(d, "client=pod,client_node=n2,clients=3") {
		t.Errorf("describe: %s", d)
	}
	if (KubeSpec{Clients: 3}).ClientPods() != 0 {
		t.Error("client host has no generator pods")
	}
	canon, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "clients: 3") || strings.Count(string(canon), "clients:") != 1 {
		t.Fatalf("canonical form:\n%s", canon)
	}
	again, err := Parse("canon.yaml", canon, Options{})
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
	}
	if c, _ := again.Config("three"); c.Kube != want {
		t.Errorf("after canonical: %+v", c.Kube)
	}
	h1, err := p.Hash()
	if err != nil {
		t.Fatal(err)
	}
	// The same plan with the one-pod default left out hashes the same.
	p2, err := Parse("kube.yaml", []byte(strings.Replace(src, "client: pod, clients: 1}", "client: pod}", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := p2.Hash(); h1 != h2 {
		t.Errorf("clients: 1 changed the hash: %s vs %s", h1, h2)
	}
	// clients is part of the hash otherwise.
	p3, err := Parse("kube.yaml", []byte(strings.Replace(src, "clients: 3", "clients: 2", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h3, _ := p3.Hash(); h1 == h3 {
		t.Error("clients: 2 and 3 hash alike")
	}
}

// TestPlanClientPodRefusals: what client: pod cannot do is refused
// at its line.
func TestPlanClientPodRefusals(t *testing.T) {
	cases := []struct {
		name, configs string
		line          int
		want          string
	}{
		{"clients out of range", "  - name: b\n    runtime: kubernetes\n    kubernetes: {client: pod, clients: 17}\n", 8, `17: expected a number of generator pods between 1 and 16`},
		{"clients zero", "  - name: b\n    runtime: kubernetes\n    kubernetes: {client: pod, clients: 0}\n", 8, `0: expected a number of generator pods between 1 and 16`},
		{"clients on docker", "  - {name: b, runtime: docker, kubernetes: {clients: 2}}\n", 6, `the kubernetes block needs runtime kubernetes`},
		{"client pod on host", "  - {name: b, runtime: host, kubernetes: {client: pod}}\n", 6, `the kubernetes block needs runtime kubernetes`},
		{"search", "  - name: b\n    runtime: kubernetes\n    load: {search: {slo: {p99_ms: 5}}}\n    kubernetes: {client: pod}\n", 8, `a capacity search with kubernetes.client: pod`},
		{"kv client container", "  - name: b\n    runtime: kubernetes\n    load: {client: container}\n    kubernetes: {client: pod}\n", 8, `kv's client container is one generator in a pod of the run`},
		{"instances", "  - name: b\n    runtime: kubernetes\n    instances: 2\n    kubernetes: {client: pod}\n", 8, `2 instances with kubernetes.client: pod`},
		{"fewer connections than pods", "  - name: b\n    runtime: kubernetes\n    load: {concurrency: 2}\n    kubernetes: {client: pod, clients: 3}\n", 9, `3 generator pods for load.concurrency 2`},
		{"load host", "  - name: b\n    runtime: kubernetes\n    hosts: {load: lab-load}\n    kubernetes: {client: pod}\n", 9, `pod with hosts.load lab-load`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("kube.yaml", []byte(kubeKVHead+tc.configs), Options{})
			if n := wantFieldError(t, err, tc.line, tc.want); n > 1 {
				t.Errorf("more than one error: %v", err)
			}
		})
	}
}

// The isolate controller runs on a cluster as a DaemonSet (issue 36): a
// kubernetes configuration takes isolate.policy.
func TestKubernetesTakesIsolate(t *testing.T) {
	p, err := Parse("kube.yaml", []byte(kubePlanHead+"  - {name: b, runtime: kubernetes, isolate: {policy: shield}, kubernetes: {kubelet_dir: \"/var/lib/k/$(NODE_NAME)\"}}\n"), Options{Schema: testSchema{}})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Configurations[len(p.Configurations)-1]
	if !c.Isolate.On() || c.Kube.KubeletDir != "/var/lib/k/$(NODE_NAME)" {
		t.Errorf("isolate %v, kubelet_dir %q", c.Isolate.On(), c.Kube.KubeletDir)
	}
}

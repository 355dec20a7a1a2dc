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
		{"client pod", "  - {name: b, runtime: kubernetes, kubernetes: {client: pod}}\n", 6, `not implemented yet`},
		{"client node elsewhere", "  - {name: b, runtime: docker, kubernetes: {client_node: n2}}\n", 6, `the kubernetes block needs runtime kubernetes`},
		{"isolate", "  - {name: b, runtime: kubernetes, isolate: {policy: shield}}\n", 6, `isolate`},
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

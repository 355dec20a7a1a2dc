package doctor

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"text/tabwriter"

	"ctrperf/internal/engine/kube"
	"ctrperf/internal/results"
)

// TestKubeReport: doctor names each cluster's version, kube-proxy mode,
// nodes with Ready and CPU manager policy, and a cluster that does not
// answer; a kubeconfig it cannot read is an error of the collector.
func TestKubeReport(t *testing.T) {
	f := &Facts{}
	o := defaultOptions()
	o.kube = func(context.Context) ([]kube.Report, []error) {
		return []kube.Report{
			{Context: "lab", Server: "https://198.19.210.1:6443", Answers: true, Version: "v1.37.2", ProxyMode: "nftables", ProxyModeFrom: "ConfigMap kube-system/kube-proxy",
				Nodes:      []results.KubeNode{{Name: "kube-node-1", Ready: true, Address: "198.19.210.11", Kubelet: "v1.37.2", Runtime: "containerd://1.6.20"}, {Name: "kube-node-2", Address: "198.19.210.12"}},
				CPUManager: map[string]string{"kube-node-1": "static"}},
			{Context: "gone", Server: "https://10.0.0.1:6443", Error: "connection refused"},
		}, []error{errors.New("kubeconfig /x: no such file")}
	}
	if err := collectKube(context.Background(), o, f); err == nil || !strings.Contains(err.Error(), "/x") {
		t.Errorf("collector error %v", err)
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	f.writeKube(tw)
	tw.Flush()
	for _, want := range []string{"v1.37.2 at https://198.19.210.1:6443 (context lab)", "nftables (ConfigMap kube-system/kube-proxy)",
		"kube-node-1 Ready, 198.19.210.11, kubelet v1.37.2, containerd://1.6.20, CPU manager static", "kube-node-2 NotReady, 198.19.210.12", "unreadable (/configz)",
		"https://10.0.0.1:6443 (context gone) does not answer: connection refused"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

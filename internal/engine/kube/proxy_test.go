package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestProxyModeSources: where a cluster tells its kube-proxy mode, in
// order (a node's /proxyMode, a kube-proxy* ConfigMap, kube-proxy pods'
// flags), and why it is unknown when none does.
func TestProxyModeSources(t *testing.T) {
	refused := func(context.Context, string) (string, error) { return "", errors.New("connection refused") }
	proxyPod := func(name string, args ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Command: []string{"/usr/local/bin/kube-proxy"}, Args: args}}}}
	}
	nodes := []runtime.Object{node("node-1", "198.19.210.11", true), node("node-2", "198.19.210.12", true)}
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		probe     func(context.Context, string) (string, error)
		mode      string
		from      string
		fromParts []string
	}{
		{name: "node metrics", probe: func(_ context.Context, ip string) (string, error) {
			if ip == "198.19.210.11" {
				return "", errors.New("connection refused")
			}
			return "iptables", nil
		}, mode: "iptables", from: "http://198.19.210.12:10249/proxyMode (node node-2)"},
		{name: "EKS ConfigMap", probe: refused, objs: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-config", Namespace: "kube-system"},
			Data: map[string]string{"config": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: \"ipvs\"\n"}}},
			mode: "ipvs", from: "ConfigMap kube-system/kube-proxy-config (config)"},
		{name: "kubeadm empty mode is iptables", probe: refused, objs: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
			Data: map[string]string{"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: \"\"\n", "kubeconfig.conf": "apiVersion: v1\nkind: Config\n"}}},
			mode: "iptables", from: "ConfigMap kube-system/kube-proxy (config.conf)"},
		{name: "pod flag", probe: refused, objs: []runtime.Object{proxyPod("kube-proxy-x7k2p", "--proxy-mode=nftables", "--v=2")},
			mode: "nftables", from: "the command line of pod kube-system/kube-proxy-x7k2p"},
		{name: "pod without flag or config", probe: refused, objs: []runtime.Object{proxyPod("kube-proxy-x7k2p", "--v=2")},
			mode: "iptables", from: "the command line of pod kube-system/kube-proxy-x7k2p"},
		{name: "pod with a config file only", probe: refused, objs: []runtime.Object{proxyPod("kube-proxy-x7k2p", "--config=/var/lib/kube-proxy/config.conf")},
			fromParts: []string{"unknown: no node answered on 10249/proxyMode (198.19.210.11: connection refused; 198.19.210.12: connection refused)",
				"kube-system has no kube-proxy ConfigMap", "no kube-proxy pod in kube-system names --proxy-mode"}},
		{name: "nothing", probe: refused,
			fromParts: []string{"unknown: no node answered", "no kube-proxy ConfigMap", "no kube-proxy pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, append(append([]runtime.Object(nil), nodes...), tc.objs...)...)
			k, err := New(context.Background(), Options{Session: "s-1", Client: f.cs, Owner: Owner{Host: "h", PID: 1}, ProxyModeProbe: tc.probe})
			if err != nil {
				t.Fatal(err)
			}
			in, _ := k.Info(context.Background())
			if in.Kube.ProxyMode != tc.mode {
				t.Errorf("mode %q (%s), want %q", in.Kube.ProxyMode, in.Kube.ProxyModeFrom, tc.mode)
			}
			if tc.from != "" && in.Kube.ProxyModeFrom != tc.from {
				t.Errorf("from %q, want %q", in.Kube.ProxyModeFrom, tc.from)
			}
			for _, p := range tc.fromParts {
				if !strings.Contains(in.Kube.ProxyModeFrom, p) {
					t.Errorf("from %q lacks %q", in.Kube.ProxyModeFrom, p)
				}
			}
		})
	}
}

// TestProxyModeProbesFewNodes: a large cluster whose nodes do not answer
// costs at most maxProxyProbes probes.
func TestProxyModeProbesFewNodes(t *testing.T) {
	var objs []runtime.Object
	for i := 0; i < 10; i++ {
		objs = append(objs, node("n"+string(rune('a'+i)), "198.19.210."+string(rune('0'+i)), true))
	}
	f := newFake(t, objs...)
	asked := 0
	_, err := New(context.Background(), Options{Session: "s-1", Client: f.cs, Owner: Owner{Host: "h", PID: 1},
		ProxyModeProbe: func(context.Context, string) (string, error) { asked++; return "", errors.New("i/o timeout") }})
	if err != nil {
		t.Fatal(err)
	}
	if asked != maxProxyProbes {
		t.Errorf("asked %d nodes, want %d", asked, maxProxyProbes)
	}
}

func TestModeFromFlags(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		mode string
		ok   bool
	}{
		{[]string{"kube-proxy", "--proxy-mode", "ipvs"}, "ipvs", true},
		{[]string{"/bin/sh", "-c", "exec kube-proxy --proxy-mode=nftables --v=2"}, "nftables", true},
		{[]string{"kube-proxy", "--proxy-mode="}, "iptables", true},
		{[]string{"kube-proxy", "--config=/c.yaml"}, "", false},
		{[]string{"kube-proxy"}, "iptables", true},
		{[]string{"pause"}, "", false},
	} {
		m, ok := modeFromFlags(tc.argv)
		if m != tc.mode || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.argv, m, ok, tc.mode, tc.ok)
		}
	}
}

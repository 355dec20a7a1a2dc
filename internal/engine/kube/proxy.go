package kube

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ctrperf/internal/kernel"
)

// readProxyMode finds the kube-proxy mode in force, from what the cluster
// really exposes, in this order:
//
//  1. kube-proxy's /proxyMode on a node's metrics port (10249), which
//     names the mode the running proxier uses (reached directly, then
//     through the API server's node proxy);
//  2. the kube-proxy ConfigMap of kube-system (kubeadm's), whose mode: is
//     what kube-proxy was started with ("" there means iptables).
//
// It returns the mode ("" when nothing said) and where it came from.
func (k *Kube) readProxyMode(ctx context.Context, nodes []corev1.Node) (mode, from string) {
	probe := k.opt.ProxyModeProbe
	if probe == nil {
		probe = httpProxyMode
	}
	var tried []string
	for _, n := range nodes {
		ip := nodeInfo(n).Address
		if ip == "" {
			continue
		}
		m, err := probe(ctx, ip)
		if err == nil && m != "" {
			return m, fmt.Sprintf("http://%s/proxyMode (node %s)", net.JoinHostPort(ip, "10249"), n.Name)
		}
		tried = append(tried, fmt.Sprintf("%s: %v", ip, err))
		if k.rc != nil {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			b, err := k.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + n.Name + ":10249/proxy/proxyMode").DoRaw(pctx)
			cancel()
			if err == nil && validMode(strings.TrimSpace(string(b))) {
				return strings.TrimSpace(string(b)), fmt.Sprintf("the API server's proxy to node %s:10249/proxyMode", n.Name)
			}
		}
	}
	cm, err := k.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err == nil {
		for _, v := range cm.Data {
			if m, ok := modeFromConfig(v); ok {
				return m, "ConfigMap kube-system/kube-proxy"
			}
		}
	}
	if len(tried) > 0 {
		return "", "unknown: no node answered on 10249/proxyMode (" + strings.Join(tried, "; ") + ") and kube-system has no kube-proxy ConfigMap"
	}
	return "", "unknown: no node address and no kube-proxy ConfigMap"
}

func validMode(m string) bool {
	switch m {
	case "iptables", "nftables", "ipvs", "kernelspace":
		return true
	}
	return false
}

// modeFromConfig reads mode: from a KubeProxyConfiguration (YAML); an
// empty mode is iptables, kube-proxy's default on Linux.
func modeFromConfig(cfg string) (string, bool) {
	if !strings.Contains(cfg, "KubeProxyConfiguration") {
		return "", false
	}
	sc := bufio.NewScanner(strings.NewReader(cfg))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			m := strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "mode:")), `"'`)
			if m == "" {
				m = "iptables"
			}
			return m, true
		}
	}
	return "iptables", true
}

// httpProxyMode asks a node's kube-proxy for its mode.
func httpProxyMode(ctx context.Context, ip string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "10249")+"/proxyMode", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil {
		return "", err
	}
	m := strings.TrimSpace(string(b))
	if resp.StatusCode != http.StatusOK || !validMode(m) {
		return "", fmt.Errorf("%s: %q", resp.Status, m)
	}
	return m, nil
}

// checkProxyMode gates a block that requires a kube-proxy mode: another
// mode in force, or one nobody could read, makes its runs not_run.
func (k *Kube) checkProxyMode() error {
	want := k.opt.Spec.ProxyMode
	if want == "" || want == k.proxyMode {
		return nil
	}
	if want == "ipvs" {
		has := k.opt.KernelHasIPVS
		if has == nil {
			has = kernelHasIPVS
		}
		if ok, why := has(); !ok {
			return &Unavailable{Reason: fmt.Sprintf("kubernetes.proxy_mode ipvs: the kernel has no CONFIG_IP_VS (%s), so kube-proxy cannot run in IPVS mode here; the cluster's kube-proxy runs %s", why, orUnknown(k.proxyMode, k.proxyFrom))}
		}
	}
	return &Unavailable{Reason: fmt.Sprintf("kubernetes.proxy_mode %s: the cluster's kube-proxy runs %s (start it in %s mode, e.g. `make kube-up KUBE_PROXY_MODE=%s` on the lab)", want, orUnknown(k.proxyMode, k.proxyFrom), want, want)}
}

func orUnknown(mode, from string) string {
	if mode == "" {
		return "an unknown mode (" + from + ")"
	}
	return mode + " (read from " + from + ")"
}

// kernelHasIPVS reads this machine's kernel configuration.
func kernelHasIPVS() (bool, string) {
	p := kernel.DefaultFS().Proc("config.gz")
	f, err := os.Open(p)
	if err != nil {
		return true, "" // cannot tell: let the mode check speak
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return true, ""
	}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "CONFIG_IP_VS=y" || line == "CONFIG_IP_VS=m":
			return true, ""
		case line == "# CONFIG_IP_VS is not set":
			return false, p + ": " + line
		}
	}
	return false, p + " does not mention CONFIG_IP_VS"
}

func ssar(verb, group, resource, sub, ns string) *authv1.SelfSubjectAccessReview {
	return &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns},
	}}
}

package kube

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ctrperf/internal/kernel"
)

// readProxyMode finds the kube-proxy mode in force, from what a cluster
// really exposes, in this order:
//
//  1. kube-proxy's /proxyMode on a node's metrics port (10249), which
//     names the mode the running proxier uses: reached directly, then
//     through the API server's node proxy (a metrics address on the node's
//     IP or 0.0.0.0, as the lab and many clusters bind it; kube-proxy's
//     default, 127.0.0.1, answers neither);
//  2. a kube-proxy ConfigMap of kube-system (kubeadm's kube-proxy, EKS's
//     kube-proxy-config, ...), whose KubeProxyConfiguration's mode: is what
//     kube-proxy was started with ("" there means iptables);
//  3. the --proxy-mode flag of kube-proxy's pods in kube-system (a
//     DaemonSet or static pods started with flags, not a config file).
//
// At most maxProxyProbes nodes are asked (the mode is the cluster's, and a
// firewalled node costs a timeout). It returns the mode ("" when nothing
// said) and where it came from, or why it is unknown.
func (k *Kube) readProxyMode(ctx context.Context, nodes []corev1.Node) (mode, from string) {
	probe := k.opt.ProxyModeProbe
	if probe == nil {
		probe = httpProxyMode
	}
	var tried []string
	asked := 0
	for _, n := range nodes {
		ip := nodeInfo(n).Address
		if ip == "" || asked == maxProxyProbes {
			continue
		}
		asked++
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
	var why []string
	if len(tried) > 0 {
		why = append(why, "no node answered on 10249/proxyMode ("+strings.Join(tried, "; ")+")")
	} else {
		why = append(why, "no node address to ask on 10249/proxyMode")
	}
	m, src, err := proxyModeFromConfigMaps(ctx, k.cs)
	if m != "" {
		return m, src
	}
	why = append(why, err.Error())
	m, src, err = proxyModeFromPods(ctx, k.cs)
	if m != "" {
		return m, src
	}
	why = append(why, err.Error())
	return "", "unknown: " + strings.Join(why, "; ")
}

// maxProxyProbes bounds the nodes readProxyMode asks.
const maxProxyProbes = 3

// proxyModeFromConfigMaps reads mode: from kube-system's kube-proxy*
// ConfigMaps.
func proxyModeFromConfigMaps(ctx context.Context, cs kubernetes.Interface) (mode, from string, err error) {
	var cms []corev1.ConfigMap
	list, lerr := cs.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	if lerr == nil {
		cms = list.Items
	} else if cm, gerr := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{}); gerr == nil {
		cms = []corev1.ConfigMap{*cm}
	} else {
		return "", "", fmt.Errorf("kube-system's kube-proxy ConfigMaps unread (%s)", describe(lerr, "list", "configmaps"))
	}
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	for _, cm := range cms {
		if !strings.HasPrefix(cm.Name, "kube-proxy") {
			continue
		}
		for _, key := range sortedKeys(cm.Data) {
			if m, ok := modeFromConfig(cm.Data[key]); ok {
				return m, fmt.Sprintf("ConfigMap kube-system/%s (%s)", cm.Name, key), nil
			}
		}
	}
	return "", "", errors.New("kube-system has no kube-proxy ConfigMap with a KubeProxyConfiguration")
}

// proxyModeFromPods reads --proxy-mode from the command line of kube-proxy's
// pods in kube-system; a kube-proxy without the flag and without --config
// runs its default, iptables.
func proxyModeFromPods(ctx context.Context, cs kubernetes.Interface) (mode, from string, err error) {
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", fmt.Errorf("kube-system's pods unread (%s)", describe(err, "list", "pods"))
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "kube-proxy") && p.Labels["k8s-app"] != "kube-proxy" {
			continue
		}
		for _, c := range p.Spec.Containers {
			if m, ok := modeFromFlags(append(append([]string(nil), c.Command...), c.Args...)); ok {
				return m, fmt.Sprintf("the command line of pod kube-system/%s", p.Name), nil
			}
		}
	}
	return "", "", errors.New("no kube-proxy pod in kube-system names --proxy-mode")
}

// modeFromFlags finds --proxy-mode in a kube-proxy command line; without
// it and without --config (whose file ctrperf cannot read), the mode is
// kube-proxy's default on Linux, iptables. Arguments may be joined in a
// shell command ("kube-proxy --proxy-mode=ipvs ...").
func modeFromFlags(argv []string) (string, bool) {
	var words []string
	for _, a := range argv {
		words = append(words, strings.Fields(a)...)
	}
	isProxy, config := false, false
	for i, w := range words {
		if strings.HasSuffix(w, "kube-proxy") {
			isProxy = true
		}
		switch {
		case strings.HasPrefix(w, "--proxy-mode="):
			if m := strings.Trim(strings.TrimPrefix(w, "--proxy-mode="), `"'`); m != "" {
				return m, true
			}
			return "iptables", true
		case w == "--proxy-mode" && i+1 < len(words):
			return strings.Trim(words[i+1], `"'`), true
		case w == "--config" || strings.HasPrefix(w, "--config="):
			config = true
		}
	}
	if isProxy && !config {
		return "iptables", true
	}
	return "", false
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

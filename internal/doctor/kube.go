package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"ctrperf/internal/results"
)

// WithKube replaces how the clusters are found and described (tests).
func WithKube(f func(ctx context.Context) ([]results.KubeCluster, []error)) Option {
	return func(o *options) { o.kube = f }
}

func collectKube(ctx context.Context, o options, f *Facts) error {
	find := o.kube
	if find == nil {
		find = kubeClusters
	}
	rs, errs := find(ctx)
	f.Kubernetes = rs
	if len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return nil
}

// writeKube renders the clusters' lines of WriteText.
func (f *Facts) writeKube(tw *tabwriter.Writer) {
	p := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	if len(f.Kubernetes) == 0 {
		if labKubeconfig == "" {
			p("kubernetes", "not looked for: this ctrperf was built without runtime kubernetes (make demo's build; make build links it)")
			return
		}
		p("kubernetes", "no cluster (no kubeconfig in $KUBECONFIG, ~/.kube/config or %s; `make kube-up` starts the lab's)", labKubeconfig)
		return
	}
	for _, r := range f.Kubernetes {
		if !r.Answers {
			p("kubernetes", "%s (context %s) does not answer: %s", r.Server, r.Context, r.Error)
			continue
		}
		p("kubernetes", "%s at %s (context %s)", r.Version, r.Server, r.Context)
		p("  kube-proxy", "%s", orText(r.ProxyMode, "unknown")+" ("+r.ProxyModeFrom+")")
		// Keys no wider than the others' (one tabwriter aligns them all).
		for i, n := range r.Nodes {
			ready := "Ready"
			if !n.Ready {
				ready = "NotReady"
			}
			k := ""
			if i == 0 {
				k = "  nodes"
			}
			p(k, "%s %s, %s, kubelet %s, %s, CPU manager %s", n.Name, ready, n.Address, n.Kubelet, n.Runtime, orText(r.CPUManager[n.Name], "unreadable (/configz)"))
		}
		if len(r.Namespaces) > 0 {
			ns := append([]string(nil), r.Namespaces...)
			sort.Strings(ns)
			p("  namespaces", "%s (ctrperf's; `ctrperf clean` removes those whose owner is gone)", strings.Join(ns, ", "))
		}
	}
}

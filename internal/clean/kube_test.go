//go:build !nokube

package clean

import (
	"io"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/kube"
	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
)

// TestKeepNamespace: what clean decides for a namespace of each kind of
// owner, unforced and forced (issue 35 item 3: a host that is gone left
// namespaces that not even --force removed; a reboot left pids that
// might name a new process).
func TestKeepNamespace(t *testing.T) {
	self := kube.Owner{Host: "ci", MachineID: "m-here", BootID: "b-now", PID: 100}
	fs := kernel.NewFS(kernel.Roots{Proc: t.TempDir()}) // no process runs
	ns := func(f func(*kube.Namespace)) kube.Namespace {
		n := kube.Namespace{Name: kube.NamespaceName("web-0a1b2c"), Session: "web-0a1b2c", Host: "ci", MachineID: "m-here", BootID: "b-now", PID: 42}
		f(&n)
		return n
	}
	tests := []struct {
		desc             string
		n                kube.Namespace
		keep, keepForced bool
		live             bool // as dry-run lists it
	}{
		{"here, this boot, owner gone", ns(func(*kube.Namespace) {}), false, false, false},
		{"here, an earlier boot", ns(func(n *kube.Namespace) { n.BootID = "b-before" }), false, false, false},
		{"another machine, same hostname", ns(func(n *kube.Namespace) { n.MachineID = "m-there" }), true, false, true},
		{"a host that is gone (no machine id)", ns(func(n *kube.Namespace) { n.MachineID, n.Host = "", "gone-host" }), true, false, true},
	}
	for _, tt := range tests {
		for _, force := range []bool{false, true} {
			own := engine.NewOwnership(owner.Owners{}, force)
			var warn strings.Builder
			got := keepNamespace(self, own, fs, &warn)(tt.n)
			want := tt.keep
			if force {
				want = tt.keepForced
			}
			if got != want {
				t.Errorf("%s (force %v): keep %v, want %v", tt.desc, force, got, want)
			}
			found := own.Found()
			if len(found) != 1 || found[0].Live != tt.live {
				t.Errorf("%s (force %v): found %+v, want one object, live %v", tt.desc, force, found, tt.live)
			}
			if got && !strings.Contains(warn.String(), "--force") {
				t.Errorf("%s: kept without saying how to remove it: %q", tt.desc, warn.String())
			}
		}
	}
	// Without an ownership to decide, another machine's namespace stays.
	if !keepNamespace(self, nil, fs, io.Discard)(ns(func(n *kube.Namespace) { n.MachineID = "m-there" })) {
		t.Error("nil ownership removed another machine's namespace")
	}
}

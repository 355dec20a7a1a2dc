package kubelab

import (
	"os/exec"
	"strings"
	"testing"
)

// forwardRules checks that the FORWARD rules kube-up installs accept only
// the lab cluster's own traffic, frames bridged between its nodes on
// ctrperf-kube0, ahead of DOCKER-USER (issue 35 item 11: they accepted
// everything entering or leaving the bridge). A subtest of
// TestLabClusterKube, while its cluster is up: a test of its own ran after
// it, when CTRPERF_KUBE_LEAVE_DOWN=1 had left the cluster down.
func forwardRules(t *testing.T) {
	out, err := exec.Command("iptables", "-w", "-S", "CTRPERF-KUBE").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S CTRPERF-KUBE (is the lab cluster up? make kube-up): %v: %s", err, out)
	}
	var rules int
	for _, r := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(r, "-A ") {
			continue
		}
		rules++
		if !strings.Contains(r, "-i ctrperf-kube0") || !strings.Contains(r, "-o ctrperf-kube0") {
			t.Errorf("rule %q: want only frames from the bridge to the bridge accepted", r)
		}
	}
	if rules == 0 {
		t.Error("chain CTRPERF-KUBE has no rule: the cluster's own traffic is dropped by Docker's FORWARD policy")
	}
}

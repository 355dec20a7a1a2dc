package bench

import (
	"strings"
	"testing"
)

// The leftover check of the SSH cut test sets aside what another lab
// test's live agent owns on lab-sut, as CI's run of 2026-11-29 listed it
// (TestRealPathLab beside it), and keeps everything of its own run.
func TestNotOtherRunsDropsTheirLiveObjects(t *testing.T) {
	out := `live     container ctrperf-lab-path-4cd156-002-app (owner: pid 26258 (/root/.cache/ctrperf/agent/5b3a/ctrperf agent), started 2026-11-29 07:58:59 on lab-sut)
live     network ctrperf-lab-path-4cd156-002 (owner: pid 26258 (/root/.cache/ctrperf/agent/5b3a/ctrperf agent), started 2026-11-29 07:58:59 on lab-sut)
live     iptables chain filter CTRPERF-ADMIT-c251819 of run lab-path-4cd156-002 (owner: pid 26258 (/root/.cache/ctrperf/agent/5b3a/ctrperf agent), started 2026-11-29 07:58:59 on lab-sut)
nothing to clean
agent-lab-path-4cd156-26258.json
agent-lab-path-4cd156-26258.lock`
	rest, pids := notOtherRuns(t, out, "lab-cut")
	if strings.TrimSpace(rest) != "nothing to clean" || len(pids) != 1 || pids[0] != 26258 {
		t.Errorf("rest %q, pids %v", rest, pids)
	}
	// The run's own objects and records stay.
	own := "live     container ctrperf-lab-cut-1-app (owner: pid 7 (ctrperf agent), started 2026-11-29 on lab-sut)\nagent-lab-cut-1a2b-7.json"
	if rest, _ := notOtherRuns(t, own, "lab-cut"); rest != own {
		t.Errorf("own run's lines dropped: %q", rest)
	}
}

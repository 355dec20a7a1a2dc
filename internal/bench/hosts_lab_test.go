package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/lab"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

var labSSHConfig = lab.SSHConfig

// cutOnMeasure kills the sshd child of the SUT host's agent session the
// first time a run starts measuring: the SSH connection drops mid-run.
type cutOnMeasure struct {
	Discard
	t     *testing.T
	mu    sync.Mutex
	hosts map[string]*remote.Host
	done  bool
	cut   int // the agent's pid whose session was cut
}

func (c *cutOnMeasure) Phase(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p != "measuring" || c.done {
		return
	}
	c.done = true
	h := c.hosts["lab-sut"]
	// This test's own agent: other lab tests of the package run beside it.
	if _, err := lab.CutSessionOf(lab.Sut, h.Hello.PID, 10*time.Second); err != nil {
		c.t.Errorf("cut lab-sut's session: %v", err)
	}
	c.cut = h.Hello.PID
}

// TestHostsSSHCutMidRunLab runs the web workload's bare-metal baseline on
// lab-sut with the load on lab-load, and cuts the SUT's SSH session while
// the first run measures: that run is failed, the second runs on a new
// session, and nothing of ctrperf is left on lab-sut.
func TestHostsSSHCutMidRunLab(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	lab.Require(t)
	testenv.Ctrperf(t)
	src := `
name: lab-cut
workload: web
ssh_config: ` + labSSHConfig + `
hosts: {sut: lab-sut, load: lab-load}
load: {rate: 20}
app: {db: sqlite, hash_cost: 6}
repetitions: 2
warmup: 500ms
duration: 1500ms
seed: 1
baseline: bare-metal
configurations:
  - name: bare-metal
    runtime: host
`
	p, err := ParsePlan(filepath.Join(t.TempDir(), "lab-cut.yaml"), []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr := &cutOnMeasure{t: t, hosts: map[string]*remote.Host{}}
	dial := func(ctx context.Context, d plan.Dest, o remote.SSHOptions) (*remote.Host, error) {
		h, err := remote.Dial(ctx, d, o)
		if err == nil {
			pr.mu.Lock()
			pr.hosts[d.Raw] = h
			pr.mu.Unlock()
		}
		return h, err
	}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), p, Options{Out: out, Engines: &Engines{RunID: "lab-cut"}, HostDialer: dial, Progress: pr,
		Observers: SystemObservers(), TeardownTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, out)
	if len(recs) != 2 || recs[0].Status != results.StatusFailed || recs[1].Status != results.StatusOK {
		for _, r := range recs {
			t.Logf("%s %s %s", r.RunID, r.Status, r.Error)
		}
		t.Fatalf("summary %+v: want the cut run failed and the next ok", sum)
	}
	t.Logf("cut run: %s", recs[0].Error)
	if !strings.Contains(recs[0].Error, "lab-sut") {
		t.Errorf("failed run's error %q does not name the host", recs[0].Error)
	}
	if r := recs[1]; r.Hosts == nil || r.Hosts.SUT.Hostname != "lab-sut" || r.Hosts.Load.Hostname != "lab-load" || r.System == nil || !hasNet(r.System, "eth0") {
		t.Errorf("second run: hosts %+v, samples %v", r.Hosts, r.System != nil)
	}
	// The cut agent tore its run down and went; nothing is left.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pr.cut)); err != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pr.cut)); err == nil {
		t.Errorf("the cut agent %d still runs", pr.cut)
	}
	h := pr.hosts["lab-sut"]
	check, err := exec.Command("ssh", "-F", labSSHConfig, "lab-sut", h.Binary+" clean --dry-run; ls /run/ctrperf/owners 2>/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("check lab-sut: %v: %s", err, check)
	}
	// No agent nor service of ctrperf's in lab-sut's namespaces (the lab shares this
	// machine's pid namespace: pgrep there would see everyone's).
	pids, err := lab.Processes(lab.Sut)
	if err != nil {
		t.Fatal(err)
	}
	rest, others := notOtherRuns(t, notLabSuts(t, string(check), pids), "lab-cut")
	if s := strings.TrimSpace(rest); s != "nothing to clean" {
		t.Errorf("left on lab-sut:\n%s", s)
	}
	for _, pid := range pids {
		if slices.Contains(others, pid) {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if c := string(b); strings.Contains(c, remote.CacheDir) || strings.Contains(c, "__ticketd") {
			t.Errorf("left on lab-sut: pid %d %q", pid, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// liveGeneratorRe is a dry-run clean's line for a load generator's group
// that still holds its process.
var liveGeneratorRe = regexp.MustCompile(`^live\s+cgroup \S*/` + regexp.QuoteMeta(engine.GeneratorCgroupPrefix) + `([0-9]+) `)

// notLabSuts drops from a dry-run clean on lab-sut the live load
// generators' groups of processes outside lab-sut: lab-sut shares this
// machine's cgroup tree, where the tests of other packages running beside
// this one (a noisy drive) hold groups of their own.
func notLabSuts(t *testing.T, out string, labSutPids []int) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if m := liveGeneratorRe.FindStringSubmatch(l); m != nil {
			if pid, _ := strconv.Atoi(m[1]); !slices.Contains(labSutPids, pid) {
				t.Logf("not lab-sut's: %s", l)
				continue
			}
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// otherAgentRe is an owner record of an agent's session on a host
// (/run/ctrperf/owners): agent-<run id>-<hash>-<pid>.{json,lock}.
var otherAgentRe = regexp.MustCompile(`^agent-(\S+)-([0-9]+)\.(json|lock)$`)

// liveOwnedRe is a dry-run clean's line for a live object and its
// owner's pid.
var liveOwnedRe = regexp.MustCompile(`^live\s.*\(owner: pid ([0-9]+) `)

// notOtherRuns drops from a listing of lab-sut the owner records of
// other runs' agents (the lab tests of this package run side by side, so
// TestRealPathLab's agent may well be alive), and the live objects those
// agents own (its run's containers, network and admit chain), and
// returns their pids.
func notOtherRuns(t *testing.T, out, runID string) (string, []int) {
	var keep []string
	var pids []int
	lines := strings.Split(out, "\n")
	for _, l := range lines {
		if m := otherAgentRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil && !strings.HasPrefix(m[1], runID+"-") {
			if pid, err := strconv.Atoi(m[2]); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	for _, l := range lines {
		if m := otherAgentRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil && !strings.HasPrefix(m[1], runID+"-") {
			t.Logf("another run's: %s", l)
			continue
		}
		if m := liveOwnedRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			if pid, err := strconv.Atoi(m[1]); err == nil && slices.Contains(pids, pid) {
				t.Logf("another run's: %s", l)
				continue
			}
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n"), pids
}

func hasNet(s *results.Series, iface string) bool {
	for _, smp := range s.Samples {
		if _, ok := smp.Net[iface]; ok {
			return true
		}
	}
	return false
}

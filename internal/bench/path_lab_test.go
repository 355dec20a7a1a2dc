package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/lab"
	"ctrperf/internal/owner"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

// checkPathOnMeasure looks at lab-sut and lab-load once per run, when the
// run starts measuring: the load host's connections must reach the
// service with nothing of ctrperf's between them, and this machine (not
// the load host) must be turned away.
type checkPathOnMeasure struct {
	Discard
	t  *testing.T
	mu sync.Mutex
	// per measured run: what was seen
	seen []pathSeen
}

type pathSeen struct {
	dests        []string // the admit chain's destinations
	agentListens []string // listening sockets of a ctrperf agent on lab-sut
	refused      []string // dials from this machine that were reset
	notRefused   []string // dials from this machine that were not
	routes       string   // lab-load's ctrperf routes
}

// admitDestRe reads a destination of this test's runs (lab-path-…) in
// `iptables -S`, which prints a /32 without its length.
var admitDestRe = regexp.MustCompile(`--ctorigdst ([0-9.]+)(?:/32)? --ctorigdstport ([0-9]+) .*ctrperf\.run=lab-path-`)

func (c *checkPathOnMeasure) Phase(p string) {
	if p != "measuring" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var s pathSeen
	rules, err := lab.Exec(ctx, lab.Sut, "iptables", "-w", "5", "-t", "filter", "-S")
	if err != nil {
		c.t.Errorf("lab-sut's rules: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range admitDestRe.FindAllStringSubmatch(string(rules), -1) { // one per line: .* stops at a newline
		d := net.JoinHostPort(m[1], m[2])
		if !seen[d] {
			seen[d] = true
			s.dests = append(s.dests, d)
		}
	}
	// Every listening socket on lab-sut with its process: none may be an
	// agent's (the relay of fd00570 listened there for every endpoint).
	ss, err := lab.Exec(ctx, lab.Sut, "ss", "-Hltnp")
	if err != nil {
		c.t.Errorf("ss on lab-sut: %v", err)
	}
	for _, l := range strings.Split(string(ss), "\n") {
		for _, m := range regexp.MustCompile(`pid=([0-9]+)`).FindAllStringSubmatch(l, -1) {
			b, _ := os.ReadFile("/proc/" + m[1] + "/cmdline")
			args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			if len(args) > 1 && strings.Contains(args[0], remote.CacheDir) && args[1] == "agent" {
				s.agentListens = append(s.agentListens, l)
			}
		}
	}
	// This machine is not the load host: 198.19.200.1 on the lab bridge.
	// A container's own address is routed through lab-sut for the dial, as
	// the load host's is (this machine has no route there: its default
	// route leads off the machine, where nothing may be dialled).
	for _, d := range s.dests {
		host, _, _ := net.SplitHostPort(d)
		if !strings.HasPrefix(host, "198.19.200.") {
			if out, err := exec.Command("ip", "route", "add", host+"/32", "via", lab.Addr[lab.Sut]).CombinedOutput(); err != nil {
				c.t.Errorf("route %s via lab-sut on this machine: %v: %s", host, err, out)
				continue
			}
			defer func() { _ = exec.Command("ip", "route", "del", host+"/32", "via", lab.Addr[lab.Sut]).Run() }()
		}
		conn, err := net.DialTimeout("tcp", d, 3*time.Second)
		if err == nil {
			conn.Close()
			s.notRefused = append(s.notRefused, d+": connected")
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			s.refused = append(s.refused, d)
		} else {
			s.notRefused = append(s.notRefused, fmt.Sprintf("%s: %v", d, err))
		}
	}
	routes, _ := lab.Exec(ctx, lab.Load, "ip", "route", "show", "proto", "199")
	s.routes = strings.TrimSpace(string(routes)) // other packages' lab runs may add theirs
	c.mu.Lock()
	c.seen = append(c.seen, s)
	c.mu.Unlock()
}

// TestRealPathLab runs bare metal, a published port and the container's
// own address on lab-sut with the load on lab-load: during each measured
// window no ctrperf agent listens on lab-sut, the SUT's admit chain names
// the endpoints, a connection from this machine is refused, and lab-load
// routes to the container through lab-sut; each record's path counts the
// load host's packets and the refused ones; afterwards neither host keeps
// a chain, a route or a route record.
func TestRealPathLab(t *testing.T) {
	t.Parallel() // see "Parallel tests" in integration_test.go
	lab.Require(t)
	testenv.Ctrperf(t)
	src := `
name: lab-path
workload: web
ssh_config: ` + labSSHConfig + `
hosts: {sut: lab-sut, load: lab-load}
load: {rate: 20}
app: {db: sqlite, hash_cost: 6}
repetitions: 1
warmup: 500ms
duration: 1500ms
seed: 1
baseline: bare-metal
configurations:
  - name: bare-metal
    runtime: host
  - name: published
    runtime: docker
    network: published
  - name: container-ip
    runtime: docker
    network: container-ip
`
	p, err := ParsePlan(filepath.Join(t.TempDir(), "lab-path.yaml"), []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr := &checkPathOnMeasure{t: t}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), p, Options{Out: out, Engines: &Engines{RunID: "lab-path"}, Progress: pr,
		Observers: SystemObservers(), TeardownTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, out)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Status != results.StatusOK {
			t.Errorf("%s: %s %s", r.Config, r.Status, r.Error)
			continue
		}
		np := r.Result.Path
		if np == nil || np.Kind != results.PathDirect || np.SUTAddr != lab.Addr[lab.Sut] || np.LoadAddr != lab.Addr[lab.Load] {
			t.Errorf("%s: path %+v, want direct from %s to %s", r.Config, np, lab.Addr[lab.Load], lab.Addr[lab.Sut])
			continue
		}
		if np.AdmittedPackets == 0 || np.RefusedPackets == 0 || np.CountError != "" {
			t.Errorf("%s: admitted %d, refused %d (%s): want the load's packets and this machine's refused dial counted", r.Config, np.AdmittedPackets, np.RefusedPackets, np.CountError)
		}
		for _, d := range np.Dialled {
			host, _, _ := net.SplitHostPort(d)
			want := lab.Addr[lab.Sut]
			if r.Config == "container-ip" {
				want = "" // the container's own address, on lab-sut's bridges
			}
			if want != "" && host != want {
				t.Errorf("%s: the load host dialled %s, want the SUT's address %s", r.Config, d, want)
			}
		}
		if r.Config == "container-ip" && len(np.Routes) == 0 {
			t.Errorf("container-ip: no route recorded")
		}
	}
	pr.mu.Lock()
	seen := pr.seen
	pr.mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("looked %d times, want once per run", len(seen))
	}
	for i, s := range seen {
		if len(s.dests) == 0 {
			t.Errorf("run %d: no admit chain on lab-sut while measuring", i+1)
		}
		if len(s.agentListens) > 0 {
			t.Errorf("run %d: a ctrperf agent listens on lab-sut: %v", i+1, s.agentListens)
		}
		if len(s.notRefused) > 0 || len(s.refused) == 0 {
			t.Errorf("run %d: from this machine refused %v, not refused %v", i+1, s.refused, s.notRefused)
		}
	}
	ctrRuns := 0
	for _, s := range seen {
		if len(s.dests) == 0 || strings.HasPrefix(s.dests[0], "198.19.200.") {
			continue
		}
		ctrRuns++
		host, _, _ := net.SplitHostPort(s.dests[0])
		if !strings.Contains(s.routes, host+" via "+lab.Addr[lab.Sut]) {
			t.Errorf("container-ip: lab-load's routes while measuring: %q, want %s via %s", s.routes, host, lab.Addr[lab.Sut])
		}
	}
	if ctrRuns != 1 {
		t.Errorf("%d measured runs dialled a container's own address, want 1", ctrRuns)
	}
	// Nothing of this plan's runs left (other tests may run on the lab
	// beside this one): no chain on lab-sut, no route nor record on lab-load.
	ctx := context.Background()
	rules, _ := lab.Exec(ctx, lab.Sut, "iptables", "-w", "5", "-t", "filter", "-S")
	if strings.Contains(string(rules), "ctrperf.run=lab-path-") {
		t.Errorf("lab-sut keeps an admit chain of this plan:\n%s", rules)
	}
	routes, _ := lab.Exec(ctx, lab.Load, "ip", "route", "show", "proto", "199")
	for _, r := range recs {
		if r.Result == nil || r.Result.Path == nil {
			continue
		}
		for _, rt := range r.Result.Path.Routes {
			dst, _, _ := strings.Cut(rt, "/")
			if strings.Contains(string(routes), dst+" via") {
				t.Errorf("lab-load keeps the route %s", rt)
			}
		}
	}
	left, _ := lab.Exec(ctx, lab.Load, "sh", "-c", "ls /run/ctrperf/routes 2>/dev/null || true")
	if strings.Contains(string(left), "lab-path-") {
		t.Errorf("lab-load keeps route records: %s", left)
	}
}

// TestKillLeavesNoPathLab: a two-host run of the container's own address
// is killed the hard way — both agents SIGKILLed (their watchdogs never
// run), then ctrperf — while lab-load routes to the container and lab-sut
// admits only lab-load; `ctrperf clean --hosts PLAN` then removes the
// route, its record and the admit chain, and leaves nothing of the plan on
// either host. The clean is limited to the run (--run): the lab's other
// tests run beside this one.
func TestKillLeavesNoPathLab(t *testing.T) {
	t.Parallel()
	k := startPathRun(t, "lab-kill")
	run, routeRecord := k.cmd, k.routeRecord
	ctx := k.ctx
	// The agents of this plan (their owner records name its session), then ctrperf.
	for _, h := range []string{lab.Sut, lab.Load} {
		root, err := lab.Root(h, owner.DefaultDir)
		must(t, err)
		list, err := owner.Dir{Path: root}.List()
		must(t, err)
		killed := 0
		for _, s := range list {
			if s.Record.Kind == agent.KindAgent && strings.HasPrefix(s.Record.Session, "lab-kill-") && s.Live {
				must(t, syscall.Kill(s.Record.PID, syscall.SIGKILL))
				killed++
				// The killed agent's record stays until a full clean reaps
				// it; this test cleans only its run (lab tests run beside
				// it), so it reaps the record itself.
				dir, path := owner.Dir{Path: root}, s.Path
				t.Cleanup(func() { reapDead(t, dir, path) })
			}
		}
		if killed != 1 {
			t.Fatalf("%s: killed %d agents of the plan, want 1 (%+v)", h, killed, list)
		}
	}
	must(t, run.Process.Kill())
	_ = run.Wait()
	routeRecordAfterKill := routeRecord()
	if routeRecordAfterKill == "" {
		t.Fatal("the route went before clean: the kill was not hard enough to test clean")
	}
	chains, _ := lab.Exec(ctx, lab.Sut, "iptables", "-w", "5", "-S")
	if !strings.Contains(string(chains), "ctrperf.run=lab-kill-") {
		t.Fatalf("no admit chain of the plan on lab-sut after the kill:\n%s", chains)
	}

	runID := strings.TrimSuffix(strings.Fields(routeRecordAfterKill)[0], ".json")
	clean := exec.CommandContext(ctx, testenv.Ctrperf(t), "--owners-dir", k.owners, "clean", "--hosts", k.planFile, "--run", runID)
	out, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("clean --hosts: %v\n%s", err, out)
	}
	for _, want := range []string{"lab-load: removed route", "lab-sut: removed iptables chain filter " + engine.AdmitPrefix} {
		if !strings.Contains(string(out), want) {
			t.Errorf("clean --hosts did not say %q:\n%s", want, out)
		}
	}
	if r := routeRecord(); r != "" {
		t.Errorf("lab-load keeps the route record %s", r)
	}
	chains, _ = lab.Exec(ctx, lab.Sut, "iptables", "-w", "5", "-S")
	if strings.Contains(string(chains), "ctrperf.run=lab-kill-") {
		t.Errorf("lab-sut keeps the plan's admit chain:\n%s", chains)
	}
	routes, _ := lab.Exec(ctx, lab.Load, "ip", "route", "show", "proto", "199")
	for _, l := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, "lab-load: removed route "); ok {
			dst, _, _ := strings.Cut(rest, " ")
			if strings.Contains(string(routes), dst+" via") {
				t.Errorf("lab-load keeps the route to %s:\n%s", dst, routes)
			}
		}
	}
}

// reapDead removes the owner record at path once its owner is gone.
func reapDead(t *testing.T, dir owner.Dir, path string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := dir.List()
		if err != nil {
			t.Errorf("owner records: %v", err)
			return
		}
		for _, st := range list {
			if st.Path == path && !st.Live {
				if err := dir.Reap(st); err != nil {
					t.Errorf("reap %s: %v", path, err)
				}
				return
			}
			if st.Path == path {
				break
			}
		}
		if !slices.ContainsFunc(list, func(st owner.Status) bool { return st.Path == path }) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("the killed agent's record %s still reads live", path)
}

// pathRun is a two-host run of a container's own address, started as a
// child `ctrperf bench run` and waited for until lab-load has its route.
type pathRun struct {
	cmd         *exec.Cmd
	out         *bytes.Buffer
	ctx         context.Context
	planFile    string
	owners      string
	routeRecord func() string // lab-load's route records of the plan
}

func startPathRun(t *testing.T, name string) *pathRun {
	lab.Require(t)
	bin := testenv.Ctrperf(t)
	dir := t.TempDir()
	r := &pathRun{planFile: filepath.Join(dir, name+".yaml"), owners: filepath.Join(dir, "owners"), out: &bytes.Buffer{}}
	must(t, os.WriteFile(r.planFile, []byte(`name: `+name+`
workload: web
ssh_config: `+lab.SSHConfig+`
hosts: {sut: lab-sut, load: lab-load}
load: {rate: 10}
app: {db: sqlite, hash_cost: 6}
repetitions: 1
warmup: 1s
duration: 60s
seed: 1
baseline: container-ip
configurations:
  - name: container-ip
    runtime: docker
    network: container-ip
`), 0o600))
	r.cmd = exec.Command(bin, "--owners-dir", r.owners, "bench", "run", r.planFile, "--out", filepath.Join(dir, "out"), "--allow-concurrent")
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	must(t, r.cmd.Start())
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.routeRecord = func() string {
		out, _ := lab.Exec(ctx, lab.Load, "sh", "-c", "ls /run/ctrperf/routes 2>/dev/null | grep '^"+name+"-' || true")
		return strings.TrimSpace(string(out))
	}
	for r.routeRecord() == "" {
		if ctx.Err() != nil {
			t.Fatalf("no route of the plan on lab-load in time:\n%s", r.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return r
}

// TestInterruptLeavesNoPathLab: Ctrl-C during a two-host run of a
// container's own address; ctrperf tears the run down on its way out
// (status 130), and neither host keeps the plan's chain, route or record,
// with no clean.
func TestInterruptLeavesNoPathLab(t *testing.T) {
	t.Parallel()
	r := startPathRun(t, "lab-intr")
	must(t, r.cmd.Process.Signal(syscall.SIGINT))
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("bench run after SIGINT: %v, want exit status 130\n%s", err, r.out.String())
	}
	if s := r.routeRecord(); s != "" {
		t.Errorf("lab-load keeps the route record %s", s)
	}
	routes, _ := lab.Exec(r.ctx, lab.Load, "ip", "route", "show", "proto", "199")
	chains, _ := lab.Exec(r.ctx, lab.Sut, "iptables", "-w", "5", "-S")
	if strings.Contains(string(chains), "ctrperf.run=lab-intr-") {
		t.Errorf("lab-sut keeps the plan's admit chain:\n%s", chains)
	}
	t.Logf("lab-load's ctrperf routes after the interrupted run (other tests' may be there): %q", strings.TrimSpace(string(routes)))
}

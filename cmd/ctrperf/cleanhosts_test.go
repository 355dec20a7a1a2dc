package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"ctrperf/internal/agent"
	"ctrperf/internal/engine"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
	"ctrperf/internal/report"
	"ctrperf/internal/results"
	"ctrperf/internal/testenv"
)

func TestCleanTargets(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.SetErr(&bytes.Buffer{})
	dests, cfg, err := cleanTargets(cmd, cleanHostsFlags{hosts: "lab-smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dests) != 2 || dests[0].Raw != "lab-sut" || dests[1].Raw != "lab-load" || cfg != "/var/lib/ctrperf/lab/ssh_config" {
		t.Errorf("lab-smoke: %v, %q", dests, cfg)
	}
	sshCfg := filepath.Join(t.TempDir(), "ssh_config")
	mustDo(t, os.WriteFile(sshCfg, nil, 0o600))
	dests, cfg, err = cleanTargets(cmd, cleanHostsFlags{hosts: "sut=a@h1,load=a@h1", sshConfig: sshCfg})
	if err != nil || len(dests) != 1 || dests[0].Host != "h1" || cfg != sshCfg {
		t.Errorf("one host in both roles: %v, %q, %v", dests, cfg, err)
	}
	for _, tt := range []struct {
		f    cleanHostsFlags
		want string
	}{
		{cleanHostsFlags{hosts: "smoke"}, "names no host but this machine"},
		{cleanHostsFlags{hosts: "sut=local"}, "names no host but this machine"},
		{cleanHostsFlags{hosts: "sut=-oProxyCommand=x"}, "starts with '-'"},
		{cleanHostsFlags{hosts: "lab-smoke", sshConfig: filepath.Join(t.TempDir(), "none")}, "--ssh-config"},
	} {
		if _, _, err := cleanTargets(cmd, tt.f); err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("cleanTargets(%+v) = %v (exit %d), want a usage error with %q", tt.f, err, exitcode.Of(err), tt.want)
		}
	}
	if _, _, err := cleanTargets(cmd, cleanHostsFlags{hosts: "no-such-plan"}); err == nil {
		t.Error("an unknown plan: want an error")
	}
}

type fakeClean struct {
	res    agent.CleanResult
	err    error
	got    agent.CleanParams
	closed bool
}

func (f *fakeClean) Clean(_ context.Context, p agent.CleanParams) (agent.CleanResult, error) {
	f.got = p
	return f.res, f.err
}
func (f *fakeClean) Close(context.Context) error { f.closed = true; return nil }

// Each host is cleaned through its own agent with clean's flags, its lines
// named by the host; an unreachable one is said and the next still cleaned.
func TestCleanHosts(t *testing.T) {
	sut, _ := plan.ParseDest("lab-sut")
	load, _ := plan.ParseDest("lab-load")
	gone, _ := plan.ParseDest("root@198.19.200.9")
	sessions := map[string]*fakeClean{
		"lab-sut": {res: agent.CleanResult{Removed: []string{"container ctrperf-smoke-1a2b-r3-web", "network ctrperf-smoke-1a2b-r3"},
			Found: []engine.Object{{What: "container ctrperf-other-9f9f-r1-web", Owner: "pid 77", Live: true, Kept: true}}}},
		"lab-load": {},
	}
	var dialed []string
	dial := func(_ context.Context, d plan.Dest, o remote.SSHOptions) (cleanSession, error) {
		dialed = append(dialed, d.Raw)
		if o.Config != "/lab/ssh_config" || !o.AcceptNewHostKey {
			t.Errorf("dial options %+v", o)
		}
		s, ok := sessions[d.Raw]
		if !ok {
			return nil, errors.New("host unreachable: ssh: connect to host 198.19.200.9 port 22: No route to host")
		}
		return s, nil
	}
	o := remote.SSHOptions{Config: "/lab/ssh_config", AcceptNewHostKey: true}
	var out, errOut bytes.Buffer
	err := cleanHosts(context.Background(), &out, &errOut, []plan.Dest{sut, gone, load}, o, cleanFlags{runID: "smoke-1a2b-r3"}, dial)
	if err == nil || !strings.Contains(err.Error(), "could not clean root@198.19.200.9") {
		t.Errorf("err = %v", err)
	}
	if strings.Join(dialed, " ") != "lab-sut root@198.19.200.9 lab-load" {
		t.Errorf("dialed %v", dialed)
	}
	want := "lab-sut: removed container ctrperf-smoke-1a2b-r3-web\nlab-sut: removed network ctrperf-smoke-1a2b-r3\nlab-sut: kept live container ctrperf-other-9f9f-r1-web (owner: pid 77)\nlab-load: nothing to clean\n"
	if out.String() != want {
		t.Errorf("out:\n%s\nwant:\n%s", out.String(), want)
	}
	if !strings.Contains(errOut.String(), "ctrperf clean: root@198.19.200.9: host unreachable") {
		t.Errorf("stderr: %s", errOut.String())
	}
	s := sessions["lab-sut"]
	if s.got.RunID != "smoke-1a2b-r3" || s.got.DryRun || s.got.Force || !s.closed || !sessions["lab-load"].closed {
		t.Errorf("clean params %+v, closed %v", s.got, s.closed)
	}

	// A dry run lists, marks live ones and removes nothing.
	out.Reset()
	sessions["lab-sut"].res = agent.CleanResult{Found: []engine.Object{{What: "container a", Owner: "none"}, {What: "container b", Owner: "pid 9", Live: true}}}
	if err := cleanHosts(context.Background(), &out, &errOut, []plan.Dest{sut}, o, cleanFlags{dryRun: true, force: true}, dial); err != nil {
		t.Fatal(err)
	}
	if out.String() != "lab-sut: orphaned container a (owner: none)\nlab-sut: live     container b (owner: pid 9)\n" || !sessions["lab-sut"].got.DryRun || !sessions["lab-sut"].got.Force {
		t.Errorf("dry run:\n%s", out.String())
	}
	// What the agent could not remove fails the clean.
	sessions["lab-sut"].res = agent.CleanResult{Error: "container x: device busy"}
	if err := cleanHosts(context.Background(), &out, &errOut, []plan.Dest{sut}, o, cleanFlags{}, dial); err == nil {
		t.Error("a host's clean error: want a failure")
	}
}

// `ctrperf clean --hosts lab-smoke` on the lab (make lab-up): every host
// answers and nothing of ctrperf is left to clean there.
func TestCleanHostsLab(t *testing.T) {
	const cfg = "/var/lib/ctrperf/lab/ssh_config"
	if _, err := os.Stat(cfg); err != nil {
		if os.Getenv("CTRPERF_REQUIRE_LAB") == "1" {
			t.Fatalf("the lab is not up (%v; CTRPERF_REQUIRE_LAB=1): make lab-up", err)
		}
		t.Skipf("the lab is not up (%v): make lab-up", err)
	}
	bin := testenv.Ctrperf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--owners-dir", filepath.Join(t.TempDir(), "owners"), "clean", "--hosts", "lab-smoke", "--dry-run")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("clean --hosts lab-smoke: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, h := range []string{"lab-sut", "lab-load"} {
		if !strings.Contains(stdout.String(), h+": nothing to clean") {
			t.Errorf("%s: not clean:\n%s%s", h, stdout.String(), stderr.String())
		}
	}
}

// bench run of the shipped smoke plan moved to the lab by --hosts and
// --ssh-config (the plan has no hosts:), its quick variant at one
// repetition of a 1 s window (onceQuick, quickWindow: what is checked is
// each record, env.json, the report and the clean, none of it the number
// of repetitions or the window's length; three of 4 s made the test 13 s
// longer): every record names lab-sut for the
// deployment and lab-load for the generator, env.json both hosts with their
// clock offsets, the report says they are one kernel, and clean --hosts
// finds nothing left on either host.
func TestBenchRunHostsFlagLab(t *testing.T) {
	const cfg = "/var/lib/ctrperf/lab/ssh_config"
	if _, err := os.Stat(cfg); err != nil {
		if os.Getenv("CTRPERF_REQUIRE_LAB") == "1" {
			t.Fatalf("the lab is not up (%v; CTRPERF_REQUIRE_LAB=1): make lab-up", err)
		}
		t.Skipf("the lab is not up (%v): make lab-up", err)
	}
	bin := testenv.Ctrperf(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--owners-dir", filepath.Join(dir, "owners")}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("ctrperf %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	smoke := onceQuick(t, filepath.Join("..", "..", "plans", "smoke.yaml"), dir)
	quickWindow(t, smoke, "1s")
	run("bench", "run", smoke, "--quick", "--only", "bare-metal", "--hosts", "sut=lab-sut,load=lab-load", "--ssh-config", cfg, "--quiet", "--out", out)
	recs, err := results.ReadDir(out)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Status != results.StatusOK || r.Hosts == nil || r.Hosts.SUT.Name != "lab-sut" || r.Hosts.SUT.Dest != "root@198.19.200.2:22" ||
			r.Hosts.Load == nil || r.Hosts.Load.Name != "lab-load" || r.Hosts.Load.Dest != "root@198.19.200.3:22" {
			t.Errorf("record %s: status %s %s, hosts %+v", r.RunID, r.Status, r.Error, r.Hosts)
		}
	}
	env, err := results.ReadEnv(out)
	if err != nil || len(env.Hosts) != 2 {
		t.Fatalf("env.json hosts: %+v, %v", env, err)
	}
	for _, h := range env.Hosts {
		if h.BootID == "" || h.Clock == nil || h.Clock.Samples == 0 || h.Clock.RTTMs <= 0 {
			t.Errorf("env.json host %s: boot id %q clock %+v", h.Name, h.BootID, h.Clock)
		}
	}
	planYAML, err := os.ReadFile(filepath.Join(out, "plan.yaml"))
	if err != nil || !strings.Contains(string(planYAML), "sut: lab-sut") || !strings.Contains(string(planYAML), "ssh_config: "+cfg) {
		t.Errorf("OUT/plan.yaml does not name the hosts:\n%s", planYAML)
	}
	if rep := run("report", out); !strings.Contains(rep, "lab-sut (sut)") || !strings.Contains(rep, report.OneKernel) {
		t.Errorf("report:\n%s", rep)
	}
	cl := run("clean", "--hosts", "sut=lab-sut,load=lab-load", "--ssh-config", cfg, "--dry-run")
	for _, h := range []string{"lab-sut", "lab-load"} {
		if !strings.Contains(cl, h+": nothing to clean") {
			t.Errorf("%s after the run:\n%s", h, cl)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/plan"
	"ctrperf/internal/testenv"
)

func TestRemoteDockerHost(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"unix:///var/run/docker.sock": "",
		"unix:///run/ctrperf/x.sock":  "",
		"tcp://198.19.200.2:2375":     "tcp://198.19.200.2:2375",
		"ssh://root@lab-sut":          "ssh://root@lab-sut",
		"tcp://127.0.0.1:2375":        "tcp://127.0.0.1:2375", // may be a tunnel to anywhere
		"fd://":                       "fd://",
	} {
		got := remoteDockerHost(func(string) string { return in })
		if got != want {
			t.Errorf("remoteDockerHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// A remote DOCKER_HOST is refused for a plan that runs some system under
// test here; a plan whose every configuration is on hosts: reaches its
// engines through their agents and does not read DOCKER_HOST.
func TestCheckDockerHost(t *testing.T) {
	env := func(k string) string {
		if k == "DOCKER_HOST" {
			return "tcp://198.19.200.2:2375"
		}
		return ""
	}
	const src = "name: x\nworkload: web\nbaseline: a\nconfigurations:\n  - name: a\n    runtime: host\n  - name: b\n    runtime: docker\n"
	local, err := plan.Parse("p.yaml", []byte(src), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = checkDockerHost(env, local)
	if err == nil || !strings.Contains(err.Error(), "DOCKER_HOST=tcp://198.19.200.2:2375 names a Docker engine that is not this machine's") ||
		!strings.Contains(err.Error(), "hosts: {sut: HOST}") || !strings.Contains(err.Error(), "--hosts sut=HOST") {
		t.Errorf("local plan: %v", err)
	}
	if exitcode.Of(err) != exitcode.Failure {
		t.Errorf("exit status %d, want 1", exitcode.Of(err))
	}
	if err := checkDockerHost(func(string) string { return "" }, local); err != nil {
		t.Errorf("no DOCKER_HOST: %v", err)
	}
	sut, _ := plan.ParseHosts("sut=lab-sut")
	remote, err := plan.Parse("p.yaml", []byte(src), plan.Options{Hosts: sut})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDockerHost(env, remote); err != nil {
		t.Errorf("every SUT on hosts: %v", err)
	}
	load, _ := plan.ParseHosts("load=lab-load")
	half, _ := plan.Parse("p.yaml", []byte(src), plan.Options{Hosts: load})
	if err := checkDockerHost(env, half); err == nil {
		t.Error("a remote load host does not move the SUT: want a refusal")
	}
}

func TestHostFlags(t *testing.T) {
	h := hostFlags{hosts: "sut=lab-sut,load=ssh://root@198.19.200.3:22"}
	opt, err := h.apply(plan.Options{Quick: true})
	if err != nil || !opt.Quick || opt.Hosts.SUT.Raw != "lab-sut" || opt.Hosts.Load.Port != 22 {
		t.Fatalf("apply = %+v, %v", opt, err)
	}
	for _, bad := range []hostFlags{{hosts: "sut=-oProxyCommand=x"}, {hosts: "sut"}, {sshConfig: filepath.Join(t.TempDir(), "none")}} {
		if _, err := bad.apply(plan.Options{}); err == nil || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("apply(%+v) = %v, want a usage error", bad, err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	mustDo(t, os.WriteFile(cfg, []byte("Host lab-sut\n  HostName 198.19.200.2\n"), 0o600))
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt, err = (&hostFlags{sshConfig: rel}).apply(plan.Options{})
	if err != nil || opt.SSHConfig != cfg {
		t.Errorf("--ssh-config %s = %q, %v; want the absolute path", rel, opt.SSHConfig, err)
	}
}

// bench validate of lab-smoke prints its hosts as ssh resolves them with
// the plan's config, or --ssh-config's; --hosts moves them; a bad
// destination on the command line is a usage error.
func TestBenchValidateHosts(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed")
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	mustDo(t, os.WriteFile(cfg, []byte("Host lab-sut\n  HostName 198.19.200.2\n  User root\nHost lab-load\n  HostName 198.19.200.3\n  User root\n  Port 2200\n"), 0o600))
	out, _, err := runRoot(t, "bench", "validate", "lab-smoke", "--ssh-config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sut=lab-sut load=lab-load", "\nhosts (ssh config " + cfg + "):\n", "  lab-sut (sut): root@198.19.200.2:22", "  lab-load (load): root@198.19.200.3:2200"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runRoot(t, "bench", "validate", "smoke", "--ssh-config", cfg, "--hosts", "sut=lab-load", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v validatedPlan
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.SSHConfig != cfg || len(v.Hosts) != 1 || v.Hosts[0].Name != "lab-load" || v.Hosts[0].Dest != "root@198.19.200.3:2200" || v.Hosts[0].Roles[0] != "sut" {
		t.Errorf("validate --format json hosts: %+v", v)
	}
	if v.Configurations[0].Knobs["hosts"] == nil {
		t.Errorf("the knobs name the hosts: %v", v.Configurations[0].Knobs)
	}
	// Not resolved (no such config) is said, not fatal.
	out, _, err = runRoot(t, "bench", "validate", "smoke", "--hosts", "sut=nowhere.invalid")
	if err != nil || !strings.Contains(out, "nowhere.invalid (sut): ") {
		t.Errorf("validate --hosts sut=nowhere.invalid: %v\n%s", err, out)
	}
	_, _, err = runRoot(t, "bench", "validate", "smoke", "--hosts", "sut=-oProxyCommand=touch")
	if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "starts with '-'") {
		t.Errorf("--hosts sut=-o...: %v (exit %d)", err, exitcode.Of(err))
	}
	_, _, err = runRoot(t, "bench", "run", "--resume", t.TempDir(), "--hosts", "sut=lab-sut")
	if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "already names its hosts") {
		t.Errorf("--resume with --hosts: %v", err)
	}
}

// The built binary refuses a plan under DOCKER_HOST=tcp://198.19.200.2:2375
// (the lab's SUT address, where a user might expose dockerd) with exit 1
// and the advice, before it writes anything; and it never dials the
// engine: the same refusal with DOCKER_HOST on a loopback listener sees no
// connection, for bench run, isolate run, observe and doctor.
func TestRemoteDockerHostRefusedByTheBinary(t *testing.T) {
	bin := testenv.Ctrperf(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	root := t.TempDir()
	for _, host := range []string{"tcp://198.19.200.2:2375", "tcp://" + ln.Addr().String()} {
		for _, args := range [][]string{
			{"bench", "run", "smoke", "--quick", "--out", filepath.Join(root, "out")},
			{"isolate", "run"},
			{"observe", "--duration", "1s"},
			{"doctor"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, bin, append([]string{"--owners-dir", filepath.Join(root, "owners")}, args...)...)
			cmd.Env = append(os.Environ(), "DOCKER_HOST="+host)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			cancel()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("%s under DOCKER_HOST=%s: %v, want exit status 1\n%s%s", args[0], host, err, stdout.String(), stderr.String())
				continue
			}
			msg := stderr.String()
			if !strings.Contains(msg, "DOCKER_HOST="+host+" names a Docker engine that is not this machine's") || !strings.Contains(msg, "hosts: {sut: HOST}") {
				t.Errorf("%s: stderr lacks the refusal and its advice:\n%s", args[0], msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("%s printed before refusing:\n%s", args[0], stdout.String())
			}
			if took > 5*time.Second {
				t.Errorf("%s took %s to refuse", args[0], took)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench run made its output directory before refusing: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := dialed.Load(); n != 0 {
		t.Errorf("the engine at DOCKER_HOST was dialed %d times", n)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"ctrperf/internal/bench"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/plan"
	"ctrperf/internal/sshdest"
)

// hostFlags are the flags that put a plan's roles on other hosts (issue
// 27): --hosts and --ssh-config override the plan's hosts: and ssh_config:,
// --accept-new-host-key is how the SSH connections treat a host they do not
// know yet.
type hostFlags struct {
	hosts     string
	sshConfig string
	acceptNew bool
}

func (h *hostFlags) add(fl *pflag.FlagSet, run bool) {
	fl.StringVar(&h.hosts, "hosts", "", "run the system under test and the load generator on these hosts: sut=DEST,load=DEST (a Host alias of the ssh config, user@addr or ssh://user@addr:port; local: this machine); overrides the plan's hosts:, role by role")
	fl.StringVar(&h.sshConfig, "ssh-config", "", "ssh config file the hosts are read with (ssh -F); overrides the plan's ssh_config:")
	if run {
		fl.BoolVar(&h.acceptNew, "accept-new-host-key", false, "accept and record the host key of a host that is not in known_hosts yet (like StrictHostKeyChecking=accept-new); a changed host key is always refused")
	}
}

// apply sets the plan options the flags give.
func (h *hostFlags) apply(opt plan.Options) (plan.Options, error) {
	if h.hosts != "" {
		hs, err := plan.ParseHosts(h.hosts)
		if err != nil {
			return opt, exitcode.AsUsage(err)
		}
		opt.Hosts = hs
	}
	if h.sshConfig != "" {
		path := h.sshConfig
		if !filepath.IsAbs(path) && path != "~" && !strings.HasPrefix(path, "~/") {
			abs, err := filepath.Abs(path)
			if err != nil {
				return opt, exitcode.AsUsage(fmt.Errorf("--ssh-config: %w", err))
			}
			path = abs
		}
		if _, err := os.Stat(sshdest.ExpandHome(path)); err != nil {
			return opt, exitcode.AsUsage(fmt.Errorf("--ssh-config: %w", err))
		}
		opt.SSHConfig = path
	}
	return opt, nil
}

// remoteDockerHost returns DOCKER_HOST when it names an engine that is not
// a socket of this machine (tcp://, ssh://, anything but unix://), else "".
func remoteDockerHost(getenv func(string) string) string {
	h := strings.TrimSpace(getenv("DOCKER_HOST"))
	if h == "" || strings.HasPrefix(h, "unix://") {
		return ""
	}
	return h
}

// remoteDockerError refuses a remote DOCKER_HOST for a command that would
// deploy or look there but sample, time or steer this machine: a silently
// wrong result. what names the command.
func remoteDockerError(host, what string) error {
	return fmt.Errorf("DOCKER_HOST=%s names a Docker engine that is not this machine's: %s would deploy or look there "+
		"but sample this machine's CPU, disks and interrupts, so no figure would be right. "+
		"Name that machine as a host instead: hosts: {sut: HOST} in the plan, or bench run --hosts sut=HOST "+
		"(an SSH destination; ctrperf deploys, samples and tears down there over SSH, see \"Two machines\" in the README); "+
		"or unset DOCKER_HOST to use this machine's engine", host, what)
}

// checkDockerHost refuses a plan under a remote DOCKER_HOST when some
// configuration runs its system under test on this machine (all of it on
// hosts: is reached through their agents, which never read DOCKER_HOST).
func checkDockerHost(getenv func(string) string, p *plan.Plan) error {
	host := remoteDockerHost(getenv)
	if host == "" {
		return nil
	}
	for i := range p.Configurations {
		if p.Configurations[i].Hosts.SUT.Local() {
			return remoteDockerError(host, "bench run")
		}
	}
	return nil
}

// refuseRemoteDocker is checkDockerHost of a command without a plan
// (isolate, doctor, observe): it always samples this machine.
func refuseRemoteDocker(what string) error {
	if host := remoteDockerHost(os.Getenv); host != "" {
		return remoteDockerError(host, what)
	}
	return nil
}

// describeHosts prints the plan's hosts and what ssh will use for each
// (bench validate); a host ssh cannot resolve is said, not fatal: the lab
// may not be up yet.
func describeHosts(ctx context.Context, w io.Writer, p *plan.Plan) []validatedHost {
	uses := p.PlanHosts()
	if len(uses) == 0 {
		return nil
	}
	cfg := p.SSHConfig
	if cfg == "" {
		cfg = "ssh's own (~/.ssh/config)"
	}
	if w != nil {
		fmt.Fprintf(w, "\nhosts (ssh config %s):\n", cfg)
	}
	var out []validatedHost
	defer func() {
		if w == nil {
			return
		}
		for _, l := range pathLines(p) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}()
	for _, u := range uses {
		v := validatedHost{Name: u.Dest.Raw, Roles: u.Roles}
		r, err := sshdest.Resolve(ctx, p.SSHConfig, u.Dest)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Dest = r.Dest()
			v.ProxyJump = r.ProxyJump
			v.IdentityFiles = r.IdentityFiles
		}
		out = append(out, v)
		if w == nil {
			continue
		}
		if err != nil {
			fmt.Fprintf(w, "  %s (%s): not resolved: %v\n", v.Name, strings.Join(v.Roles, ", "), err)
		} else {
			fmt.Fprintf(w, "  %s (%s): %s\n", v.Name, strings.Join(v.Roles, ", "), r)
		}
	}
	return out
}

// validatedHost is a host of `bench validate --format json`.
type validatedHost struct {
	Name          string   `json:"name"`
	Roles         []string `json:"roles"`
	Dest          string   `json:"dest,omitempty"`
	ProxyJump     string   `json:"proxy_jump,omitempty"`
	IdentityFiles []string `json:"identity_files,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// pathLines say, for each configuration whose load host is not its SUT,
// what path the load host takes (bench/path.go): the real one, never a
// relay of ctrperf's.
func pathLines(p *plan.Plan) []string {
	var out []string
	for _, c := range p.Configurations {
		hs := c.Hosts
		if hs.SUT.Local() || hs.Load.Raw == hs.SUT.Raw || c.Runtime == plan.RuntimeKubernetes {
			continue
		}
		if len(out) == 0 {
			out = append(out, "paths from the load host (no process of ctrperf's between client and server; only the load host is admitted):")
		}
		l := fmt.Sprintf("  %s (network %s): %s", c.Name, c.Network, bench.PathVia(c.Network))
		if c.Network == plan.NetworkPublishedExternal {
			l += "; across hosts published-external is the same as published: the load host is the external client"
		}
		out = append(out, l)
	}
	return out
}

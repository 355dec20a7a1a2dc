package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ctrperf/internal/agent"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
	"ctrperf/internal/remote"
)

// clean --hosts: after a SIGKILL of the ctrperf that ran a two-host plan,
// what its agents left (their watchdogs tear a dropped session's run down,
// but a host may have been unreachable then) is cleaned on every host of
// the plan through a fresh agent, with this machine's sweep.

// cleanHostsFlags are clean's flags for the plan's hosts.
type cleanHostsFlags struct {
	hosts     string // PLAN, or sut=DEST,load=DEST
	sshConfig string
	acceptNew bool
}

func (f *cleanHostsFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.hosts, "hosts", "", "also clean the hosts of this plan (a built-in plan or a plan file, e.g. lab-smoke) or these hosts (sut=DEST,load=DEST), each through its agent over SSH")
	fl.StringVar(&f.sshConfig, "ssh-config", "", "ssh config file the hosts are read with (ssh -F); overrides the plan's ssh_config:")
	fl.BoolVar(&f.acceptNew, "accept-new-host-key", false, "accept and record the host key of a host that is not in known_hosts yet; a changed host key is always refused")
}

// cleanSession is what clean needs of a host's agent (remote.Host).
type cleanSession interface {
	Clean(ctx context.Context, p agent.CleanParams) (agent.CleanResult, error)
	Close(ctx context.Context) error
}

// cleanDialer reaches a host's agent; remote.Dial in ctrperf, a fake in
// tests.
type cleanDialer func(ctx context.Context, d plan.Dest, o remote.SSHOptions) (cleanSession, error)

func dialForClean(ctx context.Context, d plan.Dest, o remote.SSHOptions) (cleanSession, error) {
	h, err := remote.Dial(ctx, d, o)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// cleanTargets are the hosts --hosts names: a plan's (every configuration's
// SUT and load host) or role=destination pairs, each once, with the ssh
// config to read them with.
func cleanTargets(cmd *cobra.Command, f cleanHostsFlags) ([]plan.Dest, string, error) {
	hf := hostFlags{sshConfig: f.sshConfig}
	opt, err := hf.apply(plan.Options{})
	if err != nil {
		return nil, "", err
	}
	var dests []plan.Dest
	cfg := opt.SSHConfig
	if strings.Contains(f.hosts, "=") {
		h, err := plan.ParseHosts(f.hosts)
		if err != nil {
			return nil, "", exitcode.AsUsage(err)
		}
		for _, d := range []plan.Dest{h.SUT, h.Load} {
			if !d.Local() && !slices.ContainsFunc(dests, func(x plan.Dest) bool { return x.Raw == d.Raw }) {
				dests = append(dests, d)
			}
		}
	} else {
		p, err := openPlan(cmd, f.hosts, opt)
		if err != nil {
			return nil, "", planError(cmd.ErrOrStderr(), err)
		}
		for _, u := range p.PlanHosts() {
			dests = append(dests, u.Dest)
		}
		cfg = p.SSHConfig
	}
	if len(dests) == 0 {
		return nil, "", exitcode.Usagef("--hosts %s names no host but this machine; plain 'ctrperf clean' cleans it", f.hosts)
	}
	return dests, cfg, nil
}

// cleanHosts cleans each host through its agent, host after host, and says
// what each removed; an unreachable host is reported and the others are
// still cleaned.
func cleanHosts(ctx context.Context, out, errOut io.Writer, dests []plan.Dest, o remote.SSHOptions, f cleanFlags, dial cleanDialer) error {
	var failed []string
	for _, d := range dests {
		if err := cleanHost(ctx, out, d, o, f, dial); err != nil {
			fmt.Fprintf(errOut, "ctrperf clean: %s: %v\n", d.Raw, err)
			failed = append(failed, d.Raw)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("clean could not clean %s; run 'ctrperf clean --hosts' again once it answers", strings.Join(failed, ", "))
	}
	return nil
}

func cleanHost(ctx context.Context, out io.Writer, d plan.Dest, o remote.SSHOptions, f cleanFlags, dial cleanDialer) (err error) {
	s, err := dial(ctx, d, o)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := s.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("closing the agent's session: %w", cerr)
		}
	}()
	res, err := s.Clean(ctx, agent.CleanParams{RunID: f.runID, DryRun: f.dryRun, Force: f.force})
	if err != nil {
		return err
	}
	if f.dryRun {
		for _, obj := range res.Found {
			state := "orphaned"
			if obj.Live {
				state = "live"
			}
			fmt.Fprintf(out, "%s: %-8s %s (owner: %s)\n", d.Raw, state, obj.What, obj.Owner)
		}
	}
	for _, r := range res.Removed {
		verb := "removed"
		if f.dryRun {
			verb = "orphaned"
		}
		fmt.Fprintf(out, "%s: %s %s\n", d.Raw, verb, r)
	}
	if !f.dryRun {
		for _, obj := range res.Found {
			if obj.Kept {
				fmt.Fprintf(out, "%s: kept live %s (owner: %s)\n", d.Raw, obj.What, obj.Owner)
			}
		}
	}
	if res.Error != "" {
		return errors.New("clean left something behind: " + res.Error)
	}
	if len(res.Removed) == 0 && (!f.dryRun || len(res.Found) == 0) {
		fmt.Fprintf(out, "%s: nothing to clean\n", d.Raw)
	}
	return nil
}

// runCleanWithHosts is clean: this machine's sweep, then --hosts' hosts.
// The hosts are found first, so a bad --hosts cleans nothing.
func runCleanWithHosts(cmd *cobra.Command, f cleanFlags) error {
	var dests []plan.Dest
	var cfg string
	if f.hosts.hosts != "" {
		var err error
		if dests, cfg, err = cleanTargets(cmd, f.hosts); err != nil {
			return err
		}
	}
	ctx, stop := lifecycle.SignalContext(cmd.Context())
	defer stop()
	err := runClean(ctx, cmd, f)
	if len(dests) > 0 {
		o := remote.SSHOptions{Config: cfg, AcceptNewHostKey: f.hosts.acceptNew, Session: fmt.Sprintf("clean-%d", os.Getpid()), Log: cmd.ErrOrStderr()}
		err = errors.Join(err, cleanHosts(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), dests, o, f, dialForClean))
	}
	return err
}

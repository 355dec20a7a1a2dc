package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"ctrperf/internal/agent"
	"ctrperf/internal/bench"
	"ctrperf/internal/clean"
	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/kernel"
	"ctrperf/internal/observe"
	"ctrperf/internal/owner"
	"ctrperf/internal/results"
	"ctrperf/internal/selfbin"
)

// newAgentCmd is `ctrperf agent`: the far side of a plan's hosts:, which
// ctrperf starts over SSH (internal/remote) and speaks internal/agent's
// protocol to on stdin and stdout. People never type it.
func newAgentCmd() *cobra.Command {
	var roots kernel.Roots
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Serve ctrperf's agent protocol on stdin/stdout (started by ctrperf over SSH)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd, ownersDir(cmd), kernel.NewFS(roots))
		},
	}
	// An agent pod reads its node's kernel where the pod mounts it.
	cmd.Flags().StringVar(&roots.Proc, "proc-root", kernel.ProcMount, "the host's proc mount")
	cmd.Flags().StringVar(&roots.Sys, "sys-root", kernel.SysMount, "the host's sys mount")
	cmd.Flags().StringVar(&roots.Cgroup, "cgroup-root", kernel.CgroupMount, "the host's cgroup mount")
	return cmd
}

func runAgent(cmd *cobra.Command, owners owner.Dir, fs kernel.FS) error {
	// A dropped SSH connection closes stdout: a write must fail, not kill
	// the agent with SIGPIPE before its watchdog tears the session down.
	signal.Ignore(syscall.SIGPIPE, syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Everything the agent's session runs is this host's, and its engines
	// are named after the agent's pid (a run id prefix of the caller's
	// session comes with each deploy).
	engines := &bench.Engines{RunID: "ctrperf-agent-" + strconv.Itoa(os.Getpid())}
	opt := agent.Options{
		Facts: func(ctx context.Context) results.Machine {
			m, _ := bench.GatherEnv(ctx, fs).(results.Machine)
			return m
		},
		Docker: func(ctx context.Context) (*results.EngineInfo, error) {
			d, err := daemon.Probe(ctx, 3*time.Second)
			if err != nil {
				return nil, err
			}
			info, err := d.Info(ctx)
			if err != nil {
				return nil, err
			}
			return &info, nil
		},
		Engines: engines,
		Observer: func(cs []observe.Container, interval time.Duration, onSample func(results.Sample)) agent.Observer {
			opts := []observe.Option{observe.WithKernel(fs), observe.WithContainers(cs), observe.WithOnSample(onSample)}
			if interval > 0 {
				opts = append(opts, observe.WithInterval(interval))
			}
			return observe.New(opts...)
		},
		Images: func(ctx context.Context) (agent.Images, error) {
			d, err := daemon.Probe(ctx, 3*time.Second)
			if err != nil {
				return nil, err
			}
			return agent.DockerImages(d.Client()), nil
		},
		// A VM guest's disks with the images its host ships (internal/vm).
		Disks: &agent.Disks{Sys: fs.Sys(), Dev: "/dev"},
		Clean: func(ctx context.Context, p agent.CleanParams) (agent.CleanResult, error) {
			list, err := owners.List()
			if err != nil && !p.Force {
				return agent.CleanResult{}, err
			}
			own := engine.NewOwnership(list, p.Force).Refreshing(func() (owner.Owners, error) { return owners.List() })
			removed, err := clean.Sweep(ctx, clean.Options{RunID: p.RunID, DryRun: p.DryRun, Owners: own, Warn: cmd.ErrOrStderr()})
			r := agent.CleanResult{Removed: removed, Found: own.Found()}
			if err != nil {
				r.Error = err.Error()
			} else if !p.DryRun && p.RunID == "" {
				reapDeadOwners(owners, list, cmd.ErrOrStderr())
			}
			return r, nil
		},
		Kernel: fs,
		Build: func() (string, error) {
			b, err := selfbin.Read()
			return b.Hash, err
		},
		Self:   selfbin.Path,
		Net:    agent.HostNet{Routes: engine.NewRouteTable()},
		Owners: &owners,
		Log:    cmd.ErrOrStderr(),
	}
	return agent.Serve(ctx, os.Stdin, os.Stdout, opt)
}

// reapDeadOwners removes the records of dead owners once a full clean has
// removed everything of theirs (here and on a host, through its agent).
func reapDeadOwners(d owner.Dir, owners owner.Owners, errOut io.Writer) {
	for _, s := range owners {
		if !s.Live {
			if err := d.Reap(s); err != nil {
				fmt.Fprintf(errOut, "ctrperf clean: %v\n", err)
			}
		}
	}
}

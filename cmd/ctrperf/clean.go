package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/lifecycle"
)

func newCleanCmd() *cobra.Command {
	var runID string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a killed run left behind",
		Long: `Removes what ctrperf runs left behind after a crash or SIGKILL: containers,
networks and volumes labelled ctrperf.managed (on your Docker engine and on
every private engine ctrperf still runs), bind directories, client network
namespaces and veths, host-runtime processes, cgroups, tmpfs mounts and data,
the cgroup a killed load generator was protected in (ctrperf/generator-PID),
then the private engines themselves with their loop devices, mounts, bridges
and iptables rules. --run limits it to one run id. Cached images are kept.
Exits 0 when nothing is left.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			return runClean(ctx, cmd, runID, dryRun)
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "only clean objects of this run id (default: every ctrperf object)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
}

func runClean(ctx context.Context, cmd *cobra.Command, runID string, dryRun bool) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var opts []engine.CleanOption
	if dryRun {
		opts = append(opts, engine.CleanDryRun())
	}
	var removed []string
	var errs []error

	// Docker objects first, on every engine that still answers: the user's
	// (never started here) and ctrperf's private ones, which a killed run
	// may have left running.
	clients := map[string]client.APIClient{}
	if d, err := daemon.Probe(ctx, 3*time.Second); err == nil {
		defer d.Client().Close()
		clients[d.Host()] = d.Client()
	} else {
		fmt.Fprintf(errOut, "ctrperf clean: your Docker engine does not answer (%v); cleaning the rest\n", err)
	}
	engines, err := daemon.List()
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range engines {
		if !e.Alive || e.Socket == "" {
			continue
		}
		host := "unix://" + e.Socket
		if _, ok := clients[host]; ok {
			continue
		}
		cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
		if err != nil {
			errs = append(errs, fmt.Errorf("private engine %s: %w", e.Name, err))
			continue
		}
		defer cli.Close()
		// An engine that is still starting or already stopping (another
		// run's) holds no containers of a dead run worth waiting for;
		// CleanAll below handles the engines of the run itself.
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.Ping(pctx)
		cancel()
		if err != nil {
			fmt.Fprintf(errOut, "ctrperf clean: private engine %s does not answer, skipping its containers: %v\n", e.Name, err)
			continue
		}
		clients[host] = cli
	}
	for _, cli := range clients {
		r, err := engine.Clean(ctx, cli, runID, opts...)
		for _, x := range r {
			removed = appendOnce(removed, x)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(clients) == 0 {
		r, err := engine.Clean(ctx, nil, runID, opts...)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}

	if dryRun {
		for _, e := range engines {
			if runID == "" || e.RunID == runID {
				removed = append(removed, fmt.Sprintf("private engine %s (socket %s, alive %v)", e.Name, e.Socket, e.Alive))
			}
		}
	} else {
		r, err := daemon.CleanAll(ctx, runID)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}

	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range removed {
		fmt.Fprintf(out, "%s %s\n", verb, r)
	}
	if err := errors.Join(errs...); err != nil {
		return &exitError{code: 1, msg: "clean left something behind: " + err.Error()}
	}
	if len(removed) == 0 {
		fmt.Fprintln(out, "nothing to clean")
	}
	return nil
}

// appendOnce appends s unless present: host-side objects (netns, bind
// directories) are reported by the first engine's pass only.
func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

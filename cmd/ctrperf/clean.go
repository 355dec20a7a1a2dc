package main

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/engine"
	"ctrperf/internal/lifecycle"
)

func newCleanCmd() *cobra.Command {
	var runID string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a killed run left behind",
		Long: `Removes what ctrperf runs left behind after a crash or SIGKILL: containers,
networks and volumes labelled ctrperf.managed (on the default Docker engine),
bind directories, client network namespaces and veths, host-runtime processes,
cgroups, tmpfs mounts and data. --run limits it to one run id. Cached images
are kept. Exits 0 when nothing is left.`,
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
	out := cmd.OutOrStdout()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cli.Ping(pctx)
		cancel()
		if err != nil {
			cli.Close()
		}
	}
	var api client.APIClient
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "ctrperf clean: no Docker engine answers (%v); cleaning host objects only\n", err)
	} else {
		defer cli.Close()
		api = cli
	}
	var opts []engine.CleanOption
	if dryRun {
		opts = append(opts, engine.CleanDryRun())
	}
	removed, cerr := engine.Clean(ctx, api, runID, opts...)
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range removed {
		fmt.Fprintf(out, "%s %s\n", verb, r)
	}
	if len(removed) == 0 && cerr == nil {
		fmt.Fprintln(out, "nothing to clean")
	}
	if cerr != nil {
		return &exitError{code: 1, msg: "clean left something behind: " + cerr.Error()}
	}
	return nil
}

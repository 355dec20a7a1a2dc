package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"ctrperf/internal/clean"
	"ctrperf/internal/engine"
	"ctrperf/internal/owner"
)

type cleanFlags struct {
	runID  string
	dryRun bool
	force  bool
	hosts  cleanHostsFlags
}

func newCleanCmd() *cobra.Command {
	var f cleanFlags
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a killed run left behind, never what a live run uses",
		Long: `Removes what ctrperf runs left behind after a crash or SIGKILL: containers,
networks and volumes labelled ctrperf.managed (on your Docker engine and on
every private engine ctrperf still runs), bind directories, client network
namespaces and veths, host-runtime processes, cgroups, tmpfs mounts and data,
the cgroup a killed load generator was protected in (ctrperf/generator-PID),
then the private engines themselves with their loop devices, mounts, bridges
and iptables rules, and runs' data filesystems (the plan's filesystem knob:
ctrperf-fs-<run> mount, loop device and image). On a host of a two-host
plan also the run's admit chain (iptables filter CTRPERF-ADMIT-<hash>, which
let only the load host in) and, on a load host, the routes to containers
it was given (recorded in /run/ctrperf/routes). --run limits it to one run
id. Cached images are kept.

Only orphaned objects are removed. Every 'bench run' keeps an owner record
(pid, process start time, host, command, start, output directory, its run
ids) under /run/ctrperf/owners, locked for as long as it lives: an object of
a run whose owner holds its lock (or, without a lock file, whose pid still
runs with the same start time) is live and kept, with its private engines.
Objects without any owner record (left by a ctrperf from before owner
records, or whose record was lost) are orphaned. A generator cgroup is live
while its process runs.

On Kubernetes (every cluster of $KUBECONFIG or ~/.kube/config, and the
lab's) a session's namespace ctrperf-<session> carries its owner: host,
machine id, boot id, pid and start time. One made on this machine in this
boot is decided as above; one of an earlier boot is orphaned; one of
another machine is kept (its processes cannot be seen from here) unless
--force, which is how a namespace of a host that is gone is removed. A
namespace whose name is not the one ctrperf derives from its session, or
that has no owner, is never removed, not even with --force: a label is no
proof that ctrperf made it.

--dry-run lists each object as live or orphaned, with its owner, and
removes nothing. --force removes live objects too, after saying which live
runs it breaks. Exits 0 when nothing orphaned is left.

--hosts PLAN (a built-in plan or a plan file, e.g. lab-smoke) also cleans
every host of the plan's hosts: (or --hosts sut=DEST,load=DEST those
hosts): ctrperf reaches each over SSH as bench run does, starts its agent
there and runs the same sweep on that host, with --run, --dry-run and
--force; each line names its host. An unreachable host is reported and the
others are still cleaned (exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCleanWithHosts(cmd, f) },
	}
	f.hosts.add(cmd)
	cmd.Flags().StringVar(&f.runID, "run", "", "only clean objects of this run id (default: every ctrperf object)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "list every object as live or orphaned with its owner, remove nothing")
	cmd.Flags().BoolVar(&f.force, "force", false, "remove objects of live runs too (breaks those runs; says which first)")
	return cmd
}

func runClean(ctx context.Context, cmd *cobra.Command, f cleanFlags) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	owners, err := ownersDir(cmd).List()
	if err != nil && !f.force {
		// An unreadable record may be a live run's: guessing would remove it.
		return fmt.Errorf("cannot read every owner record (%v); remove the broken record or clean with --force", err)
	}

	relist := func() (owner.Owners, error) { return ownersDir(cmd).List() }
	if f.force && !f.dryRun {
		// Say what breaks before breaking it: the same sweep, dry, unforced.
		look := engine.NewOwnership(owners, false).Refreshing(relist)
		_, _ = clean.Sweep(ctx, clean.Options{RunID: f.runID, DryRun: true, Owners: look})
		if w := clean.Breaks(look.Found()); w != "" {
			fmt.Fprint(errOut, w)
		}
	}

	own := engine.NewOwnership(owners, f.force).Refreshing(relist)
	removed, err := clean.Sweep(ctx, clean.Options{RunID: f.runID, DryRun: f.dryRun, Owners: own, Warn: errOut})

	found := own.Found()
	if f.dryRun {
		for _, o := range found {
			state := "orphaned"
			if o.Live {
				state = "live"
			}
			fmt.Fprintf(out, "%-8s %s (owner: %s)\n", state, o.What, o.Owner)
		}
		// What a dry run would remove besides the objects themselves (the
		// processes, cgroups and data of a host run).
		for _, r := range removed {
			if !slices.ContainsFunc(found, func(o engine.Object) bool { return o.What == r }) {
				fmt.Fprintf(out, "%-8s %s\n", "orphaned", r)
			}
		}
	} else {
		for _, r := range removed {
			fmt.Fprintf(out, "removed %s\n", r)
		}
		for _, o := range found {
			if o.Kept {
				fmt.Fprintf(out, "kept live %s (owner: %s)\n", o.What, o.Owner)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("clean left something behind: %w", err)
	}
	if !f.dryRun && f.runID == "" {
		reapDeadOwners(ownersDir(cmd), owners, errOut)
	}
	if len(removed) == 0 {
		fmt.Fprintln(out, "nothing to clean")
	}
	return nil
}

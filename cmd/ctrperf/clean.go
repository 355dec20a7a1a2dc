package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/isolate"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/owner"
)

type cleanFlags struct {
	runID  string
	dryRun bool
	force  bool
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
ctrperf-fs-<run> mount, loop device and image). --run limits it to one run
id. Cached images are kept.

Only orphaned objects are removed. Every 'bench run' keeps an owner record
(pid, process start time, host, command, start, output directory, its run
ids) under /run/ctrperf/owners, locked for as long as it lives: an object of
a run whose owner holds its lock (or, without a lock file, whose pid still
runs with the same start time) is live and kept, with its private engines.
Objects without any owner record (left by a ctrperf from before owner
records, or whose record was lost) are orphaned. A generator cgroup is live
while its process runs.

--dry-run lists each object as live or orphaned, with its owner, and
removes nothing. --force removes live objects too, after saying which live
runs it breaks. Exits 0 when nothing orphaned is left.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			return runClean(ctx, cmd, f)
		},
	}
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
		_, _ = sweep(ctx, io.Discard, f.runID, true, look)
		if w := breaks(look.Found()); w != "" {
			fmt.Fprint(errOut, w)
		}
	}

	own := engine.NewOwnership(owners, f.force).Refreshing(relist)
	removed, err := sweep(ctx, errOut, f.runID, f.dryRun, own)

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
		// Everything of the dead owners is gone: their records go too.
		for _, s := range owners {
			if !s.Live {
				if err := ownersDir(cmd).Reap(s); err != nil {
					fmt.Fprintf(errOut, "ctrperf clean: %v\n", err)
				}
			}
		}
	}
	if len(removed) == 0 {
		fmt.Fprintln(out, "nothing to clean")
	}
	return nil
}

// sweep cleans (or, dry, lists) ctrperf's objects on every engine that
// answers and on the host, then the private engines, deciding each object
// by own. It returns what it removed or would remove.
func sweep(ctx context.Context, errOut io.Writer, runID string, dry bool, own *engine.Ownership) ([]string, error) {
	opts := []engine.CleanOption{engine.CleanOwners(own)}
	if dry {
		opts = append(opts, engine.CleanDryRun())
	}
	var removed []string
	var errs []error

	// Docker objects first, on every engine that still answers: the user's
	// (never started here) and ctrperf's private ones, which a killed run
	// may have left running.
	clients := map[string]client.APIClient{}
	var userEngine client.APIClient // nil when it does not answer
	if d, err := daemon.Probe(ctx, 3*time.Second); err == nil {
		defer d.Client().Close()
		clients[d.Host()] = d.Client()
		userEngine = d.Client()
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
		cli, err := client.New(client.WithHost(host))
		if err != nil {
			errs = append(errs, fmt.Errorf("private engine %s: %w", e.Name, err))
			continue
		}
		defer cli.Close()
		// An engine that is still starting or already stopping (another
		// run's) holds no containers of a dead run worth waiting for;
		// CleanEngines below handles the engines of the run itself.
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.Ping(pctx, client.PingOptions{})
		cancel()
		if err != nil {
			fmt.Fprintf(errOut, "ctrperf clean: private engine %s does not answer, skipping its containers: %v\n", e.Name, err)
			continue
		}
		clients[host] = cli
	}
	// A killed controller's isolate checkpoint (a bench run's, or an
	// `isolate run`'s): what still holds its values is put back first.
	if runID == "" {
		r, err := bench.RestoreDeadIsolate(ctx, userEngine, isolate.DefaultStateDir, dry)
		if r != "" {
			removed = append(removed, r)
		}
		if err != nil {
			errs = append(errs, err)
		}
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

	// Private engines last: a live session's are kept, with what they hold.
	// A real clean decides each under the engine's lock (CleanEngines),
	// where a run starting or sharing it has become an owner.
	whats := map[string]string{}
	for _, e := range engines {
		whats[e.Name] = fmt.Sprintf("private engine %s (socket %s, alive %v)", e.Name, e.Socket, e.Alive)
	}
	keep := func(st daemon.State) bool {
		what, ok := whats[st.Name]
		if !ok {
			what = fmt.Sprintf("private engine %s (socket %s)", st.Name, st.Socket)
		}
		if st.RunID == "" {
			return own.KeepShared(what)
		}
		return own.Keep(what, st.RunID)
	}
	if dry {
		for _, e := range engines {
			if (runID == "" || e.RunID == runID) && !keep(e.State) {
				removed = append(removed, whats[e.Name])
			}
		}
	} else {
		r, err := daemon.CleanEngines(ctx, runID, keep)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	r, err := cleanDataFS(ctx, runID, own, dry)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// breaks says which live runs a forced clean breaks, and with what.
func breaks(found []engine.Object) string {
	byOwner := map[string][]string{}
	var order []string
	for _, o := range found {
		if !o.Live {
			continue
		}
		if _, ok := byOwner[o.Owner]; !ok {
			order = append(order, o.Owner)
		}
		byOwner[o.Owner] = append(byOwner[o.Owner], o.What)
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ctrperf clean --force: removing objects of %d live owner(s), which breaks their runs:\n", len(order))
	for _, who := range order {
		fmt.Fprintf(&b, "  %s: %d objects (%s)\n", who, len(byOwner[who]), strings.Join(byOwner[who], ", "))
	}
	return b.String()
}

// appendOnce appends s unless present: host-side objects (netns, bind
// directories) are reported by the first engine's pass only.
func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

package clean

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
)

// podmanServices removes what sessions of runtime podman left: each podman
// service of ctrperf's (daemon.ListPodman: its pid, socket and session,
// recorded before it started) whose session has no live owner is reached,
// started again on its socket when it died (its containers live on under
// conmon), swept of its session's runs (engine.CleanEngineObjects by
// owner: only what ctrperf made, never a user's container in podman's
// store), then stopped and its state removed. A live session's service is kept; dry lists.
func podmanServices(ctx context.Context, o Options, opts []engine.CleanOption) ([]string, error) {
	keep := func(ps daemon.PodmanService) bool {
		return o.Owners.Keep(fmt.Sprintf("podman service %s (socket %s)", ps.Name, ps.Socket), ps.RunID)
	}
	if !o.DryRun {
		// The session's runs (<session>-NNN), or the one run asked for;
		// the host's objects of those runs are the main pass's.
		sweep := func(ctx context.Context, cli client.APIClient, ps daemon.PodmanService) ([]string, error) {
			runs := func(run string) bool {
				if o.RunID != "" && o.RunID != ps.RunID {
					return run == o.RunID
				}
				return run == ps.RunID || strings.HasPrefix(run, ps.RunID+"-")
			}
			return engine.CleanEngineObjects(ctx, cli, runs, opts...)
		}
		removed, err := daemon.CleanPodman(ctx, o.RunID, keep, sweep)
		r, serr := podmanStore(ctx, o, opts)
		return append(removed, r...), errors.Join(err, serr)
	}
	listed, err := daemon.ListPodman()
	var would []string
	for _, l := range listed {
		if daemon.PodmanOf(l.RunID, o.RunID) && !keep(l.PodmanService) {
			would = append(would, fmt.Sprintf("podman service %s (socket %s, alive %v)", l.Name, l.Socket, l.Alive))
		}
	}
	r, serr := podmanStore(ctx, o, opts)
	return append(would, r...), errors.Join(err, serr)
}

// podmanStore sweeps podman's store itself, through a service of the
// clean's own, for ctrperf's objects no recorded service accounts for (a
// session whose service and state went while its containers or networks
// stayed): every run's, or runID's, decided by owner like any engine's.
// Nothing without podman installed.
func podmanStore(ctx context.Context, o Options, opts []engine.CleanOption) ([]string, error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil, nil
	}
	d, err := daemon.StartPodman(ctx, fmt.Sprintf("clean-%d", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("podman's store: %w", err)
	}
	defer d.Close(context.WithoutCancel(ctx))
	var runs func(string) bool
	if o.RunID != "" {
		runs = func(run string) bool { return run == o.RunID || strings.HasPrefix(run, o.RunID+"-") }
	}
	r, err := engine.CleanEngineObjects(ctx, d.Client(), runs, opts...)
	for i := range r {
		r[i] += " (podman)"
	}
	return r, err
}

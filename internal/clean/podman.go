package clean

import (
	"context"
	"fmt"
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
		return daemon.CleanPodman(ctx, o.RunID, keep, sweep)
	}
	listed, err := daemon.ListPodman()
	var would []string
	for _, l := range listed {
		if daemon.PodmanOf(l.RunID, o.RunID) && !keep(l.PodmanService) {
			would = append(would, fmt.Sprintf("podman service %s (socket %s, alive %v)", l.Name, l.Socket, l.Alive))
		}
	}
	return would, err
}

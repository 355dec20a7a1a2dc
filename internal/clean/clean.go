// Package clean is `ctrperf clean`'s sweep: it finds what ctrperf runs left
// behind on every engine that answers, on the host and in the private
// engines and data filesystems, and removes (or, dry, lists) what no live
// owner holds. The command in cmd/ctrperf only parses flags and prints.
package clean

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine"
	"ctrperf/internal/engine/daemon"
	"ctrperf/internal/isolate"
	"ctrperf/internal/kernel"
	"ctrperf/internal/vm"
)

// Options of a Sweep.
type Options struct {
	// RunID limits the sweep to one run's objects ("" every ctrperf object;
	// only then is a dead controller's isolate checkpoint restored).
	RunID string
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Owners decides each object: live kept, orphaned removed.
	Owners *engine.Ownership
	// Warn receives what the sweep passes over (an engine that does not
	// answer); nil discards it.
	Warn io.Writer
	// Kernel is where a dead controller's IRQ affinities and RPS masks
	// are restored (the zero FS: the real /proc and /sys).
	Kernel kernel.FS
	// Kubeconfigs are the clusters whose orphaned namespaces (runtime
	// kubernetes) are removed; nil: $KUBECONFIG or ~/.kube/config, and
	// the lab's (kube.go).
	Kubeconfigs []string
}

// Sweep cleans (or, dry, lists) ctrperf's objects on every engine that
// answers and on the host, then the private engines and the runs' data
// filesystems, deciding each object by o.Owners. It returns what it removed
// or would remove; an error of one part does not stop the others.
func Sweep(ctx context.Context, o Options) ([]string, error) {
	warn := o.Warn
	if warn == nil {
		warn = io.Discard
	}
	own, runID, dry := o.Owners, o.RunID, o.DryRun
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
		fmt.Fprintf(warn, "ctrperf clean: your Docker engine does not answer (%v); cleaning the rest\n", err)
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
			fmt.Fprintf(warn, "ctrperf clean: private engine %s does not answer, skipping its containers: %v\n", e.Name, err)
			continue
		}
		clients[host] = cli
	}
	// A killed controller's isolate checkpoint (a bench run's, or an
	// `isolate run`'s): what still holds its values is put back first.
	if runID == "" {
		r, err := bench.RestoreDeadIsolate(ctx, userEngine, isolate.DefaultStateDir, o.Kernel, dry)
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

	// The podman services of sessions that are gone, with the containers
	// they ran (podman.go).
	r, err := podmanServices(ctx, o, opts)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
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
	r, err = dataFilesystems(ctx, runID, own, dry)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	// VM guests of dead sessions: QEMU by its pid file, then its tap,
	// overlay and socket.
	r, err = vm.Cleaner{RunDir: vm.RunDir, DataDir: vm.DataDir, ProcRoot: o.Kernel.Proc(), DryRun: dry,
		Keep: func(what string, s vm.State) bool { return own.Keep(what, s.RunID) }}.Clean(ctx, runID)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	r, err = kubeNamespaces(ctx, o, warn)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// dataFilesystems removes the data filesystems (the plan's filesystem knob:
// mount, loop device, image) of runs whose owner is gone; a live session's
// are kept. dry lists what would go.
func dataFilesystems(ctx context.Context, runID string, own *engine.Ownership, dry bool) ([]string, error) {
	fss, err := daemon.ListDataFS()
	keep := map[string]bool{}
	var would []string
	for _, f := range fss {
		if runID != "" && f.RunID != runID {
			continue
		}
		what := fmt.Sprintf("data filesystem %s (%s on %s, %s)", f.Name, f.FS, f.Device, f.Mount)
		keep[f.Name] = own.Keep(what, f.RunID)
		if dry && !keep[f.Name] {
			would = append(would, what)
		}
	}
	if dry {
		return would, err
	}
	removed, cerr := daemon.CleanDataFS(ctx, runID, func(f daemon.DataFS) bool { return keep[f.Name] })
	if err == nil {
		err = cerr
	} else if cerr != nil {
		err = fmt.Errorf("%w; %v", err, cerr)
	}
	return removed, err
}

// Breaks says which live runs a forced clean breaks, and with what ("" when
// none).
func Breaks(found []engine.Object) string {
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

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// cleanEngine removes a private engine completely. Only dockerd knows the
// names of what it created outside the engine's own directories: the br-*
// bridges of user-defined networks and their iptables rules, container
// endpoints, docker-proxy processes. A running engine is therefore asked to
// remove all its containers and networks first; a dead one (SIGKILL) is
// revived on its own state for that, then stopped. teardown follows either
// way and removes what is left.
func cleanEngine(ctx context.Context, o Options, st *State) ([]string, error) {
	var done []string
	var errs []error
	pid := st.PID
	if pid == 0 {
		pid = readPIDFile(st.PIDFile)
	}
	alive := st.Socket != "" && ownedPID(o.Kernel, pid, st.Socket)
	if !alive && revivable(o, st) {
		d, err := revive(ctx, o, st)
		if err != nil {
			errs = append(errs, fmt.Errorf("revive dead engine to remove its networks: %w", err))
		} else {
			done = append(done, st.Name+": revived the dead engine to remove its containers and networks")
			alive = true
			defer d.cli.Close()
		}
	}
	if alive {
		cli, err := newClient("unix://" + st.Socket)
		if err == nil {
			n, err := removeAllObjects(ctx, cli)
			cli.Close()
			if n > 0 {
				done = append(done, fmt.Sprintf("%s: removed %d containers and networks through the engine", st.Name, n))
			}
			switch {
			case err != nil && engine.Unreachable(err):
				// Its process lives but its socket is gone: it is shutting
				// down (a run killed while stopping its engines). The
				// teardown below stops it and its containers' processes and
				// removes what they leave; the leftover check is the proof.
				done = append(done, fmt.Sprintf("%s: engine no longer answers (stopping); its containers go with it", st.Name))
			case err != nil:
				errs = append(errs, err)
			}
		}
	}
	d, err := teardown(ctx, o, st, execIPTables{})
	done = append(done, d...)
	if err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// revivable: the engine had started (it has a pid), and what it needs to
// start again is still there: its bridge, its data root, its loop mount.
func revivable(o Options, st *State) bool {
	if st.PID == 0 || st.Socket == "" || st.DataRoot == "" {
		return false
	}
	if _, err := os.Stat(st.DataRoot + "/network"); err != nil {
		return false // no network store: it never made a network
	}
	if st.Loop != nil {
		mi, err := kernel.Mounts(o.Kernel.Proc())
		if err != nil || fsOf(mi, st.DataRoot) != st.Loop.FS {
			return false
		}
	}
	return o.linkExists(st.Bridge)
}

// revive starts the engine's dockerd again with its recorded flags, after
// stopping whatever of its old processes survived.
func revive(ctx context.Context, o Options, st *State) (*Daemon, error) {
	stopEngineProcesses(o, st)
	dockerd, err := dockerdPath(o)
	if err != nil {
		return nil, err
	}
	_ = os.Remove(st.Socket)
	// dockerd reuses a containerd whose pidfile names a process that
	// kill(pid, 0) finds; a zombie passes that test (a pid 1 that does not
	// reap leaves the old containerd as one), and dockerd then waits for it
	// forever. The old containerd is dead by now: drop its pidfile.
	ctrdPID := st.ExecRoot + "/containerd/containerd.pid"
	if pid := readPIDFile(ctrdPID); pid != 0 && !procAlive(o.Kernel, pid) {
		_ = os.Remove(ctrdPID)
	}
	d, g, err := spawnGuarded(ctx, o, st, execIPTables{}, func() (*Daemon, error) {
		d, err := spawnDockerd(o, st, dockerd, false)
		if err != nil {
			return nil, err
		}
		if err := d.waitReady(ctx, 30*time.Second); err != nil {
			return nil, err
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return d, g.RestoreErr
}

// Ping asks the engine for an answer within timeout.
func (d *Daemon) Ping(ctx context.Context, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := d.cli.Ping(pctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("engine %s at %s does not answer: %w", d.name, d.host, err)
	}
	return nil
}

// Restartable says whether Restart may start the engine again: a private
// engine this process started. The user's engine, and a private one
// another process shares with us, are not ours to restart.
func (d *Daemon) Restartable() bool { return d.owned && d.nested == nil }

// Restart starts the dockerd of a private engine this process started
// again after it died (or stopped answering): whatever of its old
// processes survived is stopped (containerd, shims and the containers of
// the run it served), dockerd is spawned with its recorded flags on its
// own state, socket and data root, and Restart returns once it answers.
// The Daemon and its client stay the same, so engines built on it keep
// working; their open connections to the old dockerd are dropped.
func (d *Daemon) Restart(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("restart engine %s: already closed", d.name)
	}
	if !d.owned {
		return fmt.Errorf("restart engine %s: not started by this process", d.name)
	}
	if d.podman != nil {
		return d.restartPodman(ctx)
	}
	// The new process is ours like the first: Close stops it by the
	// state's pid, which spawnDockerd updated in d.st.
	nd, err := revive(ctx, d.o, d.st)
	if nd != nil && nd.cli != nil {
		nd.cli.Close()
	}
	if err != nil {
		return fmt.Errorf("restart engine %s: %w", d.name, err)
	}
	_ = d.cli.Close() // idle connections to the dead dockerd
	return nil
}

// predefinedNetworks cannot be removed and go with the engine's bridge.
var predefinedNetworks = map[string]bool{"bridge": true, "host": true, "none": true}

// removeAllObjects removes every container and user-defined network of a
// private engine (everything in it is ctrperf's), returning how many.
func removeAllObjects(ctx context.Context, cli *client.Client) (int, error) {
	n := 0
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
			continue
		}
		n++
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return n, errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, nw := range nets.Items {
		if predefinedNetworks[nw.Name] {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", nw.Name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

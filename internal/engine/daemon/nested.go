package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// A nested engine is Docker inside Docker: a dockerd running in a container
// of the default engine, its data root on a volume of that engine, its
// socket in a host directory bind-mounted into the container. It needs no
// --privileged (which a dockerd without every capability cannot grant):
// the container gets every capability the host's own process holds,
// unconfined seccomp, AppArmor and system paths, and the host's cgroup
// hierarchy read-write, so the inner runc can make its containers' cgroups.
// The inner dockerd runs the host's own Docker binaries, bind-mounted read
// only, without iptables (the base image has none), in the host's network
// namespace, so its --net=host containers share the host's network
// (network: host only). It gets a bridge of its own, made here: with
// --bridge=none a dockerd deletes the interface docker0 at start, which in
// the host's namespace is the default engine's bridge.

// nestedBinaries are the programs of the host's Docker installation the
// inner engine runs, found in PATH.
var nestedBinaries = []string{"dockerd", "containerd", "containerd-shim-runc-v2", "runc", "docker-init"}

// nestedState is what a nested engine's Close removes.
type nestedState struct {
	outer     *Daemon // the engine the container runs on
	container string  // its id
	volume    string
	sockDir   string
	bridge    string // the inner engine's own bridge, in the host's namespace
	cgroup    string // the cgroup (cgroupfs path) its containers are under
}

// StartNested starts a nested engine for run runID on outer (the default
// engine) from image base (ctrperf/debian-base, which the caller has made
// sure of). spec.StorageDriver is the inner engine's driver (default
// overlay2, on the volume's ext4). Everything is named
// ctrperf-<key>-<run>, labelled with the run, and removed again on failure
// and by Close.
func StartNested(ctx context.Context, outer *Daemon, spec engine.EngineSpec, runID, base string, opts ...Option) (*Daemon, error) {
	o := buildOptions(opts)
	if !spec.Nested {
		return nil, errors.New("StartNested: the spec is not nested")
	}
	if spec.UserlandProxy != nil || (spec.DataRoot != "" && spec.DataRoot != "native") {
		return nil, fmt.Errorf("nested engine: only storage_driver applies (its data root is a volume, and it publishes no ports)")
	}
	driver := spec.StorageDriver
	if driver == "" {
		driver = "overlay2"
	}
	name := engineName(spec, runID)
	labels := engine.RunLabels(runID)
	ns := &nestedState{outer: outer, volume: name, sockDir: filepath.Join(o.execRootDir(), "nested-"+shortID(name))}
	d := &Daemon{name: name, host: "unix://" + filepath.Join(ns.sockDir, "docker.sock"), private: true, owned: true, o: o,
		st: &State{Name: name, RunID: runID, Spec: spec}, nested: ns}
	fail := func(err error) (*Daemon, error) {
		if cerr := d.closeNested(context.WithoutCancel(ctx)); cerr != nil {
			err = fmt.Errorf("%w; cleaning up after it also failed: %v", err, cerr)
		}
		return nil, fmt.Errorf("nested engine %s: %w", name, err)
	}

	var binds []string
	for _, b := range nestedBinaries {
		p, err := exec.LookPath(b)
		if err != nil {
			return nil, fmt.Errorf("nested engine: %s not found (Debian package docker.io): the inner engine runs the host's Docker binaries", b)
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		binds = append(binds, p+":/usr/local/bin/"+b+":ro")
	}
	caps, err := nestedCapabilities(o.Kernel)
	if err != nil {
		return nil, fmt.Errorf("nested engine: %w", err)
	}
	outerInfo, err := outer.Client().Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, fmt.Errorf("nested engine: info of engine %s: %w", outer.Name(), err)
	}
	outerParent, innerParent := nestedCgroupParents(outerInfo.Info.CgroupDriver, name)
	ns.cgroup = innerParent
	if err := os.MkdirAll(ns.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("nested engine: socket directory: %w", err)
	}
	ns.bridge = bridgeName(ns.sockDir)
	if _, _, err := createBridge(ns.bridge); err != nil {
		return fail(fmt.Errorf("bridge %s: %w", ns.bridge, err))
	}
	cli := outer.Client()
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: ns.volume, Labels: labels}); err != nil {
		return fail(fmt.Errorf("create volume: %w", err))
	}
	binds = append(binds, nestedCgroupBind(o.Kernel), ns.sockDir+":/run/ctrperf-nested")
	hc := &container.HostConfig{
		NetworkMode: "host",
		CapAdd:      caps,
		SecurityOpt: []string{"seccomp=unconfined", "apparmor=unconfined"},
		// systempaths=unconfined: the inner runc mounts a fresh /proc,
		// which the kernel refuses over a masked one.
		MaskedPaths:   []string{},
		ReadonlyPaths: []string{},
		Binds:         binds,
		Mounts:        []mount.Mount{{Type: mount.TypeVolume, Source: ns.volume, Target: "/var/lib/docker"}},
		Init:          nil,
	}
	hc.CgroupParent = outerParent
	cfg := &container.Config{
		Image:  base,
		Labels: labels,
		Env:    []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Entrypoint: []string{"/usr/local/bin/dockerd", "--host", "unix:///run/ctrperf-nested/docker.sock",
			"--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge", ns.bridge, "--storage-driver", driver,
			"--cgroup-parent", innerParent},
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: name})
	if err != nil {
		return fail(fmt.Errorf("create container: %w", err))
	}
	ns.container = created.ID
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return fail(fmt.Errorf("start container: %w", err))
	}
	if err := d.waitNested(ctx, o.Ready); err != nil {
		return fail(err)
	}
	return d, nil
}

// HostPID maps a pid this nested engine reports (in its container's pid
// namespace) to the host's pid of that process, or fails; for any other
// engine it returns pid unchanged.
func (d *Daemon) HostPID(ctx context.Context, pid int) (int, error) {
	if d.nested == nil {
		return pid, nil
	}
	in, err := d.nested.outer.Client().ContainerInspect(ctx, d.nested.container, client.ContainerInspectOptions{})
	if err != nil {
		return 0, err
	}
	if in.Container.State == nil || in.Container.State.Pid <= 0 {
		return 0, fmt.Errorf("nested engine %s: its container is not running", d.name)
	}
	return d.o.Kernel.HostPID(pid, in.Container.State.Pid)
}

// Nested reports whether the engine is a dockerd in a container.
func (d *Daemon) Nested() bool { return d.nested != nil }

// waitNested polls the inner socket until dockerd answers, its container
// exits, or timeout.
func (d *Daemon) waitNested(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		if cli, err := ping(ctx, d.host, time.Second); err == nil {
			d.cli = cli
			return nil
		}
		in, err := d.nested.outer.Client().ContainerInspect(ctx, d.nested.container, client.ContainerInspectOptions{})
		if err == nil && in.Container.State != nil && !in.Container.State.Running {
			return fmt.Errorf("its dockerd exited with status %d before answering:%s", in.Container.State.ExitCode, d.nestedLogs(ctx))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its dockerd did not answer within %s:%s", timeout, d.nestedLogs(ctx))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nestedLogs is the tail of the inner dockerd's output, for an error.
func (d *Daemon) nestedLogs(ctx context.Context) string {
	rc, err := d.nested.outer.Client().ContainerLogs(ctx, d.nested.container, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	b := make([]byte, 4096)
	n, _ := rc.Read(b)
	var lines []string
	for _, l := range strings.Split(string(b[:n]), "\n") {
		if len(l) > 8 {
			lines = append(lines, strings.TrimSpace(l[8:])) // stdcopy's frame header
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return " " + strings.Join(lines, " | ")
}

// closeNested stops the inner engine's containers through its own API
// (so it removes their cgroups), then removes the outer container, its
// volume and the socket directory. Safe on a partial start.
func (d *Daemon) closeNested(ctx context.Context) error {
	ns := d.nested
	var errs []error
	if d.cli != nil {
		if res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true}); err == nil {
			for _, c := range res.Items {
				if _, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("remove inner container %s: %w", c.ID[:12], err))
				}
			}
		}
	}
	cli := ns.outer.Client()
	if ns.container != "" {
		if _, err := cli.ContainerRemove(ctx, ns.container, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container: %w", err))
		}
	}
	if ns.volume != "" {
		if _, err := cli.VolumeRemove(ctx, ns.volume, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", ns.volume, err))
		}
	}
	if ns.bridge != "" {
		if _, err := deleteBridge(ns.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(ns.sockDir); err != nil {
		errs = append(errs, err)
	}
	if ns.cgroup != "" {
		// runc removes a container's own group, not the parents it made.
		if _, err := engine.RemoveEmptyCgroups(d.o.Kernel, ns.cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nestedDroppedCaps are capabilities of the host the outer container does
// not get: the inner dockerd needs none of them, and with them root in the
// container could load kernel modules, write raw I/O ports and memory, or
// reboot the machine.
var nestedDroppedCaps = []string{"SYS_MODULE", "SYS_RAWIO", "SYS_BOOT"}

// nestedCapabilities are the capabilities the outer container gets: this
// process's bounding set less nestedDroppedCaps.
func nestedCapabilities(fs kernel.FS) ([]string, error) {
	caps, err := hostCapabilities(fs)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(caps, func(c string) bool { return slices.Contains(nestedDroppedCaps, c) }), nil
}

// nestedCgroupBind mounts the cgroup hierarchy ctrperf reads (the
// Options' kernel, not always the host's /sys/fs/cgroup) where the inner
// dockerd expects one, writable: it makes the inner containers' groups.
func nestedCgroupBind(fs kernel.FS) string {
	return fs.Cgroup() + ":" + kernel.CgroupMount + ":rw"
}

// nestedCgroupParents are the outer container's cgroup parent, as the
// outer engine's cgroup driver names it, and the inner dockerd's
// --cgroup-parent, a cgroupfs path (the inner engine has no systemd): a
// group of the nested engine's own under ctrperf's, holding the outer
// container and every inner one, so that what limits ctrperf's group
// limits the inner containers too (by default they would sit under
// /docker, beside the host's containers) and clean finds them.
func nestedCgroupParents(driver, name string) (outer, inner string) {
	if driver == "systemd" {
		return engine.NamePrefix + ".slice", "/" + engine.NamePrefix + ".slice/" + name
	}
	p := "/" + engine.NamePrefix + "/" + name
	return p, p
}

// hostCapabilities are the capabilities in this process's bounding set,
// as Docker names them (CAP_ dropped): what the outer container may get.
func hostCapabilities(fs kernel.FS) ([]string, error) {
	set, err := kernel.BoundingSet(fs.Proc(), os.Getpid())
	if err != nil {
		return nil, err
	}
	last, err := kernel.LastCapability(fs.Proc())
	if err != nil {
		return nil, err
	}
	var out []string
	// Up to CAP_AUDIT_READ (37): Docker 20.10 may not know the newer
	// ones by name, and the inner dockerd does not need them.
	for n := 0; n <= last && n <= 37; n++ {
		if set&(1<<uint(n)) != 0 {
			out = append(out, strings.TrimPrefix(kernel.CapabilityName(n), "CAP_"))
		}
	}
	return out, nil
}

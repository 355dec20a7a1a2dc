package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"ctrperf/internal/kernel"
)

// CleanOption configures Clean.
type CleanOption func(*cleanConfig)

type cleanConfig struct {
	dryRun    bool
	bindRoot  string
	hostState string
	hostData  string
	kernel    kernel.FS
	own       *Ownership
}

// CleanOwners leaves alone what live owners hold (unless o forces) and
// records every object with its owner in o.
func CleanOwners(o *Ownership) CleanOption { return func(c *cleanConfig) { c.own = o } }

// CleanDryRun lists what Clean would remove without removing it.
func CleanDryRun() CleanOption { return func(c *cleanConfig) { c.dryRun = true } }

// CleanDirs overrides where Clean looks for bind directories and
// host-runtime state and data (tests; empty keeps the default).
func CleanDirs(bindRoot, hostState, hostData string) CleanOption {
	return func(c *cleanConfig) {
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&c.bindRoot, bindRoot)
		set(&c.hostState, hostState)
		set(&c.hostData, hostData)
	}
}

// CleanKernel overrides where Clean reads the cgroup hierarchies and /proc.
func CleanKernel(fs kernel.FS) CleanOption { return func(c *cleanConfig) { c.kernel = fs } }

// Clean removes what runs left behind: containers, networks and volumes
// labelled ctrperf.managed (and ctrperf.run=runID when runID is not empty)
// on the engine cli talks to (nil: skip Docker), containers only when
// ctrperf created them (not the user's, made from one of ctrperf's images:
// see createdByCtrperf); bind directories, client namespaces and veths,
// host-runtime processes, cgroups, mounts and data recorded in the host
// state files, the cgroups of load generators that died without moving
// back out of them, and nested engines' empty groups. It returns what it
// removed (or, on a dry run, would remove). Failures on one object do not
// stop the rest. Cached images are kept: they are not leftovers.
func Clean(ctx context.Context, cli client.APIClient, runID string, opts ...CleanOption) ([]string, error) {
	cfg := cleanConfig{bindRoot: DefaultBindRoot, hostState: filepath.Join(DefaultRunDir, "host"),
		hostData: DefaultHostDataRoot, kernel: kernel.DefaultFS()}
	for _, o := range opts {
		o(&cfg)
	}
	var errs []error
	removed, err := cleanRun(ctx, cli, runID, cfg.bindRoot, cfg.dryRun, cfg.own)
	if err != nil {
		errs = append(errs, err)
	}
	h := NewBareMetal(WithHostStateDir(cfg.hostState), WithHostDataRoot(cfg.hostData), WithHostKernel(cfg.kernel))
	hr, err := h.cleanStates(ctx, runID, cfg.dryRun, cfg.own)
	removed = append(removed, hr...)
	if err != nil {
		errs = append(errs, err)
	}
	rr, err := NewRouteTable().clean(runID, cfg.dryRun, cfg.own)
	removed = append(removed, rr...)
	if err != nil {
		errs = append(errs, err)
	}
	gr, err := cleanGeneratorCgroups(cfg.kernel, runID, cfg.dryRun, cfg.own)
	removed = append(removed, gr...)
	if err != nil {
		errs = append(errs, err)
	}
	// After the Docker objects: a nested engine's group empties when its
	// outer container goes.
	nr, err := cleanNestedCgroups(cfg.kernel, cfg.dryRun)
	removed = append(removed, nr...)
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// generatorGroupRe matches the name of a load generator's cgroup.
var generatorGroupRe = regexp.MustCompile(`^` + regexp.QuoteMeta(GeneratorCgroupPrefix) + `[0-9]+$`)

// cleanGeneratorCgroups removes the groups load generators moved themselves
// into (ctrperf/generator-<pid> in a v1 hierarchy or the unified one) that
// a killed ctrperf left behind. They belong to no run, so every clean
// removes the empty ones. A group that still holds processes belongs to a
// ctrperf that is running: it is left alone, and counts as left behind
// only when everything is cleaned (runID "") without an Ownership; with
// one, a group is its generator's, live while that process runs.
func cleanGeneratorCgroups(kern kernel.FS, runID string, dry bool, own *Ownership) ([]string, error) {
	var dirs []string
	for _, pattern := range []string{
		kern.Cgroup("*", NamePrefix, GeneratorCgroupPrefix+"*"), // v1, any hierarchy
		kern.Cgroup(NamePrefix, GeneratorCgroupPrefix+"*"),      // v2
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, m...)
	}
	var removed []string
	var errs []error
	seen := map[string]bool{}
	for _, d := range dirs {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || seen[real] || !generatorGroupRe.MatchString(filepath.Base(d)) {
			continue // gone meanwhile, or reached again through a co-mounted hierarchy's symlink
		}
		seen[real] = true
		pids := readPids(filepath.Join(d, "cgroup.procs"))
		if own != nil {
			pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), GeneratorCgroupPrefix))
			if own.keepGenerator("cgroup "+d, pid, len(pids) > 0) || len(pids) > 0 {
				continue // a forced clean still cannot remove a group with processes
			}
		} else if len(pids) > 0 {
			if runID == "" {
				errs = append(errs, fmt.Errorf("generator cgroup %s still holds processes %v (a ctrperf still running?)", d, pids))
			}
			continue
		}
		if !dry {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				continue
			}
		}
		removed = append(removed, "cgroup "+d)
	}
	return removed, errors.Join(errs...)
}

// cleanRun removes a run's Docker objects (by label), bind directories and
// client namespace; runID "" means every run. Teardown and Clean share it;
// own (nil for a teardown) keeps what live owners hold.
func cleanRun(ctx context.Context, cli client.APIClient, runID, bindRoot string, dry bool, own *Ownership) ([]string, error) {
	var removed []string
	var errs []error
	if cli != nil {
		r, err := cleanDocker(ctx, cli, runID, dry, own)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	r, err := removeLoopbackRules(ctx, execIPTables, runID, dry, own)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	r, err = removeAdmit(ctx, execIPTables, runID, dry, own)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	// Bind directories after the containers that mounted them.
	var bindDirs []string
	if runID != "" {
		bindDirs = []string{filepath.Join(bindRoot, runID)}
	} else if ents, err := os.ReadDir(bindRoot); err == nil {
		for _, e := range ents {
			bindDirs = append(bindDirs, filepath.Join(bindRoot, e.Name()))
		}
	}
	for _, dir := range bindDirs {
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if own.Keep("bind directory "+dir, filepath.Base(dir)) {
			continue
		}
		if !dry {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove bind directory %s: %w", dir, err))
				continue
			}
		}
		removed = append(removed, "bind directory "+dir)
	}

	var nss, links []string
	if runID != "" {
		ns, hostIf, _ := externalNames(runID)
		nss, links = []string{ns}, []string{hostIf}
	} else {
		var err error
		nss, links, err = listExternal()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if own != nil {
		// Namespace and veth names are hashes of run ids: the owners'
		// recorded run ids name them.
		presentNS, presentLinks, _ := listExternal()
		nss = slices.DeleteFunc(nss, func(n string) bool {
			return !slices.Contains(presentNS, n) || own.keepExternal("netns "+n, n, runID)
		})
		links = slices.DeleteFunc(links, func(l string) bool {
			return !slices.Contains(presentLinks, l) || own.keepExternal("veth "+l, l, runID)
		})
	}
	if dry {
		_, present, _ := listExternal()
		for _, n := range nss {
			if _, err := os.Lstat(filepath.Join(netnsDir, n)); err == nil {
				removed = append(removed, "netns "+n)
			}
		}
		for _, l := range links {
			if slices.Contains(present, l) {
				removed = append(removed, "veth "+l)
			}
		}
	} else {
		r, err := removeNetnsAndVeth(nss, links)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// removeConcurrency is how many containers a clean removes at once.
const removeConcurrency = 4

// CleanEngineObjects removes the containers, networks and volumes of
// ctrperf's on the engine cli talks to, and nothing of the host's (a pass
// of Clean covers those), for the runs whose id runs says (nil: every
// run): an engine that holds a session's runs only (a podman service)
// is swept by the session's prefix. Each object is decided by the
// CleanOwners given; CleanDryRun lists.
func CleanEngineObjects(ctx context.Context, cli client.APIClient, runs func(runID string) bool, opts ...CleanOption) ([]string, error) {
	var cfg cleanConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cleanDockerOf(ctx, cli, "", runs, cfg.dryRun, cfg.own)
}

func cleanDocker(ctx context.Context, cli client.APIClient, runID string, dry bool, own *Ownership) ([]string, error) {
	return cleanDockerOf(ctx, cli, runID, nil, dry, own)
}

// cleanDockerOf is cleanDocker of the runs whose id runs says (nil: all).
func cleanDockerOf(ctx context.Context, cli client.APIClient, runID string, runs func(string) bool, dry bool, own *Ownership) ([]string, error) {
	ofRun := func(labels map[string]string) bool { return runs == nil || runs(labels[LabelRun]) }
	f := client.Filters{}.Add("label", LabelManaged+"=true")
	if runID != "" {
		f.Add("label", LabelRun+"="+runID)
	}
	var removed []string
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("list ctrperf containers: %w", err))
	}
	images := map[string]map[string]string{}
	type doomed struct{ id, name string }
	var take []doomed
	for _, c := range cs.Items {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if !ofRun(c.Labels) {
			continue
		}
		if mine, err := createdByCtrperf(ctx, cli, c.Labels, c.ImageID, images); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", name, err))
			continue
		} else if !mine {
			continue // the user's, made from one of ctrperf's images
		}
		if own.Keep("container "+name, c.Labels[LabelRun]) {
			continue
		}
		take = append(take, doomed{c.ID, name})
	}
	// The engine stops and removes containers side by side: one after
	// another, a run of several services (or instances) paid a kill and a
	// layer unmount per container in its teardown.
	rerrs := make([]error, len(take))
	if !dry {
		var wg sync.WaitGroup
		sem := make(chan struct{}, removeConcurrency)
		for i, c := range take {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				rerrs[i] = removeContainer(ctx, cli, c.id, 200*time.Millisecond)
			}()
		}
		wg.Wait()
	}
	for i, c := range take {
		if rerrs[i] != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.name, rerrs[i]))
			continue
		}
		removed = append(removed, "container "+c.name)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("list ctrperf networks: %w", err))
	}
	for _, n := range ns.Items {
		if !ofRun(n.Labels) || own.Keep("network "+n.Name, n.Labels[LabelRun]) {
			continue
		}
		if !dry {
			if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
				continue
			}
		}
		removed = append(removed, "network "+n.Name)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("list ctrperf volumes: %w", err))
	}
	for _, v := range vs.Items {
		if !ofRun(v.Labels) || own.Keep("volume "+v.Name, v.Labels[LabelRun]) {
			continue
		}
		if !dry {
			if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
				continue
			}
		}
		removed = append(removed, "volume "+v.Name)
	}
	return removed, errors.Join(errs...)
}

// imageInspector is what createdByCtrperf needs of the Engine API.
type imageInspector interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
}

// createdByCtrperf says whether a container labelled ctrperf.managed was
// made by ctrperf: ctrperf sets ctrperf.run when it creates a container,
// while a container anyone makes from one of ctrperf's images inherits
// that image's labels, ctrperf.managed among them (the README offers
// ctrperf/debian-base for the user's own commands). So the run label must
// be there and must not be the image's own. The image's labels are read
// once per image into images. An image the engine no longer knows passed
// nothing on.
func createdByCtrperf(ctx context.Context, cli imageInspector, labels map[string]string, imageID string, images map[string]map[string]string) (bool, error) {
	run := labels[LabelRun]
	if run == "" {
		return false, nil
	}
	il, ok := images[imageID]
	if !ok && imageID != "" {
		in, err := cli.ImageInspect(ctx, imageID)
		switch {
		case cerrdefs.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("inspect its image %s to tell whether ctrperf made it: %w", imageID, err)
		case in.Config != nil:
			il = in.Config.Labels
		}
		images[imageID] = il
	}
	return il[LabelRun] != run, nil
}

// containerRemover is what removeContainer needs of the Engine API.
type containerRemover interface {
	ContainerRemove(ctx context.Context, id string, opts client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, opts client.ContainerInspectOptions) (client.ContainerInspectResult, error)
}

// removeContainer force-removes a container. A container that is already
// gone is removed; one whose removal is already in progress (a teardown
// that a SIGKILL cut short had asked for it, and the engine carries on) is
// waited for, polling every poll, until the engine no longer knows it or
// ctx ends.
func removeContainer(ctx context.Context, cli containerRemover, id string, poll time.Duration) error {
	_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil || cerrdefs.IsNotFound(err):
		return nil
	case !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "already in progress"):
		return err
	}
	for {
		if _, ierr := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); cerrdefs.IsNotFound(ierr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still being removed when %v)", err, ctx.Err())
		case <-time.After(poll):
		}
	}
}

package isolate

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"ctrperf/internal/kernel"
	"ctrperf/internal/labels"
)

// Labels a container uses to opt in and to state its CPU entitlement.
const (
	LabelIsolate = labels.Isolate     // any value but "false" opts in
	LabelCPUs    = labels.IsolateCPUs // CPUs it is entitled to (and dedicated, when pinned)
)

// DefaultRelist is how often the runtime lists containers even without an
// event: a missed event costs at most this long.
const DefaultRelist = 5 * time.Second

// containerEvents are the Docker events that change membership, a PID or
// what the engine wrote into a container's cgroup.
var containerEvents = []string{"start", "restart", "die", "pause", "unpause", "update", "destroy"}

// DockerRuntime keeps the set of managed containers from Docker events plus
// a relist every Relist: a tick costs no API call, only an event or the
// relist does (and then one inspect per new or changed container). It also
// resolves a container's cgroup directories from its init's
// /proc/PID/cgroup, cached with the membership.
type DockerRuntime struct {
	Client client.APIClient
	All    bool // manage every running container, not only those with the label
	// Labels narrows the selection further ("key" or "key=value" filters).
	Labels []string
	// Kernel is where the containers' /proc/PID/cgroup and the cgroup
	// layout are read (the zero FS: the real mounts, the layout detected
	// at every call; kernel.NewFS detects it once).
	Kernel kernel.FS
	Relist time.Duration // default DefaultRelist

	mu       sync.Mutex
	members  map[string]*member
	dirty    map[string]bool
	listed   time.Time
	listOnce bool
}

var _ Source = (*DockerRuntime)(nil)

type member struct {
	m     Managed
	paths map[string]string // /proc/PID/cgroup of its init
	dirs  map[string]string // controller -> its directory, as resolved (a step's reads resolve no path again)
	// podShared: its pod runs other containers too (Kubernetes), so a
	// demotion sets its own cgroup, not the pod's (CRIRuntime.PodLevel).
	podShared bool
}

// cachedDir is mb's directory of ctl when resolved before.
func (mb *member) cachedDir(ctl string) (string, bool) {
	d, ok := mb.dirs[ctl]
	return d, ok
}

// remember keeps a resolved directory of ctl.
func (mb *member) remember(ctl, dir string) {
	if mb.dirs == nil {
		mb.dirs = map[string]string{}
	}
	mb.dirs[ctl] = dir
}

var (
	_ Runtime     = (*DockerRuntime)(nil)
	_ DirResolver = (*DockerRuntime)(nil)
)

// Managed returns the running and paused containers that opted in, with
// their init PID. A container leaves the set only when the engine says it
// is no longer running (listed otherwise, or not found): a failed inspect
// keeps what was known. A list that fails is an error, and the caller
// forgets nothing.
func (d *DockerRuntime) Managed(ctx context.Context) ([]Managed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	relist := d.Relist
	if relist <= 0 {
		relist = DefaultRelist
	}
	if d.listOnce && len(d.dirty) == 0 && time.Since(d.listed) < relist {
		return d.snapshot(), nil
	}
	f := client.Filters{}.Add("status", "running").Add("status", "paused")
	if !d.All {
		f.Add("label", LabelIsolate)
	}
	for _, l := range d.Labels {
		f.Add("label", l)
	}
	list, err := d.Client.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	if d.members == nil {
		d.members = map[string]*member{}
	}
	if d.dirty == nil {
		d.dirty = map[string]bool{}
	}
	seen := map[string]bool{}
	var errs []string
	for _, c := range list.Items {
		if v, ok := c.Labels[LabelIsolate]; ok && v == "false" {
			continue
		}
		seen[c.ID] = true
		m := Managed{ID: c.ID, Name: strings.TrimPrefix(firstName(c.Names), "/"), Paused: c.State == "paused"}
		if v := c.Labels[LabelCPUs]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Sprintf("container %s: label %s=%q: want a whole number >= 1 (ignored)", m.Name, LabelCPUs, v))
			} else {
				m.CPUs = n
			}
		}
		old, known := d.members[c.ID]
		if known && !d.dirty[c.ID] && old.m.PID != 0 {
			m.PID = old.m.PID
			old.m = m
			continue
		}
		paths, pid, err := d.inspect(ctx, c.ID)
		switch {
		case err == nil:
			m.PID = pid
			d.members[c.ID] = &member{m: m, paths: paths}
			delete(d.dirty, c.ID)
		case known:
			old.m.Paused = m.Paused // keep the last good PID and paths; retry next time
		default:
			d.dirty[c.ID] = true // not started far enough yet: retry next time
		}
	}
	for id := range d.members {
		if !seen[id] {
			delete(d.members, id) // the engine listed it as neither running nor paused
			delete(d.dirty, id)
		}
	}
	d.listed, d.listOnce = time.Now(), true
	out := d.snapshot()
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

func (d *DockerRuntime) snapshot() []Managed {
	out := make([]Managed, 0, len(d.members))
	for _, mb := range d.members {
		out = append(out, mb.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// inspect returns a running container's init PID and cgroup paths, checked
// to be the container's own (between inspect and the read the container
// may have died and its PID been reused, or its init may not be in its
// cgroup yet: writing the root cpuset would confine the whole machine).
func (d *DockerRuntime) inspect(ctx context.Context, id string) (map[string]string, int, error) {
	res, err := d.Client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, 0, fmt.Errorf("%s: %w", id, ErrContainerGone)
		}
		return nil, 0, fmt.Errorf("inspect %s: %w", id, err)
	}
	insp := res.Container
	if insp.State == nil || insp.State.Pid == 0 {
		return nil, 0, fmt.Errorf("%s is not running: %w", id, ErrContainerGone)
	}
	pid := insp.State.Pid
	paths, err := kernel.ProcCgroups(d.Kernel.Proc(), pid)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", err.Error(), ErrContainerGone)
	}
	for _, p := range paths {
		if ContainerCgroup(p, id) {
			return paths, pid, nil // each controller's directory is checked again by Dir
		}
	}
	return nil, 0, fmt.Errorf("pid %d of %s is in no cgroup of the container's (%v): %w", pid, short(id), paths, ErrContainerGone)
}

// Dir implements DirResolver from the cached membership; a container not
// in it (restoring a crashed controller's checkpoint) is inspected.
func (d *DockerRuntime) Dir(ctx context.Context, id, ctl string) (string, error) {
	d.mu.Lock()
	mb, ok := d.members[id]
	var paths map[string]string
	if ok && !d.dirty[id] {
		if dir, ok := mb.cachedDir(ctl); ok {
			d.mu.Unlock()
			return dir, nil
		}
		paths = mb.paths
	}
	d.mu.Unlock()
	if paths == nil {
		p, _, err := d.inspect(ctx, id)
		if err != nil {
			return "", err
		}
		paths = p
	}
	dir, err := ownDir(d.layout(), paths, id, ctl)
	if err == nil && ok {
		d.mu.Lock()
		if d.members[id] == mb && !d.dirty[id] {
			mb.remember(ctl, dir)
		}
		d.mu.Unlock()
	}
	return dir, err
}

func (d *DockerRuntime) layout() kernel.Layout { return d.Kernel.Cgroups() }

// ownDir is a container's directory of controller ctl among its init's
// cgroup paths, refused when it is not the container's own.
func ownDir(l kernel.Layout, paths map[string]string, id, ctl string) (string, error) {
	dir, ok := l.Dir(paths, ctl)
	if !ok {
		return "", fmt.Errorf("container %s has no %q cgroup", short(id), ctl)
	}
	if !ContainerCgroup(dir, id) {
		return "", fmt.Errorf("container %s: %s cgroup %q is not its own: %w", short(id), ctl, dir, ErrContainerGone)
	}
	return dir, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func firstName(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	return ns[0]
}

// Events returns a channel that fires whenever a container starts, dies, is
// paused, unpaused, updated, restarted or destroyed; the container is
// marked for a fresh inspect, so the controller reacts at once rather than
// at the next relist.
func (d *DockerRuntime) Events(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			f := client.Filters{}.Add("type", "container")
			for _, e := range containerEvents {
				f.Add("event", e)
			}
			ev := d.Client.Events(ctx, client.EventsListOptions{Filters: f})
			msgs, errs := ev.Messages, ev.Err
		loop:
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-msgs:
					d.mu.Lock()
					if d.dirty == nil {
						d.dirty = map[string]bool{}
					}
					d.dirty[m.Actor.ID] = true
					d.mu.Unlock()
					select {
					case out <- struct{}{}:
					default:
					}
				case <-errs:
					break loop
				}
			}
			// The engine went away: mark everything for a relist and retry
			// after a pause.
			d.mu.Lock()
			d.listOnce = false
			d.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

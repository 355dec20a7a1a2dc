package isolate

import (
	"bufio"
	"context"
	"fmt"
	cerrdefs "github.com/containerd/errdefs"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// Labels a container uses to opt in and to ask for its CPU count.
const (
	LabelIsolate = "ctrperf.isolate"      // any value but "false" opts in
	LabelCPUs    = "ctrperf.isolate.cpus" // dedicated CPUs wanted
)

// DockerRuntime lists managed containers through the Docker Engine API.
type DockerRuntime struct {
	Client client.APIClient
	All    bool // manage every running container, not only those with the label
	// Labels narrows the selection further ("key" or "key=value" filters).
	Labels []string
}

var _ Runtime = (*DockerRuntime)(nil)

// Managed returns the running containers that opted in, with their init PID.
func (d *DockerRuntime) Managed(ctx context.Context) ([]Managed, error) {
	f := filters.NewArgs(filters.Arg("status", "running"))
	if !d.All {
		f.Add("label", LabelIsolate)
	}
	for _, l := range d.Labels {
		f.Add("label", l)
	}
	list, err := d.Client.ContainerList(ctx, container.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []Managed
	for _, c := range list {
		if v, ok := c.Labels[LabelIsolate]; ok && v == "false" {
			continue
		}
		m := Managed{ID: c.ID, Name: strings.TrimPrefix(firstName(c.Names), "/")}
		if v := c.Labels[LabelCPUs]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("container %s: label %s=%q: want a whole number >= 1", m.Name, LabelCPUs, v)
			}
			m.CPUs = n
		}
		insp, err := d.Client.ContainerInspect(ctx, c.ID)
		if err != nil {
			continue // gone between list and inspect
		}
		if insp.State != nil {
			m.PID = insp.State.Pid
		}
		out = append(out, m)
	}
	return out, nil
}

func firstName(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	return ns[0]
}

// Events returns a channel that fires whenever a container starts or dies,
// so the controller reacts at once rather than at the next tick.
func (d *DockerRuntime) Events(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			f := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("event", "start"), filters.Arg("event", "die"))
			msgs, errs := d.Client.Events(ctx, events.ListOptions{Filters: f})
		loop:
			for {
				select {
				case <-ctx.Done():
					return
				case <-msgs:
					select {
					case out <- struct{}{}:
					default:
					}
				case <-errs:
					break loop
				}
			}
			select { // the engine went away: retry after a pause
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

// CgroupPaths resolves a process's cgroup path per controller from
// /proc/PID/cgroup under procRoot. For cgroup v2 the key is "".
func CgroupPaths(procRoot string, pid int) (map[string]string, error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	defer f.Close()
	return parseProcCgroup(f)
}

func parseProcCgroup(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, sc.Err()
}

// CgroupUsage reads a container's cumulative CPU time from its cgroup:
// cpuacct.usage (v1) or cpu.stat usage_usec (v2).
type CgroupUsage struct {
	ProcRoot   string // /proc
	CgroupRoot string // /sys/fs/cgroup
}

var _ UsageReader = CgroupUsage{}

// CPUTime implements UsageReader.
func (u CgroupUsage) CPUTime(_ context.Context, m Managed) (time.Duration, error) {
	paths, err := CgroupPaths(u.ProcRoot, m.PID)
	if err != nil {
		return 0, err
	}
	if p, ok := paths["cpuacct"]; ok {
		file := filepath.Join(u.CgroupRoot, "cpuacct", p, "cpuacct.usage")
		b, err := os.ReadFile(file)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", file, err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", file, err)
		}
		return time.Duration(ns), nil
	}
	if p, ok := paths[""]; ok {
		file := filepath.Join(u.CgroupRoot, p, "cpu.stat")
		fh, err := os.Open(file)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", file, err)
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "usage_usec" {
				us, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("parse %s: %w", file, err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
		return 0, fmt.Errorf("%s has no usage_usec", file)
	}
	return 0, fmt.Errorf("pid %d has neither a cpuacct (v1) nor a unified (v2) cgroup", m.PID)
}

// CgroupPathOf returns a function mapping a container id to its cpuset
// cgroup path, for CgroupCPUSet.
func CgroupPathOf(cli client.APIClient, procRoot string, v2 bool) func(ctx context.Context, id string) (string, error) {
	return func(ctx context.Context, id string) (string, error) {
		insp, err := cli.ContainerInspect(ctx, id)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return "", fmt.Errorf("%s: %w", id, ErrContainerGone)
			}
			return "", fmt.Errorf("inspect %s: %w", id, err)
		}
		if insp.State == nil || insp.State.Pid == 0 {
			return "", fmt.Errorf("%s is not running: %w", id, ErrContainerGone)
		}
		paths, err := CgroupPaths(procRoot, insp.State.Pid)
		if err != nil {
			return "", fmt.Errorf("%s: %w", err.Error(), ErrContainerGone)
		}
		key := "cpuset"
		if v2 {
			key = ""
		}
		p, ok := paths[key]
		if !ok {
			return "", fmt.Errorf("container %s (pid %d) has no %q cgroup", id, insp.State.Pid, key)
		}
		// Between inspect and the read the container may have died and its
		// PID been reused, or its init may not be in its cgroup yet: never
		// hand out a path that is not the container's own (writing the root
		// cpuset would confine the whole machine).
		if !ContainerCgroup(p, id) {
			return "", fmt.Errorf("pid %d of %s is in cgroup %q, not the container's: %w", insp.State.Pid, id[:12], p, ErrContainerGone)
		}
		return p, nil
	}
}

// ContainerCgroup reports whether a cgroup path belongs to the container id
// (cgroupfs driver: /docker/<id>; systemd driver: .../docker-<id>.scope).
func ContainerCgroup(path, id string) bool {
	return path != "/" && path != "" && id != "" && strings.Contains(path, id)
}

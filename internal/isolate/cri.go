//go:build !nokube

// The CRI source links grpc and k8s.io/cri-api: a program built with -tags
// nokube (make demo's build) has the Docker source alone.

package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"ctrperf/internal/kernel"
)

// CRIClient is the part of a node's CRI runtime service (containerd,
// CRI-O) the controller uses: k8s.io/cri-client's RuntimeService has it.
type CRIClient interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// CRIRuntime is the controller's membership on a Kubernetes node: the
// running containers of the pods that opted in (the pod label
// ctrperf.isolate: "true", on the sandbox), from the node's CRI runtime.
// As DockerRuntime, a tick costs no API call: the set is kept from the
// runtime's container events plus a relist every Relist, and a new or
// changed container costs one verbose status (its init PID and its OCI
// resources). A container's cgroups come from its init's /proc/PID/cgroup,
// checked to be its own.
//
// Entitlement comes from the pod: the container's CPU request (kubelet
// writes it as cpu.shares = request × 1024), or its limit when only a limit
// is set (then kubelet makes the request equal to it). A BestEffort
// container states nothing and gets a fair share, as on Docker.
type CRIRuntime struct {
	Client CRIClient
	All    bool // manage every running pod's containers, not only those with the label
	// Labels narrows the selection to pods that also carry these ("key"
	// or "key=value").
	Labels []string
	Kernel kernel.FS
	Relist time.Duration // default DefaultRelist
	// PodLevel resolves the cpu controller's directory (the CPU class a
	// demotion writes) to the container's pod cgroup, its parent, when
	// the container is its pod's only running one. A container that
	// shares its pod keeps its own: two containers demoting and restoring
	// one pod cgroup would take each other's write for the original.
	PodLevel bool

	mu       sync.Mutex
	members  map[string]*member
	dirty    map[string]bool
	listed   time.Time
	listOnce bool
}

var _ Source = (*CRIRuntime)(nil)

// StartCRI is Start on a Kubernetes node: membership from the node's CRI
// runtime (pods labelled ctrperf.isolate: "true"), entitlement from each
// pod's CPU request. With o.Params.DemoteOnly (a static CPU manager on the
// node) it writes no cpuset.
func StartCRI(ctx context.Context, cri CRIClient, o Options) (*Running, error) {
	if o.Params.withDefaults().DemoteClass == DemoteWeight {
		return nil, &ParamError{Key: "demote_class", Err: errors.New("weight is not for Kubernetes: kubelet sets the pods' and containers' weights from their requests, and a controller that lowered them would fight it; use idle (or auto, the default)")}
	}
	o.Params.DemoteClass = o.Params.withDefaults().DemoteClass.resolve(true)
	return startWith(ctx, o, func(o Options) (Source, error) {
		return &CRIRuntime{Client: cri, Kernel: o.Kernel, All: o.All, Labels: o.Labels, PodLevel: o.Params.withDefaults().DemoteCgroup == DemotePod}, nil
	})
}

// Managed returns the running containers of the pods that opted in, with
// their init PID and requested CPUs. Like DockerRuntime, a container leaves
// the set only when the runtime no longer lists it running; a failed list
// is an error and forgets nothing.
func (r *CRIRuntime) Managed(ctx context.Context) ([]Managed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	relist := r.Relist
	if relist <= 0 {
		relist = DefaultRelist
	}
	if r.listOnce && len(r.dirty) == 0 && time.Since(r.listed) < relist {
		return r.snapshot(), nil
	}
	sf := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	if !r.All {
		sf.LabelSelector = map[string]string{LabelIsolate: "true"}
	}
	pods, err := r.Client.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	byID := map[string]*runtimeapi.PodSandbox{}
	for _, p := range pods {
		if v, ok := p.Labels[LabelIsolate]; ok && v == "false" || !hasLabels(p.Labels, r.Labels) {
			continue
		}
		byID[p.Id] = p
	}
	list, err := r.Client.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	if r.members == nil {
		r.members = map[string]*member{}
	}
	if r.dirty == nil {
		r.dirty = map[string]bool{}
	}
	perPod := map[string]int{}
	for _, c := range list {
		perPod[c.PodSandboxId]++
	}
	seen := map[string]bool{}
	for _, c := range list {
		pod, ok := byID[c.PodSandboxId]
		if !ok {
			continue
		}
		seen[c.Id] = true
		old, known := r.members[c.Id]
		if known && !r.dirty[c.Id] && old.m.PID != 0 {
			if perPod[c.PodSandboxId] > 1 && !old.podShared {
				// a container joined its pod: what is demoted from now on is
				// its own cgroup, unless the pod's is already (cached)
				old.podShared = true
			}
			continue
		}
		m := Managed{ID: c.Id, Name: criName(pod, c)}
		paths, pid, req, err := r.inspect(ctx, c.Id)
		switch {
		case err == nil:
			m.PID, m.Request = pid, req
			r.members[c.Id] = &member{m: m, paths: paths, podShared: perPod[c.PodSandboxId] > 1}
			delete(r.dirty, c.Id)
		case known:
			// keep the last good PID and paths; retry next time
		default:
			r.dirty[c.Id] = true // not started far enough yet: retry next time
		}
	}
	for id := range r.members {
		if !seen[id] {
			delete(r.members, id)
			delete(r.dirty, id)
		}
	}
	r.listed, r.listOnce = time.Now(), true
	return r.snapshot(), nil
}

func (r *CRIRuntime) snapshot() []Managed {
	out := make([]Managed, 0, len(r.members))
	for _, mb := range r.members {
		out = append(out, mb.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// criName is namespace/pod/container, as an operator names it.
func criName(p *runtimeapi.PodSandbox, c *runtimeapi.Container) string {
	ns, pod, ctr := "", "", c.Id
	if m := p.GetMetadata(); m != nil {
		ns, pod = m.Namespace, m.Name
	}
	if m := c.GetMetadata(); m != nil {
		ctr = m.Name
	}
	return ns + "/" + pod + "/" + ctr
}

// criInfo is what the runtime's verbose status says of a container
// (containerd and CRI-O both put these in info["info"]).
type criInfo struct {
	PID         int `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			Resources struct {
				CPU struct {
					Shares uint64 `json:"shares"`
					Quota  int64  `json:"quota"`
					Period uint64 `json:"period"`
				} `json:"cpu"`
			} `json:"resources"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

// inspect returns a running container's init PID, cgroup paths (checked
// to be its own) and the CPUs its pod requested.
func (r *CRIRuntime) inspect(ctx context.Context, id string) (map[string]string, int, float64, error) {
	st, err := r.Client.ContainerStatus(ctx, id, true)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, 0, 0, fmt.Errorf("%s: %w", short(id), ErrContainerGone)
		}
		return nil, 0, 0, fmt.Errorf("status of %s: %w", short(id), err)
	}
	if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, 0, 0, fmt.Errorf("%s is not running: %w", short(id), ErrContainerGone)
	}
	var info criInfo
	if raw := st.GetInfo()["info"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return nil, 0, 0, fmt.Errorf("status of %s: its info: %w", short(id), err)
		}
	}
	if info.PID <= 0 {
		return nil, 0, 0, fmt.Errorf("status of %s names no init PID (a CRI runtime that gives no verbose info is not supported)", short(id))
	}
	paths, err := kernel.ProcCgroups(r.Kernel.Proc(), info.PID)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", err.Error(), ErrContainerGone)
	}
	own := false
	for _, p := range paths {
		own = own || ContainerCgroup(p, id)
	}
	if !own {
		return nil, 0, 0, fmt.Errorf("pid %d of %s is in no cgroup of the container's (%v): %w", info.PID, short(id), paths, ErrContainerGone)
	}
	cpu := info.RuntimeSpec.Linux.Resources.CPU
	shares, quota, period := cpu.Shares, cpu.Quota, cpu.Period
	if res := st.GetStatus().GetResources().GetLinux(); res != nil {
		shares, quota, period = uint64(res.CpuShares), res.CpuQuota, uint64(res.CpuPeriod)
	}
	return paths, info.PID, RequestedCPUs(shares, quota, period), nil
}

// RequestedCPUs is the CPU a pod's container asked for, from what kubelet
// gave its runtime: the request as cpu.shares (milliCPU × 1024 / 1000; 2
// means none, BestEffort), else the limit as quota / period. 0: nothing
// stated, a fair share.
func RequestedCPUs(shares uint64, quota int64, period uint64) float64 {
	if shares > 2 {
		return float64(shares) / 1024
	}
	if quota > 0 && period > 0 {
		return float64(quota) / float64(period)
	}
	return 0
}

// Dir implements DirResolver from the cached membership; a container not
// in it (restoring a crashed controller's checkpoint) is asked for again.
func (r *CRIRuntime) Dir(ctx context.Context, id, ctl string) (string, error) {
	r.mu.Lock()
	mb, ok := r.members[id]
	podLevel := r.PodLevel && !(ok && mb.podShared)
	var paths map[string]string
	if ok && !r.dirty[id] {
		if dir, ok := mb.cachedDir(ctl); ok {
			r.mu.Unlock()
			return dir, nil
		}
		paths = mb.paths
	}
	r.mu.Unlock()
	if paths == nil {
		p, _, _, err := r.inspect(ctx, id)
		if err != nil {
			return "", err
		}
		paths = p
	}
	dir, err := ownDir(r.layout(), paths, id, ctl)
	if err == nil && podLevel && ctl == "cpu" {
		dir, err = podDir(dir, id)
	}
	if err == nil && ok {
		r.mu.Lock()
		if r.members[id] == mb && !r.dirty[id] {
			mb.remember(ctl, dir)
		}
		r.mu.Unlock()
	}
	return dir, err
}

func (r *CRIRuntime) layout() kernel.Layout { return r.Kernel.Cgroups() }

// Events fires whenever the runtime reports a container created, started,
// stopped or deleted, marking it for a fresh status. A runtime without the
// event stream (Unimplemented) leaves the relist alone to see changes.
func (r *CRIRuntime) Events(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			ch := make(chan *runtimeapi.ContainerEventResponse, 64)
			done := make(chan error, 1)
			sctx, cancel := context.WithCancel(ctx)
			go func() { done <- r.Client.GetContainerEvents(sctx, ch, nil) }()
		loop:
			for {
				select {
				case <-ctx.Done():
					cancel()
					return
				case e := <-ch:
					r.mu.Lock()
					if r.dirty == nil {
						r.dirty = map[string]bool{}
					}
					r.dirty[e.GetContainerId()] = true
					r.mu.Unlock()
					select {
					case out <- struct{}{}:
					default:
					}
				case err := <-done:
					if status.Code(err) == codes.Unimplemented {
						cancel()
						<-ctx.Done()
						return
					}
					break loop
				}
			}
			cancel()
			r.mu.Lock()
			r.listOnce = false // the stream broke: relist at once
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

// hasLabels says whether have carries every one of want ("key" or
// "key=value").
func hasLabels(have map[string]string, want []string) bool {
	for _, w := range want {
		k, v, withValue := strings.Cut(w, "=")
		got, ok := have[k]
		if !ok || withValue && got != v {
			return false
		}
	}
	return true
}

// podDir is the pod cgroup holding a container's directory: kubelet's
// cgroupfs driver names it pod<uid>, its systemd driver ...-pod<uid>.slice.
func podDir(ctrDir, id string) (string, error) {
	pod := filepath.Dir(ctrDir)
	if !strings.Contains(filepath.Base(pod), "pod") {
		return "", fmt.Errorf("container %s: its parent cgroup %s is not a pod's", short(id), pod)
	}
	return pod, nil
}

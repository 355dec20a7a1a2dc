package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/lifecycle"
)

// Defaults of the host runtime.
const (
	DefaultHostDataRoot = "/var/lib/ctrperf/host" // data: <root>/<run>/<svc>
	DefaultCgroupRoot   = "/sys/fs/cgroup"
	// joinArg0 names the shell that moves itself into the service's cgroups
	// and then execs the service, so the service never runs outside them
	// (cgroup v1 has no clone-into-cgroup).
	joinArg0   = "ctrperf-join"
	joinScript = `for f in $CTRPERF_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; unset CTRPERF_CGROUP_PROCS; exec "$@"`
	stopGrace  = 5 * time.Second
)

// v1Controllers are the cgroup v1 hierarchies a host service gets a group in.
var v1Controllers = []string{"cpu", "cpuacct", "memory", "cpuset", "blkio"}

// Host runs services as processes directly on the machine: the bare-metal
// baseline. Each service is a process group in cgroups of its own, so
// observers measure it like a container.
type Host struct {
	cgroupRoot string
	stateDir   string
	dataRoot   string
	procRoot   string
}

var _ Engine = (*Host)(nil)

// HostOption configures the host runtime.
type HostOption func(*Host)

// WithCgroupRoot changes where cgroup hierarchies are mounted (default /sys/fs/cgroup).
func WithCgroupRoot(dir string) HostOption { return func(h *Host) { h.cgroupRoot = dir } }

// WithHostStateDir changes where run state files go (default /run/ctrperf/host).
func WithHostStateDir(dir string) HostOption { return func(h *Host) { h.stateDir = dir } }

// WithHostDataRoot changes where service data directories go.
func WithHostDataRoot(dir string) HostOption { return func(h *Host) { h.dataRoot = dir } }

// WithHostProcRoot changes where /proc is read.
func WithHostProcRoot(dir string) HostOption { return func(h *Host) { h.procRoot = dir } }

// NewHost returns the host runtime.
func NewHost(opts ...HostOption) *Host {
	h := &Host{cgroupRoot: DefaultCgroupRoot, stateDir: filepath.Join(DefaultRunDir, "host"),
		dataRoot: DefaultHostDataRoot, procRoot: "/proc"}
	for _, o := range opts {
		o(h)
	}
	return h
}

// hostState is what a host run leaves on disk so that `ctrperf clean` can
// undo it after SIGKILL.
type hostState struct {
	RunID    string         `json:"run_id"`
	DataDir  string         `json:"data_dir"` // <dataRoot>/<run>, removed whole
	Cgroups  []string       `json:"cgroups"`  // directories, removed deepest first
	Services []hostServiceS `json:"services"`
}

type hostServiceS struct {
	Name    string   `json:"name"`
	PID     int      `json:"pid,omitempty"`
	Cgroups []string `json:"cgroups"`         // the service's own groups (cgroup.procs is read from each)
	Mount   string   `json:"mount,omitempty"` // tmpfs mount point
}

// hostRun is the host runtime's bookkeeping in Target.Private.
type hostRun struct {
	mu    sync.Mutex
	state hostState
	env   map[string][]string // per service: environment of the process
	dirs  map[string]string   // per service: data directory
	cgs   map[string][]string // per service: cgroup.procs files
	done  map[string]chan struct{}
}

// Info describes the host runtime.
func (h *Host) Info(context.Context) (Info, error) {
	return Info{Runtime: RuntimeHost, Name: "host"}, nil
}

// Close has nothing to release.
func (h *Host) Close(context.Context) error { return nil }

func (h *Host) statePath(runID string) string { return filepath.Join(h.stateDir, runID+".json") }

func (h *Host) saveState(r *hostRun) error {
	r.mu.Lock()
	b, err := json.MarshalIndent(r.state, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.stateDir, 0o755); err != nil {
		return fmt.Errorf("host state dir: %w", err)
	}
	if err := fsutil.WriteFileAtomic(h.statePath(r.state.RunID), b, 0o644); err != nil {
		return fmt.Errorf("write host state: %w", err)
	}
	return nil
}

// cgroupV2 reports whether the cgroup root is a unified (v2) hierarchy.
func (h *Host) cgroupV2() bool {
	_, err := os.Stat(filepath.Join(h.cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// Deploy starts each service (last first) as a process group in its own
// cgroups and waits for it to be ready. On error it undoes everything.
func (h *Host) Deploy(ctx context.Context, spec DeploySpec) (t *Target, err error) {
	if err := ValidateSpec(RuntimeHost, spec); err != nil {
		return nil, err
	}
	r := &hostRun{
		state: hostState{RunID: spec.RunID, DataDir: filepath.Join(h.dataRoot, spec.RunID)},
		env:   map[string][]string{}, dirs: map[string]string{}, cgs: map[string][]string{}, done: map[string]chan struct{}{},
	}
	t = &Target{RunID: spec.RunID, Runtime: RuntimeHost, Network: NetworkHost, Private: r}
	if _, err := os.Stat(h.statePath(spec.RunID)); err == nil {
		return nil, fmt.Errorf("deploy %s: host run state %s already exists: run `ctrperf clean --run %s`", spec.RunID, h.statePath(spec.RunID), spec.RunID)
	}
	defer func() {
		if err != nil {
			if terr := h.Teardown(ctx, t); terr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, terr)
			}
			t = nil
		}
	}()
	if err := h.saveState(r); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	b, err := hostBindings(spec.Services, hostArgv, func(s Service) string { return filepath.Join(r.state.DataDir, s.Name) })
	if err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	if err := b.Check(spec.Services, hostArgv); err != nil {
		return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
	}
	for i := len(spec.Services) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return t, fmt.Errorf("deploy %s: stopped before service %q: %w", spec.RunID, spec.Services[i].Name, context.Cause(ctx))
		}
		if err := h.startService(ctx, t, r, spec, i, b); err != nil {
			return t, fmt.Errorf("deploy %s: %w", spec.RunID, err)
		}
	}
	return t, nil
}

func hostArgv(s Service) []string {
	if len(s.HostCommand) > 0 {
		return s.HostCommand
	}
	return s.Command
}

func (h *Host) startService(ctx context.Context, t *Target, r *hostRun, spec DeploySpec, i int, b Bindings) error {
	s := spec.Services[i]
	argv, err := b.ExpandAll(hostArgv(s))
	if err != nil {
		return fmt.Errorf("service %q command: %w", s.Name, err)
	}
	env, err := b.ExpandEnv(s.Env)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}
	dir := filepath.Join(r.state.DataDir, s.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("service %q: data directory: %w", s.Name, err)
	}
	svc := hostServiceS{Name: s.Name}
	if spec.Data == DataTmpfs && s.DataDir != "" {
		// Recorded before mounting so a kill in between is still cleaned.
		svc.Mount = dir
		r.mu.Lock()
		r.state.Services = append(r.state.Services, svc)
		r.mu.Unlock()
		if err := h.saveState(r); err != nil {
			return err
		}
		if err := unix.Mount(NamePrefix, dir, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("service %q: mount tmpfs on %s: %w", s.Name, dir, err)
		}
	} else {
		r.mu.Lock()
		r.state.Services = append(r.state.Services, svc)
		r.mu.Unlock()
	}
	idx := len(r.state.Services) - 1

	groups, runGroups, rel, err := h.cgroupDirs(spec.RunID, s.Name)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}
	r.mu.Lock()
	for _, g := range runGroups {
		if !contains(r.state.Cgroups, g) {
			r.state.Cgroups = append(r.state.Cgroups, g)
		}
	}
	r.state.Cgroups = append(r.state.Cgroups, groups...)
	r.state.Services[idx].Cgroups = groups
	r.mu.Unlock()
	if err := h.saveState(r); err != nil {
		return err
	}
	procs, err := h.makeCgroups(groups, runGroups, s.Resources)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}

	logPath := filepath.Join(r.state.DataDir, s.Name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("service %q: log file: %w", s.Name, err)
	}
	defer logf.Close()
	penv := append(os.Environ(), envList(env)...)
	cmd := h.joinCommand(argv, procs, penv, dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("service %q: start %v: %w", s.Name, argv, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.state.Services[idx].PID = cmd.Process.Pid
	r.env[s.Name], r.dirs[s.Name], r.cgs[s.Name], r.done[s.Name] = penv, dir, procs, done
	r.mu.Unlock()
	if err := h.saveState(r); err != nil {
		return err
	}
	t.Containers = append(t.Containers, Container{ID: "pid-" + strconv.Itoa(cmd.Process.Pid), Name: ObjectName(spec.RunID, s.Name),
		Service: s.Name, PID: cmd.Process.Pid, CgroupPath: rel})

	if i == 0 {
		for _, p := range s.Ports {
			port, err := b[s.Name].port(s.Name, p)
			if err != nil {
				return err
			}
			t.Endpoints = append(t.Endpoints, Endpoint{Service: s.Name, Port: p, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
		}
	}
	if s.Ready == nil {
		return nil
	}
	rp := s.Ready.Port
	if rp == 0 && len(s.Ports) > 0 {
		rp = s.Ports[0]
	}
	port, err := b[s.Name].port(s.Name, rp)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	alive := func(context.Context) error {
		select {
		case <-done:
			return fmt.Errorf("process exited: %v", waitErr)
		default:
			return nil
		}
	}
	if err := waitReady(ctx, *s.Ready, addr, (&net.Dialer{}).DialContext, alive); err != nil {
		return fmt.Errorf("service %q (pid %d) not ready on %s: %w%s", s.Name, cmd.Process.Pid, addr, err, fileTail(logPath, 20))
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// joinCommand wraps argv in the shell that joins the cgroups first; the
// process leads a process group of its own so teardown can signal all of it.
func (h *Host) joinCommand(argv, procs, env []string, dir string) *exec.Cmd {
	args := append([]string{"-c", joinScript, joinArg0}, argv...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = append(env, "CTRPERF_CGROUP_PROCS="+strings.Join(procs, " "))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// cgroupDirs lists a service's group directories (one per v1 controller
// that is mounted, or one unified), the run-level parents, and the path
// observers use (relative to a controller's root).
func (h *Host) cgroupDirs(runID, svc string) (groups, runGroups []string, rel string, err error) {
	rel = "/" + filepath.Join(NamePrefix, runID, svc)
	if h.cgroupV2() {
		return []string{filepath.Join(h.cgroupRoot, rel)}, []string{filepath.Join(h.cgroupRoot, NamePrefix, runID)}, rel, nil
	}
	seen := map[string]bool{}
	for _, c := range v1Controllers {
		root := filepath.Join(h.cgroupRoot, c)
		real, err := filepath.EvalSymlinks(root)
		if err != nil || seen[real] {
			continue // not mounted, or co-mounted with one already listed
		}
		seen[real] = true
		groups = append(groups, filepath.Join(root, rel))
		runGroups = append(runGroups, filepath.Join(root, NamePrefix, runID))
	}
	if len(groups) == 0 {
		return nil, nil, "", fmt.Errorf("no cgroup controllers under %s", h.cgroupRoot)
	}
	return groups, runGroups, rel, nil
}

// cgroupWrite is one file a cgroup gets written.
type cgroupWrite struct {
	File, Value string
}

// resourceWrites turns Resources into cgroup file writes for a hierarchy
// (v1 controller name, or "" for v2). Pure.
func resourceWrites(controller string, v2 bool, res Resources) []cgroupWrite {
	var w []cgroupWrite
	const period = 100000
	if v2 {
		if res.CPUSet != "" {
			w = append(w, cgroupWrite{"cpuset.cpus", res.CPUSet})
		}
		if res.CPUShares > 0 {
			// The same conversion runc uses from shares [2,262144] to weight [1,10000].
			weight := 1 + ((res.CPUShares-2)*9999)/262142
			w = append(w, cgroupWrite{"cpu.weight", strconv.FormatInt(weight, 10)})
		}
		if res.CPUs > 0 {
			w = append(w, cgroupWrite{"cpu.max", fmt.Sprintf("%d %d", int64(res.CPUs*period), period)})
		}
		if res.MemoryBytes > 0 {
			w = append(w, cgroupWrite{"memory.max", strconv.FormatInt(res.MemoryBytes, 10)})
		}
		return w
	}
	switch controller {
	case "cpuset":
		if res.CPUSet != "" {
			w = append(w, cgroupWrite{"cpuset.cpus", res.CPUSet})
		}
	case "cpu":
		if res.CPUShares > 0 {
			w = append(w, cgroupWrite{"cpu.shares", strconv.FormatInt(res.CPUShares, 10)})
		}
		if res.CPUs > 0 {
			w = append(w, cgroupWrite{"cpu.cfs_period_us", strconv.Itoa(period)}, cgroupWrite{"cpu.cfs_quota_us", strconv.FormatInt(int64(res.CPUs*period), 10)})
		}
	case "memory":
		if res.MemoryBytes > 0 {
			w = append(w, cgroupWrite{"memory.limit_in_bytes", strconv.FormatInt(res.MemoryBytes, 10)})
		}
	}
	return w
}

// makeCgroups creates the groups, makes cpuset usable at every level,
// applies the resources and returns the cgroup.procs files to join.
func (h *Host) makeCgroups(groups, runGroups []string, res Resources) ([]string, error) {
	v2 := h.cgroupV2()
	var procs []string
	for _, g := range groups {
		controller := ""
		if !v2 {
			rel, err := filepath.Rel(h.cgroupRoot, g)
			if err != nil {
				return nil, err
			}
			controller = strings.SplitN(rel, string(filepath.Separator), 2)[0]
		}
		// Create level by level: a new cpuset group starts with empty cpus
		// and mems and takes no task until they are set from its parent.
		top := filepath.Join(h.cgroupRoot, controller)
		parts := strings.Split(strings.TrimPrefix(g, top+string(filepath.Separator)), string(filepath.Separator))
		cur := top
		for _, p := range parts {
			parent := cur
			cur = filepath.Join(cur, p)
			if v2 {
				if err := enableV2Controllers(parent); err != nil {
					return nil, err
				}
			}
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("create cgroup %s: %w", cur, err)
			}
			if controller == "cpuset" || v2 {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := inheritIfEmpty(parent, cur, f); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, w := range resourceWrites(controller, v2, res) {
			p := filepath.Join(g, w.File)
			if err := os.WriteFile(p, []byte(w.Value), 0o644); err != nil {
				return nil, fmt.Errorf("write %q to %s: %w", w.Value, p, err)
			}
		}
		procs = append(procs, filepath.Join(g, "cgroup.procs"))
	}
	return procs, nil
}

// inheritIfEmpty copies a cpuset file from parent when child's is empty.
// A missing file (v2 without the cpuset controller) is not an error.
func inheritIfEmpty(parent, child, file string) error {
	cur, err := os.ReadFile(filepath.Join(child, file))
	if err != nil {
		return nil
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	val, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			val, err = os.ReadFile(filepath.Join(parent, file+".effective"))
		}
		if err != nil {
			return fmt.Errorf("read %s of %s: %w", file, parent, err)
		}
	}
	if strings.TrimSpace(string(val)) == "" {
		return nil
	}
	p := filepath.Join(child, file)
	if err := os.WriteFile(p, bytes.TrimSpace(val), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", strings.TrimSpace(string(val)), p, err)
	}
	return nil
}

// enableV2Controllers delegates the controllers ctrperf uses to children.
func enableV2Controllers(dir string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	var want []string
	for _, c := range strings.Fields(string(avail)) {
		switch c {
		case "cpu", "cpuset", "memory", "io":
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	p := filepath.Join(dir, "cgroup.subtree_control")
	if err := os.WriteFile(p, []byte(strings.Join(want, " ")), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", strings.Join(want, " "), p, err)
	}
	return nil
}

// Exec runs argv as a child inside the service's cgroups, in its data
// directory and with its environment, and waits for it.
func (h *Host) Exec(ctx context.Context, t *Target, service string, argv []string) (ExecResult, error) {
	r, ok := t.Private.(*hostRun)
	if !ok {
		return ExecResult{}, fmt.Errorf("exec in %s: not a host target", t.RunID)
	}
	if len(argv) == 0 {
		return ExecResult{}, fmt.Errorf("exec in %s/%s: empty argv", t.RunID, service)
	}
	r.mu.Lock()
	env, dir, procs := r.env[service], r.dirs[service], r.cgs[service]
	r.mu.Unlock()
	if procs == nil {
		return ExecResult{}, fmt.Errorf("target %s has no running service %q", t.RunID, service)
	}
	cmd := h.joinCommand(argv, procs, env, dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return ExecResult{}, fmt.Errorf("exec %v in %s/%s: %w", argv, t.RunID, service, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return ExecResult{}, fmt.Errorf("exec %v in %s/%s: %w", argv, t.RunID, service, context.Cause(ctx))
	}
	res := ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if res.ExitCode == 125 && strings.Contains(stderr.String(), "cgroup.procs") {
			return res, fmt.Errorf("exec %v in %s/%s: could not join the service's cgroup: %s", argv, t.RunID, service, strings.TrimSpace(stderr.String()))
		}
	default:
		return res, fmt.Errorf("exec %v in %s/%s: %w", argv, t.RunID, service, err)
	}
	return res, nil
}

// Teardown stops the run's processes (SIGTERM to each process group, then
// SIGKILL), removes its cgroups, mounts, data and state file. It works from
// the state file when t carries no bookkeeping (another process deployed).
func (h *Host) Teardown(ctx context.Context, t *Target) error {
	if t == nil {
		return nil
	}
	ctx, cancel := lifecycle.Detached(ctx, lifecycle.DefaultCleanupTimeout)
	defer cancel()
	var st hostState
	var done map[string]chan struct{}
	if r, ok := t.Private.(*hostRun); ok {
		r.mu.Lock()
		st = r.state
		st.Services = append([]hostServiceS(nil), r.state.Services...)
		st.Cgroups = append([]string(nil), r.state.Cgroups...)
		done = r.done
		r.mu.Unlock()
	} else {
		s, err := h.loadState(h.statePath(t.RunID))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st = s
	}
	_, err := h.destroy(ctx, st, false, done)
	return err
}

func (h *Host) loadState(path string) (hostState, error) {
	var st hostState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("host run state %s: %w", path, err)
	}
	if st.RunID == "" || !nameRe.MatchString(st.RunID) {
		return st, fmt.Errorf("host run state %s: bad run id %q", path, st.RunID)
	}
	return st, nil
}

// cleanStates undoes host runs from their state files (runID "" = all).
func (h *Host) cleanStates(ctx context.Context, runID string, dry bool) ([]string, error) {
	var paths []string
	if runID != "" {
		paths = []string{h.statePath(runID)}
	} else {
		ps, err := filepath.Glob(filepath.Join(h.stateDir, "*.json"))
		if err != nil {
			return nil, err
		}
		paths = ps
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		st, err := h.loadState(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r, err := h.destroy(ctx, st, dry, nil)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// destroy undoes one host run. done, when known, are the reapers of the
// processes this process started.
func (h *Host) destroy(ctx context.Context, st hostState, dry bool, done map[string]chan struct{}) ([]string, error) {
	var removed []string
	var errs []error
	marker := "/" + filepath.Join(NamePrefix, st.RunID) + "/"
	var pids []int
	for _, s := range st.Services {
		for _, g := range s.Cgroups {
			pids = append(pids, readPids(filepath.Join(g, "cgroup.procs"))...)
		}
		if s.PID > 0 && h.ownedProcess(s.PID, marker) {
			pids = append(pids, s.PID)
		}
	}
	pids = dedupe(pids)
	if len(pids) > 0 {
		removed = append(removed, fmt.Sprintf("host processes %v of run %s", pids, st.RunID))
	}
	if !dry && len(pids) > 0 {
		signalAll(st.Services, pids, syscall.SIGTERM)
		if !h.waitGone(ctx, st, done, marker, stopGrace) {
			signalAll(st.Services, h.livePids(st, marker), syscall.SIGKILL)
			if !h.waitGone(ctx, st, done, marker, stopGrace) {
				errs = append(errs, fmt.Errorf("host run %s: processes %v survive SIGKILL", st.RunID, h.livePids(st, marker)))
			}
		}
	}
	for _, s := range st.Services {
		if s.Mount == "" || !isMountPoint(h.procRoot, s.Mount) {
			continue
		}
		if !dry {
			if err := unix.Unmount(s.Mount, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount tmpfs %s: %w", s.Mount, err))
				continue
			}
		}
		removed = append(removed, "tmpfs "+s.Mount)
	}
	// Deepest first: service groups before the run's groups.
	cgs := append([]string(nil), st.Cgroups...)
	sortByDepthDesc(cgs)
	for _, g := range cgs {
		if _, err := os.Stat(g); err != nil {
			continue
		}
		if !dry {
			if err := os.Remove(g); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", g, err))
				continue
			}
		}
		removed = append(removed, "cgroup "+g)
	}
	if st.DataDir != "" {
		if _, err := os.Lstat(st.DataDir); err == nil {
			if !dry {
				if err := os.RemoveAll(st.DataDir); err != nil {
					errs = append(errs, fmt.Errorf("remove host data %s: %w", st.DataDir, err))
				}
			}
			removed = append(removed, "host data "+st.DataDir)
		}
	}
	if !dry && len(errs) == 0 {
		if err := os.Remove(h.statePath(st.RunID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove host state: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

// ownedProcess guards against PID reuse: a recorded PID is only signalled
// while it is still in the run's cgroup or still the joining shell.
func (h *Host) ownedProcess(pid int, marker string) bool {
	b, err := os.ReadFile(filepath.Join(h.procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false
	}
	if strings.Contains(string(b), marker) {
		return true
	}
	cmd, err := os.ReadFile(filepath.Join(h.procRoot, strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(cmd, []byte(joinArg0))
}

func (h *Host) livePids(st hostState, marker string) []int {
	var pids []int
	for _, s := range st.Services {
		for _, g := range s.Cgroups {
			pids = append(pids, readPids(filepath.Join(g, "cgroup.procs"))...)
		}
		if s.PID > 0 && h.ownedProcess(s.PID, marker) && !isZombie(h.procRoot, s.PID) {
			pids = append(pids, s.PID)
		}
	}
	return dedupe(pids)
}

func (h *Host) waitGone(ctx context.Context, st hostState, done map[string]chan struct{}, marker string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		reaped := true
		for _, ch := range done {
			select {
			case <-ch:
			default:
				reaped = false
			}
		}
		if reaped && len(h.livePids(st, marker)) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func signalAll(services []hostServiceS, pids []int, sig syscall.Signal) {
	for _, s := range services {
		if s.PID > 0 && slicesContains(pids, s.PID) {
			_ = syscall.Kill(-s.PID, sig) // the whole process group
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func readPids(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parsePids(f)
}

func parsePids(r io.Reader) []int {
	var out []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && p > 0 {
			out = append(out, p)
		}
	}
	return out
}

func dedupe(p []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range p {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func isZombie(procRoot string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone counts as not alive
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func isMountPoint(procRoot, dir string) bool {
	f, err := os.Open(filepath.Join(procRoot, "self", "mountinfo"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && fs[4] == dir {
			return true
		}
	}
	return false
}

func sortByDepthDesc(p []string) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && strings.Count(p[j], "/") > strings.Count(p[j-1], "/"); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// fileTail returns the last lines of a log file to end an error message.
func fileTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	s := strings.TrimSpace(strings.Join(ls, "\n"))
	if s == "" {
		return "; the process printed nothing"
	}
	return "; last output:\n" + s
}

package engine

// Host runtime: a process supervisor that runs each service as a process
// group in cgroups of its own. The cgroups are in host_cgroup.go, the state
// file that lets `ctrperf clean` undo a run in host_state.go, and the
// signalling with its guards against PID reuse in host_proc.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
	"ctrperf/internal/lifecycle"
)

// Defaults of the host runtime.
const (
	DefaultHostDataRoot = "/var/lib/ctrperf/host" // data: <root>/<run>/<svc>
	DefaultCgroupRoot   = kernel.CgroupMount
	// joinArg0 names the shell that moves itself into the service's cgroups
	// and then execs the service, so the service never runs outside them
	// (cgroup v1 has no clone-into-cgroup).
	joinArg0   = "ctrperf-join"
	joinScript = `for f in $CTRPERF_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; unset CTRPERF_CGROUP_PROCS; exec "$@"`
	stopGrace  = 5 * time.Second
)

// BareMetal is runtime host's engine: it runs services as processes
// directly on this machine, the bare-metal baseline (not a host of the
// plan's hosts:, which is remote.Host, nor another machine's engine,
// bench's sutEngine). Each service is a process group in cgroups of its own, so
// observers measure it like a container.
type BareMetal struct {
	kernel   kernel.FS
	stateDir string
	dataRoot string
}

var _ Engine = (*BareMetal)(nil)

// BareMetalOption configures the host runtime.
type BareMetalOption func(*BareMetal)

// WithHostKernel changes where the kernel's file systems (the cgroup
// hierarchies, /proc) are read (default the real ones).
func WithHostKernel(fs kernel.FS) BareMetalOption { return func(h *BareMetal) { h.kernel = fs } }

// WithHostStateDir changes where run state files go (default /run/ctrperf/host).
func WithHostStateDir(dir string) BareMetalOption { return func(h *BareMetal) { h.stateDir = dir } }

// WithHostDataRoot changes where service data directories go.
func WithHostDataRoot(dir string) BareMetalOption { return func(h *BareMetal) { h.dataRoot = dir } }

// NewBareMetal returns the host runtime.
func NewBareMetal(opts ...BareMetalOption) *BareMetal {
	h := &BareMetal{kernel: kernel.DefaultFS(), stateDir: filepath.Join(DefaultRunDir, "host"),
		dataRoot: DefaultHostDataRoot}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Info describes the host runtime.
func (h *BareMetal) Info(context.Context) (Info, error) {
	return Info{Runtime: string(RuntimeHost), Name: "host"}, nil
}

// Close has nothing to release.
func (h *BareMetal) Close(context.Context) error { return nil }

// Deploy starts each service (last first) as a process group in its own
// cgroups and waits for it to be ready. On error it undoes everything.
func (h *BareMetal) Deploy(ctx context.Context, spec DeploySpec) (t *Target, err error) {
	if err := ValidateSpec(RuntimeHost, spec); err != nil {
		return nil, err
	}
	root := h.dataRoot
	if spec.DataRoot != "" {
		root = spec.DataRoot
	}
	r := &hostRun{
		state: hostState{RunID: spec.RunID, DataDir: filepath.Join(root, spec.RunID)},
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
	b.reach(spec)
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
	if spec.Reach.Valid() && !spec.Reach.Sole {
		r.mu.Lock()
		r.admit = true
		r.mu.Unlock()
		if err := admitReach(ctx, execIPTables, spec, t); err != nil {
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

// hostTmpfsFlags mount a service's tmpfs: no setuid program and no device
// node that a service leaves there works for anyone else.
const hostTmpfsFlags = unix.MS_NOSUID | unix.MS_NODEV

func (h *BareMetal) startService(ctx context.Context, t *Target, r *hostRun, spec DeploySpec, i int, b Bindings) error {
	s := spec.Services[i]
	argv, err := b.ExpandAll(hostArgv(s))
	if err != nil {
		return fmt.Errorf("service %q command: %w", s.Name, err)
	}
	env, err := b.ExpandEnv(s.Env)
	if err != nil {
		return fmt.Errorf("service %q: %w", s.Name, err)
	}
	dir, err := makeDataDir(filepath.Dir(r.state.DataDir), spec.RunID, s.Name, dataLeafRoot)
	if err != nil {
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
		if err := unix.Mount(NamePrefix, dir, "tmpfs", hostTmpfsFlags, "mode=0755"); err != nil {
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
			t.Endpoints = append(t.Endpoints, Endpoint{Service: s.Name, Port: p, Addr: net.JoinHostPort(b.listenHost(s.Name), strconv.Itoa(port))})
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
	addr := net.JoinHostPort(b.listenHost(s.Name), strconv.Itoa(port))
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
func (h *BareMetal) joinCommand(argv, procs, env []string, dir string) *exec.Cmd {
	args := append([]string{"-c", joinScript, joinArg0}, argv...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = append(env, "CTRPERF_CGROUP_PROCS="+strings.Join(procs, " "))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Exec runs argv as a child inside the service's cgroups, in its data
// directory and with its environment, and waits for it.
func (h *BareMetal) Exec(ctx context.Context, t *Target, service string, argv []string) (ExecResult, error) {
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

// Ping: the host always answers.
func (h *BareMetal) Ping(context.Context) error { return nil }

// Teardown stops the run's processes (SIGTERM to each process group, then
// SIGKILL), removes its cgroups, mounts, data and state file. It works from
// the state file when t carries no bookkeeping (another process deployed).
func (h *BareMetal) Teardown(ctx context.Context, t *Target) error {
	if t == nil {
		return nil
	}
	ctx, cancel := lifecycle.Detached(ctx, lifecycle.DefaultCleanupTimeout)
	defer cancel()
	var st hostState
	var done map[string]chan struct{}
	admit := true // a run known only by its state file: look for its chain
	if r, ok := t.Private.(*hostRun); ok {
		r.mu.Lock()
		admit = r.admit
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
	if admit {
		_, aerr := removeAdmit(ctx, execIPTables, t.RunID, false, nil)
		err = errors.Join(err, aerr)
	}
	return err
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

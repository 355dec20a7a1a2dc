package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// DefaultSocket is where Docker listens when DOCKER_HOST is unset.
const DefaultSocket = "/var/run/docker.sock"

// defaultName is the private engine Default starts when no engine answers.
const defaultName = engine.NamePrefix + "-default"

// Daemon is one Docker engine ctrperf talks to.
type Daemon struct {
	name    string
	host    string
	cli     *client.Client
	private bool // a dockerd of ctrperf's (this or another ctrperf process started it)
	owned   bool // this process started it: Close stops it
	o       Options
	st      *State
	exited  chan struct{} // closed when the dockerd we started exits
	// nested: a dockerd in a container of another engine (StartNested).
	nested *nestedState
	// podman: a podman service (StartPodman), not a dockerd.
	podman  *PodmanService
	waitErr error

	mu     sync.Mutex
	closed bool
	// Warnings are things that went wrong without failing the start, e.g.
	// iptables rules of other engines that could not be put back.
	Warnings []string
}

// Name is "default" for the user's engine, else the private engine's name.
func (d *Daemon) Name() string { return d.name }

// Host is the engine's address, e.g. unix:///run/ctrperf/engines/x/docker.sock.
func (d *Daemon) Host() string { return d.host }

// Client is a Docker SDK client for the engine (API version negotiated).
func (d *Daemon) Client() *client.Client { return d.cli }

// Private reports whether ctrperf started this engine.
func (d *Daemon) Private() bool { return d.private }

// State is the private engine's recorded state, nil for the user's engine.
func (d *Daemon) State() *State { return d.st }

func newClient(host string) (*client.Client, error) {
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", host, err)
	}
	return cli, nil
}

// ping asks host for an answer within timeout.
func ping(ctx context.Context, host string, timeout time.Duration) (*client.Client, error) {
	cli, err := newClient(host)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine at %s does not answer: %w", host, err)
	}
	return cli, nil
}

// UserHost is where the user's own engine would answer: DOCKER_HOST, or the
// default socket.
func UserHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix://" + DefaultSocket
}

// Probe returns the user's engine if it answers within timeout, without
// starting anything; doctor uses it.
func Probe(ctx context.Context, timeout time.Duration) (*Daemon, error) {
	host := UserHost()
	cli, err := ping(ctx, host, timeout)
	if err != nil {
		return nil, err
	}
	return &Daemon{name: "default", host: host, cli: cli}, nil
}

// Default returns the engine DOCKER_HOST or the default socket answers on.
// When none answers it starts a private engine of ctrperf's own (the
// embedded default: the user needs no Docker set-up), whose data root under
// <lib>/engines/default persists so its images survive between runs. If
// another ctrperf process already runs that engine, it is shared, not owned.
func Default(ctx context.Context, opts ...Option) (*Daemon, error) {
	if d, err := Probe(ctx, 3*time.Second); err == nil {
		return d, nil
	}
	o := buildOptions(opts)
	st := newState(o, defaultName, "", engine.EngineSpec{})
	st.DataRoot = filepath.Join(o.dataRootDir(), "default")
	st.KeepDataRoot = true
	return startOrShare(ctx, o, st)
}

// Start runs a private engine with the daemon-level knobs of spec for run
// runID, beside any other engine. The spec is checked against the host first,
// so an unknown or unusable storage driver fails before anything exists. On
// any failure everything created so far is removed again.
func Start(ctx context.Context, spec engine.EngineSpec, runID string, opts ...Option) (*Daemon, error) {
	o := buildOptions(opts)
	h, err := ReadHostFacts(opts...)
	if err != nil {
		return nil, err
	}
	if err := CheckSpec(spec, h); err != nil {
		return nil, fmt.Errorf("private engine %s: %w", spec.Key(), err)
	}
	if h.Tools["iptables"] == "" || h.Tools["iptables-save"] == "" {
		return nil, errors.New("iptables not found: install Debian package iptables")
	}
	st := newState(o, engineName(spec, runID), runID, spec)
	return startOrShare(ctx, o, st)
}

// newState lays out where everything of engine name goes.
func newState(o Options, name, runID string, spec engine.EngineSpec) *State {
	dir := stateDir(o, name)
	st := &State{
		Name:       name,
		RunID:      runID,
		Spec:       spec,
		Socket:     filepath.Join(dir, "docker.sock"),
		ExecRoot:   filepath.Join(o.execRootDir(), shortID(name)),
		DataRoot:   filepath.Join(o.dataRootDir(), name),
		PIDFile:    filepath.Join(dir, "docker.pid"),
		LogFile:    filepath.Join(dir, "dockerd.log"),
		ConfigFile: filepath.Join(dir, "daemon.json"),
		Bridge:     bridgeName(dir),
		// Always on: the published modes measure the kernel's NAT path
		// like a real host; see iptables.go for protecting other engines.
		IPTables: true,
		Started:  time.Now().UTC(),
	}
	if fs, ok := strings.CutPrefix(spec.DataRoot, "loop-"); ok {
		st.Loop = &LoopState{
			FS:    fs,
			Image: filepath.Join(o.loopDir(), name+".img"),
			Mount: filepath.Join(o.mntDir(), name),
		}
		st.DataRoot = filepath.Join(st.Loop.Mount, "docker")
	}
	return st
}

// startOrShare serialises starts of one engine name across processes, shares
// an engine that already answers, clears a dead one's leftovers, and starts.
func startOrShare(ctx context.Context, o Options, st *State) (*Daemon, error) {
	unlock, err := lockEngine(o, st.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if old, err := readState(o, st.Name); err == nil {
		if cli, err := ping(ctx, "unix://"+old.Socket, 2*time.Second); err == nil {
			return &Daemon{name: old.Name, host: "unix://" + old.Socket, cli: cli, private: true, o: o, st: old}, nil
		}
		if _, err := cleanEngine(ctx, o, old); err != nil {
			return nil, fmt.Errorf("clear leftovers of dead engine %s before starting it again: %w", old.Name, err)
		}
	}
	d, err := start(ctx, o, st)
	if err != nil {
		if _, terr := teardown(context.WithoutCancel(ctx), o, st, execIPTables{}); terr != nil {
			err = fmt.Errorf("%w; cleaning up after it also failed: %v", err, terr)
		}
		return nil, err
	}
	return d, nil
}

func start(ctx context.Context, o Options, st *State) (*Daemon, error) {
	dockerd, err := dockerdPath(o)
	if err != nil {
		return nil, err
	}
	if err := writeState(o, st); err != nil {
		return nil, err
	}
	if err := os.WriteFile(st.ConfigFile, []byte("{}\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write dockerd config %s: %w", st.ConfigFile, err)
	}
	if err := os.MkdirAll(st.ExecRoot, 0o700); err != nil {
		return nil, fmt.Errorf("create exec-root %s: %w", st.ExecRoot, err)
	}
	if st.Loop != nil {
		if err := setUpLoop(ctx, o, st, o.LoopSize); err != nil {
			return nil, fmt.Errorf("data root %s for engine %s: %w", st.Spec.DataRoot, st.Name, err)
		}
	}
	if err := os.MkdirAll(st.DataRoot, 0o711); err != nil {
		return nil, fmt.Errorf("create data root %s: %w", st.DataRoot, err)
	}
	_, subnet, err := createBridge(st.Bridge)
	st.Subnet = subnet
	if werr := writeState(o, st); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, fmt.Errorf("bridge for engine %s: %w", st.Name, err)
	}

	spawn := func() (*Daemon, error) {
		d, err := spawnDockerd(o, st, dockerd, true)
		if err != nil {
			return nil, err
		}
		if err := d.waitReady(ctx, o.Ready); err != nil {
			return nil, err
		}
		return d, nil
	}
	if !st.IPTables {
		return spawn()
	}
	d, g, err := spawnGuarded(ctx, o, st, execIPTables{}, spawn)
	if err != nil {
		return nil, err
	}
	switch {
	case g.RestoreErr != nil:
		d.Warnings = append(d.Warnings, g.RestoreErr.Error())
	case len(g.Restored) > 0:
		d.Warnings = append(d.Warnings, fmt.Sprintf("put back %d iptables rules of other engines that dockerd flushed on start", len(g.Restored)))
	}
	if g.JumpsErr != nil {
		d.Warnings = append(d.Warnings, g.JumpsErr.Error())
	}
	if len(g.Added) > 0 {
		st.AddedJumps = g.Added
		if err := writeState(o, st); err != nil {
			d.Warnings = append(d.Warnings, err.Error())
		}
	}
	return d, nil
}

// dockerdPath is the dockerd binary: Options.Dockerd, else the one in PATH.
func dockerdPath(o Options) (string, error) {
	if o.Dockerd != "" {
		return o.Dockerd, nil
	}
	p, err := exec.LookPath("dockerd")
	if err != nil {
		return "", ErrNoDockerd
	}
	return p, nil
}

// spawnDockerd starts dockerd with the engine's recorded flags, its output
// appended to the engine's log, and records its pid in the state file. It
// serves a first start and a revival alike; owned says whether Close is to
// stop the engine. The caller waits for it to answer.
func spawnDockerd(o Options, st *State, dockerd string, owned bool) (*Daemon, error) {
	logf, err := os.OpenFile(st.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open dockerd log %s: %w", st.LogFile, err)
	}
	defer logf.Close()
	// Not CommandContext: the engine must outlive the start's context.
	cmd := exec.Command(dockerd, dockerdArgs(st)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C at the terminal reaches ctrperf, which
	// then stops containers before the engine, not the engine at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", dockerd, err)
	}
	st.PID = cmd.Process.Pid
	d := &Daemon{name: st.Name, host: "unix://" + st.Socket, private: true, owned: owned, o: o, st: st, exited: make(chan struct{})}
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	if err := writeState(o, st); err != nil {
		return nil, err
	}
	return d, nil
}

// waitReady polls the socket until dockerd answers, it exits, or timeout.
func (d *Daemon) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for engine %s: %w", d.name, ctx.Err())
		case <-d.exited:
			return fmt.Errorf("dockerd for engine %s exited during start (%v); its log %s ends:\n%s", d.name, d.waitErr, d.st.LogFile, logTail(d.st.LogFile, 15))
		case <-deadline.C:
			return fmt.Errorf("dockerd for engine %s did not answer on %s within %s; its log %s ends:\n%s", d.name, d.st.Socket, timeout, d.st.LogFile, logTail(d.st.LogFile, 15))
		case <-tick.C:
			if _, err := os.Stat(d.st.Socket); err != nil {
				continue
			}
			if cli, err := ping(ctx, d.host, time.Second); err == nil {
				d.cli = cli
				return nil
			}
		}
	}
}

// logTail returns the last n lines of a log file.
func logTail(p string, n int) string {
	f, err := os.Open(p)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Close releases the engine. A private engine this process started is
// stopped (SIGTERM, then SIGKILL) and everything it owned removed; the
// user's engine, or one another process started, is never touched.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.podman != nil {
		if err := d.closePodman(); err != nil {
			return fmt.Errorf("stop podman service %s: %w", d.name, err)
		}
		return nil
	}
	if d.nested != nil {
		err := d.closeNested(ctx)
		if d.cli != nil {
			d.cli.Close()
		}
		if err != nil {
			return fmt.Errorf("stop nested engine %s: %w", d.name, err)
		}
		return nil
	}
	if d.cli != nil {
		d.cli.Close()
	}
	if !d.owned {
		return nil
	}
	if _, err := cleanEngine(ctx, d.o, d.st); err != nil {
		return fmt.Errorf("stop engine %s: %w", d.name, err)
	}
	return nil
}

// Info describes the engine as it reports itself.
func (d *Daemon) Info(ctx context.Context) (engine.Info, error) {
	res, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engine.Info{}, fmt.Errorf("info of engine %s at %s: %w", d.name, d.host, err)
	}
	in := res.Info
	out := engine.Info{
		Runtime:       string(engine.RuntimeDocker),
		Name:          d.name,
		Version:       in.ServerVersion,
		StorageDriver: in.Driver,
		DataRoot:      in.DockerRootDir,
		Private:       d.private,
	}
	for _, kv := range in.DriverStatus {
		if kv[0] == "Backing Filesystem" {
			out.BackingFS = kv[1]
		}
	}
	if d.podman != nil {
		// Rootful podman publishes ports by netavark's DNAT (conmon only
		// holds the port): no userland proxy.
		out.Runtime = string(engine.RuntimePodman)
		out.UserlandProxy = new(bool)
	} else if d.nested != nil {
		out.Nested = true
	} else if d.private {
		on := true
		if d.st != nil && d.st.Spec.UserlandProxy != nil {
			on = *d.st.Spec.UserlandProxy
		}
		out.UserlandProxy = &on
	} else if f, ok := FlagsOf(d.o.Kernel, d.host); ok {
		out.UserlandProxy = &f.UserlandProxy
	}
	return out, nil
}

// DaemonFlags are the dockerd settings the Engine API does not report.
type DaemonFlags struct {
	UserlandProxy bool `json:"userland_proxy"`
	IPTables      bool `json:"iptables"`
	// PID is the dockerd process found (FlagsOf).
	PID int `json:"-"`
}

// FlagsOf finds the dockerd serving host among local processes and reads its
// userland-proxy and iptables settings from its command line and config
// file. ok is false when no local dockerd serves host.
func FlagsOf(fs kernel.FS, host string) (DaemonFlags, bool) {
	for _, pid := range pidsMatching(fs, "dockerd") {
		args, err := fs.Cmdline(pid)
		if err != nil {
			continue
		}
		if filepath.Base(args[0]) != "dockerd" || !servesHost(args[1:], host) {
			continue
		}
		cfgPath := flagValue(args[1:], "config-file")
		if cfgPath == "" {
			cfgPath = "/etc/docker/daemon.json"
		}
		cfg, _ := os.ReadFile(cfgPath)
		f := parseDaemonFlags(args[1:], cfg)
		f.PID = pid
		return f, true
	}
	return DaemonFlags{}, false
}

// servesHost: dockerd without -H listens on the default socket.
func servesHost(args []string, host string) bool {
	hosts := flagValues(args, "H", "host")
	if len(hosts) == 0 {
		return host == "unix://"+DefaultSocket || host == "unix:///run/docker.sock"
	}
	for _, h := range hosts {
		if h == host || (h == "fd://" && host == "unix://"+DefaultSocket) {
			return true
		}
	}
	return false
}

// parseDaemonFlags applies dockerd's defaults, then daemon.json, then flags.
func parseDaemonFlags(args []string, configJSON []byte) DaemonFlags {
	f := DaemonFlags{UserlandProxy: true, IPTables: true}
	var cfg struct {
		UserlandProxy *bool `json:"userland-proxy"`
		IPTables      *bool `json:"iptables"`
	}
	if json.Unmarshal(configJSON, &cfg) == nil {
		if cfg.UserlandProxy != nil {
			f.UserlandProxy = *cfg.UserlandProxy
		}
		if cfg.IPTables != nil {
			f.IPTables = *cfg.IPTables
		}
	}
	for _, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		b := !hasVal || val == "true" || val == "1"
		switch name {
		case "userland-proxy":
			f.UserlandProxy = b
		case "iptables":
			f.IPTables = b
		}
	}
	return f
}

func flagValue(args []string, names ...string) string {
	v := flagValues(args, names...)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// flagValues collects "--name v", "--name=v", "-n v" forms.
func flagValues(args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !contains(names, name) {
			continue
		}
		if hasVal {
			out = append(out, val)
		} else if i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

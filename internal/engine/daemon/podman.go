package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"ctrperf/internal/engine"
	"ctrperf/internal/fsutil"
)

// Runtime podman is rootful Podman through its Docker-compatible API: a
// `podman system service` of ctrperf's own on a socket of its own
// (<run>/podman-<session>.sock), which the Docker SDK client and the Docker
// engine of internal/engine talk to as to a dockerd. The service runs
// Debian's podman as it is (its default store, netavark for networks,
// conmon and runc per container), with one containers.conf of ctrperf's:
// containers get the service's own open-files and process limits, as a
// dockerd's containers get the dockerd's (podman's own default, 1048576,
// needs CAP_SYS_RESOURCE, which a container-hosted machine may lack: runc
// then fails with "error setting rlimits"), and events go to a file (no
// journald). Its state (pid, socket, session) is
// written before the process starts, under <run>/podman/<name>/, so that
// `ctrperf clean` finds a killed session's service by pid and socket and,
// by the session's owner record, decides whether it is orphaned.

// ErrNoPodman is StartPodman's error when podman is not installed.
var ErrNoPodman = errors.New("podman not found: install Debian packages podman, netavark and aardvark-dns (scripts/bootstrap.sh)")

// PodmanService is a podman service of ctrperf's, as recorded.
type PodmanService struct {
	Name    string    `json:"name"`   // ctrperf-podman-<session>
	RunID   string    `json:"run_id"` // the session that started it
	PID     int       `json:"pid,omitempty"`
	Socket  string    `json:"socket"`
	Config  string    `json:"containers_conf"`
	LogFile string    `json:"log_file"`
	Started time.Time `json:"started"`
}

// podmanName is the service of session runID.
func podmanName(runID string) string { return engine.NamePrefix + "-podman-" + runID }

func (o Options) podmanDir() string { return filepath.Join(o.RunDir, "podman") }

func podmanStateFile(o Options, name string) string {
	return filepath.Join(o.podmanDir(), name, stateFile)
}

// StartPodman starts the podman service of session runID and returns it
// as an engine of its own (Runtime podman in Info). A service of the
// session that already answers is shared, not owned; a dead one's
// leftovers are stopped first. On failure nothing is left.
func StartPodman(ctx context.Context, runID string, opts ...Option) (*Daemon, error) {
	o := buildOptions(opts)
	bin, err := o.LookPath("podman")
	if err != nil {
		return nil, ErrNoPodman
	}
	name := podmanName(runID)
	unlock, err := lockEngine(o, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if old, err := readPodman(o, name); err == nil {
		if cli, err := ping(ctx, "unix://"+old.Socket, 2*time.Second); err == nil {
			return &Daemon{name: name, host: "unix://" + old.Socket, cli: cli, private: true, o: o, podman: old}, nil
		}
		stopPodman(o, old)
	}
	dir := filepath.Dir(podmanStateFile(o, name))
	ps := &PodmanService{Name: name, RunID: runID, Socket: filepath.Join(o.RunDir, "podman-"+runID+".sock"),
		Config: filepath.Join(dir, "containers.conf"), LogFile: filepath.Join(dir, "service.log"), Started: time.Now().UTC()}
	fail := func(err error) (*Daemon, error) {
		stopPodman(o, ps)
		return nil, fmt.Errorf("podman service %s: %w", name, err)
	}
	if err := writePodman(o, ps); err != nil {
		return fail(err)
	}
	d, err := runPodman(ctx, o, ps, bin)
	if err != nil {
		return fail(err)
	}
	d.owned = true
	return d, nil
}

// podmanLimits are the open-files and process limits the service's
// containers get: the service's own hard limits. Podman lowers its own
// process limit (here to the kernel's pid_max), so a first guess is this
// process's limits capped there; spawnPodman reads the service's limits
// and starts it again with those when the guess was wrong.
type podmanLimits struct{ NoFile, NProc uint64 }

// guessPodmanLimits is this process's hard limits, the process limit
// capped at pid_max.
func guessPodmanLimits(o Options) podmanLimits {
	var l podmanLimits
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil {
		l.NoFile = r.Max
	}
	if unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil {
		l.NProc = r.Max
	}
	if b, err := os.ReadFile(o.Kernel.Proc("sys/kernel/pid_max")); err == nil {
		if max, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && max < l.NProc {
			l.NProc = max
		}
	}
	return l
}

// processLimits reads a process's hard limits of open files and processes
// (/proc/PID/limits).
func processLimits(o Options, pid int) (podmanLimits, error) {
	f, err := os.Open(o.Kernel.Proc(strconv.Itoa(pid), "limits"))
	if err != nil {
		return podmanLimits{}, err
	}
	defer f.Close()
	return parseLimits(f)
}

// parseLimits parses /proc/PID/limits ("%-25s %-20s %-20s %-10s": limit,
// soft, hard, units) for the hard limits of open files and processes
// ("unlimited" is RLIM_INFINITY).
func parseLimits(r io.Reader) (podmanLimits, error) {
	var l podmanLimits
	want := map[string]*uint64{"Max open files": &l.NoFile, "Max processes": &l.NProc}
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 26 {
			continue
		}
		dst, ok := want[strings.TrimSpace(line[:26])]
		if !ok {
			continue
		}
		f := strings.Fields(line[26:])
		if len(f) < 2 {
			return l, fmt.Errorf("limits: %q has no hard limit", line)
		}
		if f[1] == "unlimited" {
			*dst = unix.RLIM_INFINITY
		} else if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			*dst = v
		} else {
			return l, fmt.Errorf("limits: hard limit %q in %q: %w", f[1], line, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return l, err
	}
	if found != len(want) {
		return l, errors.New("limits: no lines for open files and processes")
	}
	return l, nil
}

// runPodman starts the service of ps with its containers.conf: guessed
// limits first, then, when the service's own differ (podman set them at
// its start), once more with the service's.
func runPodman(ctx context.Context, o Options, ps *PodmanService, bin string) (*Daemon, error) {
	l := guessPodmanLimits(o)
	for attempt := 0; ; attempt++ {
		if err := os.WriteFile(ps.Config, podmanConfig(l), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", ps.Config, err)
		}
		d, err := spawnPodman(ctx, o, ps, bin)
		if err != nil {
			return nil, err
		}
		own, err := processLimits(o, ps.PID)
		if err != nil || own == l || attempt > 0 {
			return d, nil // unreadable: the containers say so when they start
		}
		d.cli.Close()
		stopPID(o.Kernel, ps.PID, o.StopWait)
		l = own
	}
}

// podmanConfig is the service's containers.conf: every container gets l
// (podman 4.3 reads -1 as unlimited, not as the service's own), events
// go to a file.
func podmanConfig(l podmanLimits) []byte {
	v := func(n uint64) string {
		if n == unix.RLIM_INFINITY {
			return "-1"
		}
		return strconv.FormatUint(n, 10)
	}
	return []byte(fmt.Sprintf("# ctrperf's podman service (internal/engine/daemon/podman.go)\n[containers]\n"+
		"default_ulimits = [\"nofile=%s:%s\", \"nproc=%s:%s\"]\n[engine]\nevents_logger = \"file\"\n",
		v(l.NoFile), v(l.NoFile), v(l.NProc), v(l.NProc)))
}

// spawnPodman starts the service process (its own process group: a
// Ctrl-C reaches ctrperf, which tears its runs down before stopping it),
// records its pid and waits until it answers.
func spawnPodman(ctx context.Context, o Options, ps *PodmanService, bin string) (*Daemon, error) {
	_ = os.Remove(ps.Socket)
	logf, err := os.OpenFile(ps.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open service log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "system", "service", "--time=0", "unix://"+ps.Socket)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+ps.Config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	ps.PID = cmd.Process.Pid
	exited := make(chan struct{})
	d := &Daemon{name: ps.Name, host: "unix://" + ps.Socket, private: true, o: o, podman: ps, exited: exited}
	go func() { d.waitErr = cmd.Wait(); close(exited) }()
	if err := writePodman(o, ps); err != nil {
		return nil, err
	}
	timeout := o.Ready
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for it to answer: %w", ctx.Err())
		case <-exited:
			return nil, fmt.Errorf("it exited during start (%v); its log %s ends:\n%s", d.waitErr, ps.LogFile, logTail(ps.LogFile, 15))
		case <-deadline.C:
			return nil, fmt.Errorf("it did not answer on %s within %s; its log %s ends:\n%s", ps.Socket, timeout, ps.LogFile, logTail(ps.LogFile, 15))
		case <-tick.C:
			if cli, err := ping(ctx, d.host, time.Second); err == nil {
				d.cli = cli
				return d, nil
			}
		}
	}
}

// stopPodman stops a recorded service (by pid, only while its command line
// names its socket: a recycled pid is never signalled) and removes its
// socket, state and lock. The containers it ran are not touched: conmon
// keeps them running, and they are removed through the API before.
func stopPodman(o Options, ps *PodmanService) []string {
	var done []string
	if ps.PID != 0 && ps.Socket != "" && ownedPID(o.Kernel, ps.PID, ps.Socket) {
		if stopPID(o.Kernel, ps.PID, o.StopWait) {
			done = append(done, fmt.Sprintf("%s: killed podman service pid %d (did not stop on SIGTERM within %s)", ps.Name, ps.PID, o.StopWait))
		} else {
			done = append(done, fmt.Sprintf("%s: stopped podman service pid %d", ps.Name, ps.PID))
		}
	}
	if ps.Socket != "" {
		_ = os.Remove(ps.Socket)
	}
	_ = os.RemoveAll(filepath.Dir(podmanStateFile(o, ps.Name)))
	_ = os.Remove(filepath.Join(o.enginesDir(), ps.Name+".lock"))
	return done
}

// Podman says whether the engine is a podman service.
func (d *Daemon) Podman() bool { return d.podman != nil }

// closePodman stops a service this process started; a shared one is only
// let go.
func (d *Daemon) closePodman() error {
	if d.cli != nil {
		d.cli.Close()
	}
	if !d.owned {
		return nil
	}
	unlock, err := lockEngine(d.o, d.name)
	if err != nil {
		return err
	}
	defer unlock()
	stopPodman(d.o, d.podman)
	return nil
}

// restartPodman starts the service again on its socket and state after it
// died or stopped answering (the containers, held by conmon, live on).
func (d *Daemon) restartPodman(ctx context.Context) error {
	bin, err := d.o.LookPath("podman")
	if err != nil {
		return ErrNoPodman
	}
	if ps := d.podman; ps.PID != 0 && ownedPID(d.o.Kernel, ps.PID, ps.Socket) {
		stopPID(d.o.Kernel, ps.PID, d.o.StopWait)
	}
	nd, err := runPodman(ctx, d.o, d.podman, bin)
	if err != nil {
		return fmt.Errorf("restart podman service %s: %w", d.name, err)
	}
	nd.cli.Close()
	_ = d.cli.Close() // idle connections to the dead service
	return nil
}

func writePodman(o Options, ps *PodmanService) error {
	p := podmanStateFile(o, ps.Name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create podman state dir: %w", err)
	}
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write podman state: %w", err)
	}
	return nil
}

func readPodman(o Options, name string) (*PodmanService, error) {
	b, err := os.ReadFile(podmanStateFile(o, name))
	if err != nil {
		return nil, err
	}
	var ps PodmanService
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, fmt.Errorf("parse podman state %s: %w", podmanStateFile(o, name), err)
	}
	if ps.Name != name {
		return nil, fmt.Errorf("podman state %s names service %q", podmanStateFile(o, name), ps.Name)
	}
	return &ps, nil
}

// ListedPodman is a recorded podman service of ctrperf's.
type ListedPodman struct {
	PodmanService
	Alive bool `json:"alive"` // its process runs
}

// ListPodman returns every podman service ctrperf recorded; one whose
// state does not read is reported, not hidden.
func ListPodman(opts ...Option) ([]ListedPodman, error) {
	o := buildOptions(opts)
	ents, err := os.ReadDir(o.podmanDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list podman services in %s: %w", o.podmanDir(), err)
	}
	var out []ListedPodman
	var errs []error
	for _, e := range ents {
		ps, err := readPodman(o, e.Name())
		if errors.Is(err, os.ErrNotExist) {
			// Another ctrperf's service between its directory and its
			// first state write, or removed since ReadDir: nothing of it
			// is recorded to clean yet (CI, 2026-11-29: a concurrent
			// clean failed on one being started).
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ListedPodman{PodmanService: *ps, Alive: ps.PID != 0 && ownedPID(o.Kernel, ps.PID, ps.Socket)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// PodmanOf says whether the service of session concerns a clean of runID:
// every one for "", else the session itself or one of its runs.
func PodmanOf(session, runID string) bool {
	return runID == "" || runID == session || strings.HasPrefix(runID, session+"-")
}

// CleanPodman removes the podman services of runID's session ("" every one)
// that keep does not keep (nil keeps none), each decided under its lock:
// the service answers (a dead one is started again on its socket for
// this), sweep removes ctrperf's objects of the service's session through
// it (the caller decides which: never a container ctrperf did not make),
// then the service is
// stopped and its state removed. After a sweep that fails the service
// runs on, recorded, for the next clean.
func CleanPodman(ctx context.Context, runID string, keep func(PodmanService) bool, sweep func(context.Context, client.APIClient, PodmanService) ([]string, error), opts ...Option) ([]string, error) {
	o := buildOptions(opts)
	listed, err := ListPodman(opts...)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var done []string
	for _, l := range listed {
		if !PodmanOf(l.RunID, runID) {
			continue
		}
		d, err := cleanPodmanLocked(ctx, o, l.Name, keep, sweep)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, fmt.Errorf("clean podman service %s: %w", l.Name, err))
		}
	}
	return done, errors.Join(errs...)
}

func cleanPodmanLocked(ctx context.Context, o Options, name string, keep func(PodmanService) bool, sweep func(context.Context, client.APIClient, PodmanService) ([]string, error)) ([]string, error) {
	unlock, err := lockEngine(o, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ps, err := readPodman(o, name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if keep != nil && keep(*ps) {
		return nil, nil
	}
	var done []string
	cli, err := ping(ctx, "unix://"+ps.Socket, 3*time.Second)
	if err != nil {
		// Dead (a killed session's, or stopped by hand): its containers
		// live on under conmon; the service is started again to remove them.
		bin, lerr := o.LookPath("podman")
		if lerr != nil {
			return nil, ErrNoPodman
		}
		stopPodman(o, &PodmanService{Name: ps.Name, PID: ps.PID, Socket: ps.Socket})
		if err := writePodman(o, ps); err != nil {
			return nil, err
		}
		d, serr := runPodman(ctx, o, ps, bin)
		if serr != nil {
			stopPodman(o, ps)
			return nil, fmt.Errorf("start it again to remove its containers: %w", serr)
		}
		done = append(done, name+": started the dead podman service again to remove its containers")
		cli = d.cli
	}
	r, serr := sweep(ctx, cli, *ps)
	cli.Close()
	done = append(done, r...)
	if serr != nil {
		return done, serr // the service and its state stay for the next clean
	}
	return append(done, stopPodman(o, ps)...), nil
}

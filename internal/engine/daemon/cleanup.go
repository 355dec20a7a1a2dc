package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/kernel"
)

// teardown removes everything st records, in the order that works: the
// dockerd (gracefully first, so it stops its containers), what a killed
// dockerd leaves running (containerd, shims, container processes,
// docker-proxy), mounts, the loop device, the bridge, iptables rules,
// directories, and last the state itself. Each step tolerates a piece that
// was never created or is already gone; errors are collected, not fatal, so
// one stuck piece does not leave the rest behind.
func teardown(ctx context.Context, o Options, st *State, ipt iptablesRunner) ([]string, error) {
	var done []string
	var errs []error
	note := func(format string, a ...any) { done = append(done, st.Name+": "+fmt.Sprintf(format, a...)) }

	done, errs = append(done, stopEngineProcesses(o, st)...), append(errs, killErrs(o, st)...)

	// Bridges of user-defined networks, in case the engine could not remove
	// them itself (see cleanEngine): their names are in its network store,
	// which lives in the data root, so read it before unmounting.
	if st.DataRoot != "" {
		for _, br := range storeBridges(st.DataRoot) {
			if ok, err := deleteBridge(br); err != nil {
				errs = append(errs, err)
			} else if ok {
				note("deleted bridge %s of a user-defined network", br)
			}
			if st.IPTables && ipt != nil {
				if n, err := deleteRulesOf(ctx, ipt, br, ""); err != nil {
					errs = append(errs, err)
				} else if n > 0 {
					note("deleted %d iptables rules of %s", n, br)
				}
			}
		}
	}

	mnts, err := kernel.Mounts(o.Kernel.Proc())
	if err != nil {
		errs = append(errs, err)
	}
	var loopMount string
	if st.Loop != nil {
		loopMount = st.Loop.Mount
	}
	for _, p := range kernel.MountsUnder(mnts, st.ExecRoot, st.DataRoot, loopMount, stateDirOrEmpty(o, st)) {
		if err := unix.Unmount(p, 0); err != nil {
			if err2 := unix.Unmount(p, unix.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
				continue
			}
		}
		note("unmounted %s", p)
	}

	if st.Loop != nil && st.Loop.Image != "" {
		devs := loopDevicesOf(o.Kernel, st.Loop.Image)
		for dev := range devs {
			ok, err := detachLoop(ctx, o.Kernel, dev, st.Loop.Image)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				note("detached loop device %s", dev)
			}
		}
		if err := os.Remove(st.Loop.Image); err == nil {
			note("removed loop image %s", st.Loop.Image)
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove loop image: %w", err))
		}
	}

	if st.Bridge != "" {
		if ok, err := deleteBridge(st.Bridge); err != nil {
			errs = append(errs, err)
		} else if ok {
			note("deleted bridge %s", st.Bridge)
		}
		if st.IPTables && ipt != nil {
			n, err := deleteRulesOf(ctx, ipt, st.Bridge, st.Subnet)
			if err != nil {
				errs = append(errs, err)
			}
			if n > 0 {
				note("deleted %d iptables rules", n)
			}
		}
	}

	// The jumps this engine's dockerd hooked into the built-in chains,
	// unless another live private engine made the same (then the last one
	// to go removes them).
	// An engine with the userland proxy off always owns the loopback hook,
	// recorded or not: it may have started while another such engine had
	// made it, or been killed before it could record it.
	jumps := st.AddedJumps
	if up := st.Spec.UserlandProxy; up != nil && !*up && !slices.ContainsFunc(jumps, func(r ipRule) bool { return r.String() == loopbackHook.String() }) {
		jumps = append(slices.Clone(jumps), loopbackHook)
	}
	if st.IPTables && ipt != nil && len(jumps) > 0 {
		if other := jumpsStillNeeded(o, st); other != "" {
			note("kept %d iptables jumps into DOCKER: %s still runs with the userland proxy off", len(jumps), other)
		} else if n, err := deleteJumps(ctx, ipt, jumps); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			note("deleted %d iptables jumps into DOCKER", n)
		}
	}

	// The other engines' rules a start of this engine flushed and, killed
	// before it could, never put back (rulesnapshot.go); its dockerd is
	// stopped by now, so it cannot flush them again.
	if ipt != nil && st.Name != "" {
		if n, err := restoreLeftSnapshot(ctx, o, st.Name, ipt); err != nil {
			errs = append(errs, err)
		} else if len(n) > 0 {
			note("put back %d iptables rules of other engines that its interrupted start had flushed", len(n))
		}
	}

	// Directories, only inside ctrperf's own roots whatever the state says,
	// and never across a mount that is still there.
	mnts, _ = kernel.Mounts(o.Kernel.Proc())
	rm := func(dir, root string) {
		if dir == "" || !kernel.PathUnder(dir, root) || filepath.Clean(dir) == filepath.Clean(root) {
			return
		}
		if left := kernel.MountsUnder(mnts, dir); len(left) > 0 {
			errs = append(errs, fmt.Errorf("not removing %s: still mounted below it: %s", dir, strings.Join(left, ", ")))
			return
		}
		if _, err := os.Lstat(dir); err != nil {
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
			return
		}
		note("removed %s", dir)
	}
	rm(st.ExecRoot, o.RunDir)
	if !st.KeepDataRoot {
		rm(st.DataRoot, o.LibDir)
	}
	if st.Loop != nil {
		rm(st.Loop.Mount, o.LibDir)
	}
	if len(errs) == 0 {
		// The state goes last and only when everything else went: a failed
		// teardown keeps its map for the next `ctrperf clean`.
		rm(stateDir(o, st.Name), o.RunDir)
		if st.Name != "" {
			_ = os.Remove(filepath.Join(o.enginesDir(), st.Name+".lock"))
		}
	}
	return done, errors.Join(errs...)
}

// stopEngineProcesses stops the dockerd (gracefully first, so it stops its
// containers) and what a killed dockerd leaves running: containerd, shims,
// container processes, docker-proxy.
func stopEngineProcesses(o Options, st *State) []string {
	var done []string
	note := func(format string, a ...any) { done = append(done, st.Name+": "+fmt.Sprintf(format, a...)) }
	if st.Socket != "" {
		pid := st.PID
		if pid == 0 {
			pid = readPIDFile(st.PIDFile)
		}
		if ownedPID(o.Kernel, pid, st.Socket) {
			if stopPID(o.Kernel, pid, o.StopWait) {
				note("killed dockerd pid %d (did not stop on SIGTERM within %s)", pid, o.StopWait)
			} else {
				note("stopped dockerd pid %d", pid)
			}
		}
	}
	if st.ExecRoot != "" {
		// containerd, its shims and anything else started for this engine
		// carry the exec-root in their command line.
		for _, pid := range pidsMatching(o.Kernel, st.ExecRoot) {
			what := firstWord(procCmdline(o.Kernel, pid))
			stopPID(o.Kernel, pid, 2*time.Second)
			note("stopped leftover process %d (%s)", pid, what)
		}
	}
	if st.DataRoot != "" {
		if n, _ := killContainerProcesses(o, st.DataRoot); n > 0 {
			note("killed %d leftover container processes", n)
		}
	}
	if st.Subnet != "" {
		for _, pid := range proxyPIDsIn(o.Kernel, st.Subnet) {
			stopPID(o.Kernel, pid, 2*time.Second)
			note("stopped leftover docker-proxy %d", pid)
		}
	}

	return done
}

// killErrs reports cgroups of the engine's containers that could not be
// removed after stopEngineProcesses.
func killErrs(o Options, st *State) []error {
	if st.DataRoot == "" {
		return nil
	}
	if _, err := killContainerProcesses(o, st.DataRoot); err != nil {
		return []error{err}
	}
	return nil
}

// storeBridges lists the br-* bridge names recorded in an engine's
// libnetwork store (<data-root>/network/files/local-kv.db). Network ids are
// random, so these names are this engine's and no other's.
func storeBridges(dataRoot string) []string {
	f, err := os.Open(filepath.Join(dataRoot, "network", "files", "local-kv.db"))
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseStoreBridges(f)
}

var storeBridgeRE = regexp.MustCompile(`br-[0-9a-f]{12}`)

func parseStoreBridges(r io.Reader) []string {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range storeBridgeRE.FindAll(b, -1) {
		if !seen[string(m)] {
			seen[string(m)] = true
			out = append(out, string(m))
		}
	}
	return out
}

func stateDirOrEmpty(o Options, st *State) string {
	if st.Name == "" {
		return ""
	}
	return stateDir(o, st.Name)
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// killContainerProcesses kills what is left in the cgroups of the engine's
// containers (their shims are gone after a SIGKILL, the containers are not)
// and removes those cgroups. Container ids come from <data-root>/containers.
func killContainerProcesses(o Options, dataRoot string) (int, error) {
	ents, err := os.ReadDir(filepath.Join(dataRoot, "containers"))
	if err != nil {
		return 0, nil // no containers dir: nothing ever ran
	}
	ctrls, _ := os.ReadDir(o.Kernel.Cgroup())
	n := 0
	var errs []error
	for _, c := range ents {
		id := c.Name()
		var dirs []string
		for _, ctrl := range ctrls {
			d := o.Kernel.Cgroup(ctrl.Name(), "docker", id)
			if _, err := os.Stat(d); err == nil {
				dirs = append(dirs, d)
			}
		}
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					if syscall.Kill(pid, syscall.SIGKILL) == nil {
						n++
					}
				}
			}
		}
		for _, d := range dirs {
			if err := rmdirRetry(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

// rmdirRetry removes an emptied cgroup; the kernel needs a moment after the
// last task died.
func rmdirRetry(d string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Rmdir(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, err)
}

// proxyPIDsIn finds docker-proxy processes forwarding to an address inside
// subnet: the ones a killed private dockerd leaves orphaned.
func proxyPIDsIn(fs kernel.FS, subnet string) []int {
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range pidsMatching(fs, "docker-proxy") {
		f := strings.Fields(procCmdline(fs, pid))
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-container-ip" {
				if ip := net.ParseIP(f[i+1]); ip != nil && n.Contains(ip) {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// Listed is a private engine ctrperf knows about.
type Listed struct {
	State
	Alive bool `json:"alive"` // its dockerd is running
}

// List returns every private engine recorded under the run dir.
func List(opts ...Option) ([]Listed, error) {
	o := buildOptions(opts)
	sts, errs := listStates(o)
	var out []Listed
	for _, st := range sts {
		pid := st.PID
		if pid == 0 {
			pid = readPIDFile(st.PIDFile)
		}
		out = append(out, Listed{State: *st, Alive: st.Socket != "" && ownedPID(o.Kernel, pid, st.Socket)})
	}
	return out, errors.Join(errs...)
}

// CleanAll stops the private engines of run runID ("" = every engine ctrperf
// started, including the shared default one), and removes their mounts, loop
// devices, bridges, iptables rules, directories and state. It also detaches
// loop devices and unmounts mounts of ctrperf's that no state mentions any
// more (a start killed between two steps). It returns what it removed.
func CleanAll(ctx context.Context, runID string, opts ...Option) ([]string, error) {
	return CleanEngines(ctx, runID, nil, opts...)
}

// CleanEngines is CleanAll leaving alone the engines keep says to keep (a
// live session's; nil keeps none). Their loop images and mounts stay too.
// keep is asked, and the engine removed, while holding the engine's lock,
// with its state read again under it: a run that is starting or sharing
// the engine holds that lock until it is done, and its owner record exists
// before it does, so keep (re-reading the owners) sees it.
func CleanEngines(ctx context.Context, runID string, keep func(State) bool, opts ...Option) ([]string, error) {
	o := buildOptions(opts)
	sts, errs := listStates(o)
	var done []string
	for _, listed := range sts {
		if runID != "" && listed.RunID != runID {
			continue
		}
		d, err := cleanEngineLocked(ctx, o, listed.Name, keep)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, fmt.Errorf("clean engine %s: %w", listed.Name, err))
		}
	}
	d, err := cleanOrphans(ctx, o, runID)
	done = append(done, d...)
	if err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// cleanEngineLocked removes engine name unless keep keeps it, deciding
// under the engine's lock on its state as it is then (gone meanwhile:
// nothing to do).
func cleanEngineLocked(ctx context.Context, o Options, name string, keep func(State) bool) ([]string, error) {
	unlock, err := lockEngine(o, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := readState(o, name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if keep != nil && keep(*st) {
		return nil, nil
	}
	return cleanEngine(ctx, o, st)
}

// cleanOrphans handles mounts and loop devices under ctrperf's loop and mount
// dirs that belong to no recorded engine. For a run id, only names carrying
// that run id are touched.
func cleanOrphans(ctx context.Context, o Options, runID string) ([]string, error) {
	sts, _ := listStates(o)
	known := map[string]bool{}
	for _, st := range sts {
		if st.Loop != nil {
			known[st.Loop.Image] = true
			known[st.Loop.Mount] = true
		}
	}
	// Data filesystems of runs (their own state; CleanDataFS removes them).
	fss, _ := listDataFS(o)
	for _, f := range fss {
		known[f.Image] = true
		known[f.Mount] = true
	}
	mine := func(p string) bool {
		if known[p] {
			return false
		}
		return runID == "" || strings.HasSuffix(strings.TrimSuffix(filepath.Base(p), ".img"), "-"+runTag(runID))
	}
	var done []string
	var errs []error
	mnts, _ := kernel.Mounts(o.Kernel.Proc())
	for _, p := range kernel.MountsUnder(mnts, o.mntDir()) {
		top := filepath.Join(o.mntDir(), strings.SplitN(strings.TrimPrefix(p, o.mntDir()+"/"), "/", 2)[0])
		if !mine(top) {
			continue
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount orphan %s: %w", p, err))
			continue
		}
		done = append(done, "unmounted orphan "+p)
	}
	for dev, file := range loopDevicesOf(o.Kernel, o.loopDir()) {
		if !mine(file) {
			continue
		}
		if ok, err := detachLoop(ctx, o.Kernel, dev, file); err != nil {
			errs = append(errs, err)
		} else if ok {
			done = append(done, "detached orphan loop device "+dev+" ("+file+")")
		}
		if err := os.Remove(file); err == nil {
			done = append(done, "removed orphan loop image "+file)
		}
	}
	return done, errors.Join(errs...)
}

// loopbackHook is the nat OUTPUT jump that a dockerd with
// --userland-proxy=false adds so that 127.0.0.1 reaches its published ports
// through DNAT; it sends the loopback traffic for every other engine's
// published ports to DNAT too, away from their docker-proxy, where it hangs.
var loopbackHook = ipRule{Table: "nat", Chain: "OUTPUT", Args: []string{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"}}

// userEngineFlags are the flags of the user's own dockerd, when it runs.
var userEngineFlags = func(o Options) (DaemonFlags, bool) { return FlagsOf(o.Kernel, UserHost()) }

// jumpsStillNeeded names an engine that runs with the same settings
// (userland proxy off) and so relies on the jumps st added: another live
// private engine, or the user's own; "" when there is none.
func jumpsStillNeeded(o Options, st *State) string {
	if f, ok := userEngineFlags(o); ok && f.IPTables && !f.UserlandProxy {
		return "the user's engine at " + UserHost()
	}
	sts, _ := listStates(o)
	for _, other := range sts {
		if other.Name == st.Name || !other.IPTables {
			continue
		}
		if up := other.Spec.UserlandProxy; up == nil || *up {
			continue
		}
		pid := other.PID
		if pid == 0 {
			pid = readPIDFile(other.PIDFile)
		}
		if other.Socket != "" && ownedPID(o.Kernel, pid, other.Socket) {
			return "engine " + other.Name
		}
	}
	return ""
}

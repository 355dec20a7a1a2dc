package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// ContainersOf lists the containers of a deployed target for the observer,
// keyed by service name ("app", "db") so that series of different runs line
// up in reports; a target without service names falls back to container names.
// Containers without a cgroup path (not started) are left out.
func ContainersOf(t *engine.Target) []Container {
	if t == nil {
		return nil
	}
	var out []Container
	for _, c := range t.Containers {
		if c.CgroupPath == "" {
			continue
		}
		name := c.Service
		if name == "" {
			name = c.Name
		}
		out = append(out, Container{Name: name, CgroupPath: c.CgroupPath})
	}
	return out
}

// cgroupCounters is one reading of a container's cgroup.
type cgroupCounters struct {
	cpuNs            uint64
	throttledPeriods uint64
	throttledNs      uint64
	memBytes         uint64
	readBytes        uint64
	writeBytes       uint64
	// Context switches of the cgroup's threads: per thread ID, as last
	// read, and what this reading adds to the previous one (see ctxsw).
	threads          map[int]kernel.CtxSwitches
	ctxVol, ctxInvol uint64
	ctxOK            bool
}

// containerSampler reads the cgroups of a list of containers.
type containerSampler struct {
	procRoot string        // for the threads' /proc/<tid>/status
	cgroups  kernel.Layout // detected once, when the observer starts
	mayGo    bool          // a cgroup that disappears after a reading is no failure
	mu       sync.Mutex
	list     []Container
	prev     map[string]cgroupCounters // by container name
}

func newContainerSampler(fs kernel.FS, list []Container) *containerSampler {
	return &containerSampler{procRoot: fs.Proc(), cgroups: fs.Cgroups(), list: list, prev: map[string]cgroupCounters{}}
}

// accountingV2 says where a layout keeps the containers' accounting: in v1
// hierarchies (cpuacct, cpu, memory, blkio; a hybrid machine's empty
// unified mount has none) or in the unified one.
func accountingV2(l kernel.Layout) (bool, error) {
	switch {
	case l.Mode == kernel.V2:
		return true, nil
	case l.HasV1("cpuacct"):
		return false, nil
	}
	return false, fmt.Errorf("no cgroup v1 (cpuacct) or v2 (cgroup.controllers) hierarchy at %s", l.Root)
}

func (c *containerSampler) set(list []Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = list
}

func (c *containerSampler) name() string { return "containers" }

func (c *containerSampler) sample(dt float64, s *results.Sample, fail func(string, error)) error {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	if len(list) == 0 {
		return nil
	}
	v2, err := accountingV2(c.cgroups)
	if err != nil {
		return err
	}
	cur := make(map[string]cgroupCounters, len(list))
	for _, ct := range list {
		var (
			cnt cgroupCounters
			err error
		)
		if v2 {
			cnt, err = readCgroupV2(c.cgroups, ct.CgroupPath)
		} else {
			cnt, err = readCgroupV1(c.cgroups, ct.CgroupPath)
		}
		p, seen := c.prev[ct.Name]
		if err != nil {
			if c.mayGo && seen && errors.Is(err, fs.ErrNotExist) {
				cur[ct.Name] = p // still known, so its absence stays quiet
				continue
			}
			fail("containers/"+ct.Name, err)
			if errors.Is(err, errNoCPUAccounting) {
				continue
			}
		}
		var prevThreads map[int]kernel.CtxSwitches
		if seen {
			prevThreads = p.threads
		}
		if err := c.ctxsw(&cnt, v2, ct.CgroupPath, prevThreads); err != nil {
			fail("containers/"+ct.Name+"/ctxsw", err)
		}
		cur[ct.Name] = cnt
		if dt <= 0 || !seen || cnt.cpuNs < p.cpuNs {
			continue // first reading, or a new cgroup under the same name
		}
		if s.Containers == nil {
			s.Containers = map[string]results.ContainerStats{}
		}
		s.Containers[ct.Name] = containerRates(p, cnt, dt)
	}
	c.prev = cur
	return nil
}

// containerRates turns two readings dt seconds apart into the figures of
// one interval: CPU in percent of one CPU, throttled periods and seconds
// during the interval, memory as a level, block I/O in bytes per second.
func containerRates(p, c cgroupCounters, dt float64) results.ContainerStats {
	d := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b - a)
	}
	cs := results.ContainerStats{
		CPUPercent:       d(p.cpuNs, c.cpuNs) / 1e9 / dt * 100,
		ThrottledPeriods: d(p.throttledPeriods, c.throttledPeriods),
		ThrottledS:       d(p.throttledNs, c.throttledNs) / 1e9,
		MemBytes:         float64(c.memBytes),
		BlkReadBPerS:     d(p.readBytes, c.readBytes) / dt,
		BlkWriteBPerS:    d(p.writeBytes, c.writeBytes) / dt,
	}
	if c.ctxOK && p.ctxOK {
		cs.VoluntaryCtxSwPerS = float64(c.ctxVol) / dt
		cs.InvoluntaryCtxSwPerS = float64(c.ctxInvol) / dt
	}
	return cs
}

// ctxsw reads the context switches of the cgroup's threads (cgroup.threads
// on v2, tasks of the cpuacct hierarchy on v1, then /proc/<tid>/status of
// each) into cnt: the counters per thread, and in ctxVol/ctxInvol what the
// interval since prev added: a thread seen before counts its increase, a
// thread new to the cgroup counts all its switches (it started, or moved
// in, during the interval). A thread that exited during the interval takes
// its switches since the previous reading with it: short-lived processes
// (an exec loop) are undercounted; long-lived ones (servers, stress-ng
// workers) are counted whole. A thread gone between the listing and its
// status is simply left out.
func (c *containerSampler) ctxsw(cnt *cgroupCounters, v2 bool, path string, prev map[int]kernel.CtxSwitches) error {
	dir := c.cgroups.Path("", path)
	if !v2 {
		dir = c.cgroups.Path("cpuacct", path)
	}
	tids, err := kernel.CgroupThreads(dir)
	if err != nil {
		return err
	}
	cnt.threads = make(map[int]kernel.CtxSwitches, len(tids))
	for _, tid := range tids {
		cs, err := kernel.TaskCtxSwitches(c.procRoot, tid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		cnt.threads[tid] = cs
		p, ok := prev[tid]
		if !ok || cs.Voluntary < p.Voluntary || cs.Involuntary < p.Involuntary {
			p = kernel.CtxSwitches{} // new (or a reused thread ID)
		}
		cnt.ctxVol += cs.Voluntary - p.Voluntary
		cnt.ctxInvol += cs.Involuntary - p.Involuntary
	}
	cnt.ctxOK = true
	return nil
}

// errNoCPUAccounting marks a reading without CPU usage, which makes the
// whole reading useless; other missing files only leave their figure at 0.
var errNoCPUAccounting = errors.New("no CPU accounting")

// readCgroupV1 reads cpuacct.usage, cpu.stat, memory.usage_in_bytes and
// blkio.throttle.io_service_bytes below each controller's root. Note that
// since Linux 6.x the v1 blkio throttle counters only move on devices that
// have a throttle limit configured in that cgroup; without one they stay 0.
func readCgroupV1(l kernel.Layout, path string) (cgroupCounters, error) {
	var cnt cgroupCounters
	usage, err := kernel.CPUUsage(l.Path("cpuacct", path))
	if err != nil {
		return cnt, fmt.Errorf("%w: %w", errNoCPUAccounting, err)
	}
	cnt.cpuNs = uint64(usage)
	var errs []error
	if kv, err := readKeyedFile(filepath.Join(l.Path("cpu", path), "cpu.stat")); err != nil {
		errs = append(errs, err)
	} else {
		cnt.throttledPeriods, cnt.throttledNs = kv["nr_throttled"], kv["throttled_time"]
	}
	if cnt.memBytes, err = readUintFile(filepath.Join(l.Path("memory", path), "memory.usage_in_bytes")); err != nil {
		errs = append(errs, err)
	}
	blk := filepath.Join(l.Path("blkio", path), "blkio.throttle.io_service_bytes")
	if b, err := os.ReadFile(blk); err != nil {
		errs = append(errs, err)
	} else if cnt.readBytes, cnt.writeBytes, err = parseBlkioServiceBytes(bytes.NewReader(b)); err != nil {
		errs = append(errs, fmt.Errorf("parse %s: %w", blk, err))
	}
	return cnt, errors.Join(errs...)
}

// readCgroupV2 reads cpu.stat, memory.current and io.stat of one cgroup.
func readCgroupV2(l kernel.Layout, path string) (cgroupCounters, error) {
	var cnt cgroupCounters
	dir := l.Path("", path)
	usage, err := kernel.CPUUsage(dir)
	if err != nil {
		return cnt, fmt.Errorf("%w: %w", errNoCPUAccounting, err)
	}
	cnt.cpuNs = uint64(usage)
	var errs []error
	if kv, err := readKeyedFile(filepath.Join(dir, "cpu.stat")); err != nil {
		errs = append(errs, err)
	} else {
		cnt.throttledPeriods, cnt.throttledNs = kv["nr_throttled"], kv["throttled_usec"]*1000
	}
	if cnt.memBytes, err = readUintFile(filepath.Join(dir, "memory.current")); err != nil {
		errs = append(errs, err)
	}
	ioStat := filepath.Join(dir, "io.stat")
	if b, err := os.ReadFile(ioStat); err != nil {
		errs = append(errs, err)
	} else if cnt.readBytes, cnt.writeBytes, err = parseIOStat(bytes.NewReader(b)); err != nil {
		errs = append(errs, fmt.Errorf("parse %s: %w", ioStat, err))
	}
	return cnt, errors.Join(errs...)
}

func readUintFile(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

func readKeyedFile(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv, err := parseFlatKeyed(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return kv, nil
}

// parseFlatKeyed parses "key value" lines (cpu.stat on v1 and v2).
func parseFlatKeyed(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %s: value %q: %w", f[0], f[1], err)
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// parseBlkioServiceBytes sums the Read and Write lines of every device in a
// v1 blkio.throttle.io_service_bytes ("254:0 Read 1970176").
func parseBlkioServiceBytes(r io.Reader) (read, write uint64, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || (f[1] != "Read" && f[1] != "Write") {
			continue // "Total N", Sync, Async, Discard
		}
		v, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("device %s %s: value %q: %w", f[0], f[1], f[2], err)
		}
		if f[1] == "Read" {
			read += v
		} else {
			write += v
		}
	}
	return read, write, sc.Err()
}

// parseIOStat sums rbytes and wbytes over the devices of a v2 io.stat
// ("254:0 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0").
func parseIOStat(r io.Reader) (read, write uint64, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || (k != "rbytes" && k != "wbytes") {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("device %s %s: value %q: %w", f[0], k, v, err)
			}
			if k == "rbytes" {
				read += n
			} else {
				write += n
			}
		}
	}
	return read, write, sc.Err()
}

package observe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"ctrperf/internal/results"
)

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on every
// Linux architecture Docker runs on).
const userHZ = 100

// ProcInfo is what a ProcessMatcher sees of a process.
type ProcInfo struct {
	PID int
	// Comm is the kernel's command name, truncated to 15 characters
	// ("containerd-shim-runc-v2" shows as "containerd-shim").
	Comm string
	// Self is true for the process running the observer (the load generator).
	Self bool

	proc procfs.Proc
}

// Cmdline reads the process's arguments (only matchers that need them pay
// for the read); nil when the process is gone.
func (p ProcInfo) Cmdline() []string {
	args, err := p.proc.CmdLine()
	if err != nil {
		return nil
	}
	return args
}

// ProcessMatcher says whether a process belongs to a group.
type ProcessMatcher func(ProcInfo) bool

// Exe returns the base name of the process's executable ("" when it is
// gone or a kernel thread); reading it costs a readlink, so only matchers
// that need it call it.
func (p ProcInfo) Exe() string {
	exe, err := p.proc.Executable()
	if err != nil || exe == "" {
		return ""
	}
	return filepath.Base(exe)
}

// MatchExe matches processes whose executable's base name is one of names:
// for programs whose names are longer than comm's 15 characters.
func MatchExe(names ...string) ProcessMatcher {
	return func(p ProcInfo) bool {
		if len(p.Comm) < 15 {
			// comm is the executable's name unless truncated or renamed:
			// skip the readlink when it cannot be a truncated match.
			if !slices.Contains(names, p.Comm) {
				return false
			}
		}
		return slices.Contains(names, p.Exe())
	}
}

// MatchComm matches processes whose command name is one of names.
func MatchComm(names ...string) ProcessMatcher {
	return func(p ProcInfo) bool {
		for _, n := range names {
			if p.Comm == n {
				return true
			}
		}
		return false
	}
}

// MatchCommPrefix matches processes whose command name starts with prefix.
func MatchCommPrefix(prefix string) ProcessMatcher {
	return func(p ProcInfo) bool { return strings.HasPrefix(p.Comm, prefix) }
}

// MatchPIDs matches these processes (a host-runtime workload, one
// particular docker-proxy).
func MatchPIDs(pids ...int) ProcessMatcher {
	return func(p ProcInfo) bool {
		for _, pid := range pids {
			if p.PID == pid {
				return true
			}
		}
		return false
	}
}

// MatchDockerProxyPort matches the docker-proxy that serves one published
// host port, so that a run's own proxy is told apart from other
// containers' proxies on the same engine.
func MatchDockerProxyPort(hostPort int) ProcessMatcher {
	port := strconv.Itoa(hostPort)
	return func(p ProcInfo) bool {
		if p.Comm != "docker-proxy" {
			return false
		}
		args := p.Cmdline()
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-host-port" && args[i+1] == port {
				return true
			}
		}
		return false
	}
}

// MatchSelf matches the observing process itself.
func MatchSelf() ProcessMatcher { return func(p ProcInfo) bool { return p.Self } }

// DefaultProcessGroups are the processes of the container infrastructure
// that cost CPU on the host, plus the load generator (this process).
func DefaultProcessGroups() map[string]ProcessMatcher {
	return map[string]ProcessMatcher{
		"dockerd":         MatchComm("dockerd"),
		"containerd":      MatchComm("containerd"),
		"containerd-shim": MatchCommPrefix("containerd-shim"),
		"docker-proxy":    MatchComm("docker-proxy"),
		"loadgen":         MatchSelf(),
	}
}

// procReading is one process's CPU time at one reading.
type procReading struct {
	start uint64 // start time in ticks since boot: tells a reused pid apart
	ticks uint64 // utime + stime
}

// processSampler sums CPU and RSS of the processes of each group from
// /proc/<pid>/stat.
type processSampler struct {
	procRoot   string
	groups     map[string]ProcessMatcher
	prev       map[int]procReading
	prevUptime float64 // seconds since boot at the previous reading; 0 unknown
}

func newProcessSampler(procRoot string, groups map[string]ProcessMatcher) *processSampler {
	return &processSampler{procRoot: procRoot, groups: groups}
}

func (ps *processSampler) name() string { return "processes" }

func (ps *processSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	if len(ps.groups) == 0 {
		return nil
	}
	fs, err := procfs.NewFS(ps.procRoot)
	if err != nil {
		return fmt.Errorf("open proc root %s: %w", ps.procRoot, err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return fmt.Errorf("list processes under %s: %w", ps.procRoot, err)
	}
	selfPID := -1
	if self, err := fs.Self(); err == nil {
		selfPID = self.PID
	}
	uptime, _ := readUptime(ps.procRoot) // without it new processes just wait a reading
	stats := map[string]results.ProcessStats{}
	for name := range ps.groups {
		stats[name] = results.ProcessStats{}
	}
	cur := map[int]procReading{}
	for _, p := range procs {
		// The short comm file decides membership; only members pay for
		// parsing the 52 fields of stat, which is most of the cost.
		comm, err := p.Comm()
		if err != nil {
			continue // exited since the directory was listed
		}
		info := ProcInfo{PID: p.PID, Comm: comm, Self: p.PID == selfPID, proc: p}
		var member []string
		for name, match := range ps.groups {
			if match(info) {
				member = append(member, name)
			}
		}
		if len(member) == 0 {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		r := procReading{start: st.Starttime, ticks: uint64(st.UTime + st.STime)}
		cur[p.PID] = r
		used, ok := ps.cpuTicks(r, p.PID)
		for _, name := range member {
			g := stats[name]
			g.Count++
			g.RSSBytes += float64(st.ResidentMemory())
			if ok && dt > 0 {
				g.CPUPercent += float64(used) / userHZ / dt * 100
			}
			stats[name] = g
		}
	}
	if dt > 0 && ps.prev != nil {
		s.Processes = stats
	}
	ps.prev, ps.prevUptime = cur, uptime
	return nil
}

// cpuTicks is the CPU a process used since the previous reading. A process
// seen before counts its delta; a new one counts all its time only if it
// started after the previous reading (it then used it all in this interval);
// otherwise (first reading of the observer, or no uptime) it has no delta yet.
func (ps *processSampler) cpuTicks(r procReading, pid int) (uint64, bool) {
	if p, ok := ps.prev[pid]; ok && p.start == r.start {
		if r.ticks < p.ticks {
			return 0, false
		}
		return r.ticks - p.ticks, true
	}
	if ps.prev != nil && ps.prevUptime > 0 && float64(r.start) >= ps.prevUptime*userHZ {
		return r.ticks, true
	}
	return 0, false
}

// readUptime reads the seconds since boot from <proc>/uptime.
func readUptime(procRoot string) (float64, error) {
	path := filepath.Join(procRoot, "uptime")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s is empty", path)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

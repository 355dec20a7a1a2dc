// Package kernel is ctrperf's one door to the kernel's file systems: the
// roots of /proc, /sys and the cgroup mount chosen once, the cgroup layout
// (v1, v2 or hybrid) detected once, readers that parse from an io.Reader
// (tested on fixtures), and stateless writers that take a directory and a
// file name and say both, and the value, when they fail (as
// opencontainers/cgroups' WriteFile does).
package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Roots are the mount points of the kernel's file systems.
type Roots struct {
	Proc   string // /proc
	Sys    string // /sys
	Cgroup string // /sys/fs/cgroup
}

// Where the kernel's file systems are mounted on a real machine. Only
// defaults are made of these: logic takes a root.
const (
	ProcMount   = "/proc"
	SysMount    = "/sys"
	CgroupMount = "/sys/fs/cgroup"
)

// DefaultRoots are the real ones.
func DefaultRoots() Roots {
	return Roots{Proc: ProcMount, Sys: SysMount, Cgroup: CgroupMount}
}

// ClassNetDir is where sysfs lists the network interfaces under sysRoot
// (<sys>/class/net).
func ClassNetDir(sysRoot string) string { return filepath.Join(sysRoot, "class", "net") }

// LinkExists says whether the network interface name exists under sysRoot.
func LinkExists(sysRoot, name string) bool {
	_, err := os.Stat(filepath.Join(ClassNetDir(sysRoot), name))
	return err == nil
}

// SelfMountinfo is the mount table of the reading process under procRoot
// (<proc>/self/mountinfo).
func SelfMountinfo(procRoot string) string { return filepath.Join(procRoot, "self", "mountinfo") }

// SelfTaskDir lists the threads of the reading process under procRoot
// (<proc>/self/task).
func SelfTaskDir(procRoot string) string { return filepath.Join(procRoot, "self", "task") }

// WithDefaults fills empty roots with the real ones.
func (r Roots) WithDefaults() Roots {
	d := DefaultRoots()
	if r.Proc == "" {
		r.Proc = d.Proc
	}
	if r.Sys == "" {
		r.Sys = d.Sys
	}
	if r.Cgroup == "" {
		r.Cgroup = d.Cgroup
	}
	return r
}

// WriteFile writes value to dir/file, naming both and the value on failure.
// The error wraps the system's, so errors.Is(err, os.ErrNotExist) and
// syscall errnos still match.
func WriteFile(dir, file, value string) error {
	p := filepath.Join(dir, file)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("failed to write %q to %s in %s: %w", value, file, dir, unwrapPath(err))
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("failed to write %q to %s in %s: %w", value, file, dir, unwrapPath(werr, cerr))
	}
	return nil
}

// unwrapPath returns the first non-nil error, without os.PathError's own
// path (WriteFile names it already).
func unwrapPath(errs ...error) error {
	for _, e := range errs {
		if e == nil {
			continue
		}
		var pe *os.PathError
		if errors.As(e, &pe) {
			return pe.Err
		}
		return e
	}
	return nil
}

// ReadFile returns dir/file without surrounding white space.
func ReadFile(dir, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return "", fmt.Errorf("read %s in %s: %w", file, dir, unwrapPath(err))
	}
	return strings.TrimSpace(string(b)), nil
}

// ReadInt reads a whole number from dir/file.
func ReadInt(dir, file string) (int64, error) {
	s, err := ReadFile(dir, file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s in %s: %q is not a whole number", file, dir, s)
	}
	return v, nil
}

// ProcCgroups returns a process's cgroup path per v1 controller, and its
// v2 path under the key "" (from /proc/PID/cgroup).
func ProcCgroups(procRoot string, pid int) (map[string]string, error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	defer f.Close()
	return ParseProcCgroup(f)
}

// ProcCgroupPath is the one cgroup path of a process (see CgroupPath),
// from <procRoot>/<pid>/cgroup.
func ProcCgroupPath(procRoot string, pid int) (string, error) {
	paths, err := ProcCgroups(procRoot, pid)
	if err != nil {
		return "", err
	}
	p, ok := CgroupPath(paths)
	if !ok {
		return "", fmt.Errorf("cgroup of pid %d from %s: no cpu, cpuset or unified cgroup line",
			pid, filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	}
	return p, nil
}

// CgroupPath picks the one path that names a process's cgroup from its
// paths (as ParseProcCgroup returns them): the path below the cpu
// controller on v1 (the same below every controller for containers and
// ctrperf's own groups), else below cpuset, else the unified path.
func CgroupPath(paths map[string]string) (string, bool) {
	for _, k := range []string{"cpu", "cpuset", ""} {
		if p := paths[k]; p != "" {
			return p, true
		}
	}
	return "", false
}

// ParseProcCgroup parses the lines "ID:controllers:path" of /proc/PID/cgroup.
func ParseProcCgroup(r io.Reader) (map[string]string, error) {
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

// Pressure is one line ("some" or "full") of a PSI file.
type Pressure struct {
	Avg10, Avg60, Avg300 float64
	Total                time.Duration
}

// PSI is a cgroup's or the system's cpu.pressure.
type PSI struct {
	Some, Full Pressure
	HasFull    bool
}

// ParsePressure parses a PSI file (cpu.pressure, /proc/pressure/cpu).
func ParsePressure(r io.Reader) (PSI, error) {
	var p PSI
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var line Pressure
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return p, fmt.Errorf("pressure field %q: want key=value", kv)
			}
			if k == "total" {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return p, fmt.Errorf("pressure total %q: %w", v, err)
				}
				if us < 0 || us > math.MaxInt64/int64(time.Microsecond) {
					return p, fmt.Errorf("pressure total %q: out of range", v)
				}
				line.Total = time.Duration(us) * time.Microsecond
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return p, fmt.Errorf("pressure %s %q: %w", k, v, err)
			}
			if math.IsNaN(x) || x < 0 || x > 100 {
				// A share of time in percent: NaN or Inf would poison
				// every comparison the controller makes with it.
				return p, fmt.Errorf("pressure %s %q: not a percentage", k, v)
			}
			switch k {
			case "avg10":
				line.Avg10 = x
			case "avg60":
				line.Avg60 = x
			case "avg300":
				line.Avg300 = x
			}
		}
		switch f[0] {
		case "some":
			p.Some, seen = line, true
		case "full":
			p.Full, p.HasFull = line, true
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if !seen {
		return p, errors.New("no \"some\" line")
	}
	return p, nil
}

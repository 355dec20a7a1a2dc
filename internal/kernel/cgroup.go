package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Mode is how the cgroup file systems are mounted.
type Mode string

const (
	// V1: one hierarchy per controller, no usable unified mount.
	V1 Mode = "v1"
	// Hybrid: v1 controllers plus a cgroup2 mount (at <root>/unified) that
	// has no controllers of its own but gives per-cgroup pressure.
	Hybrid Mode = "hybrid"
	// V2: the unified hierarchy only.
	V2 Mode = "v2"
)

// Layout is the cgroup layout under a root, detected once.
type Layout struct {
	Root string
	Mode Mode
	// Unified is the cgroup2 mount (the root itself on V2, <root>/unified
	// on Hybrid; "" on V1).
	Unified string
	// V2Controllers are the controllers the unified hierarchy offers.
	V2Controllers map[string]bool
}

// DetectCgroups looks at root once: a v1 cpu or cpuset hierarchy directory
// means v1 (hybrid when <root>/unified is a cgroup2 mount), a
// cgroup.controllers file at the root means v2.
func DetectCgroups(root string) Layout {
	l := Layout{Root: root, V2Controllers: map[string]bool{}}
	v1 := isDir(filepath.Join(root, "cpu")) || isDir(filepath.Join(root, "cpuset")) || isDir(filepath.Join(root, "cpuacct"))
	switch {
	case !v1 && isFile(filepath.Join(root, "cgroup.controllers")):
		l.Mode, l.Unified = V2, root
	case v1 && isFile(filepath.Join(root, "unified", "cgroup.controllers")):
		l.Mode, l.Unified = Hybrid, filepath.Join(root, "unified")
	default:
		l.Mode = V1
	}
	if l.Unified != "" {
		if b, err := os.ReadFile(filepath.Join(l.Unified, "cgroup.controllers")); err == nil {
			for _, c := range strings.Fields(string(b)) {
				l.V2Controllers[c] = true
			}
		}
	}
	return l
}

func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// Dir is the directory of controller ctl for a process's cgroup paths (as
// ProcCgroups returns them). On v2, or for a controller that v1 does not
// mount, it is the unified directory. ok is false when the process has no
// such cgroup.
func (l Layout) Dir(paths map[string]string, ctl string) (string, bool) {
	if l.Mode != V2 {
		if p, ok := paths[ctl]; ok && isDir(filepath.Join(l.Root, ctl)) {
			return filepath.Join(l.Root, ctl, p), true
		}
	}
	if l.Unified != "" && (l.Mode == V2 || ctl == "pressure" || l.V2Controllers[ctl]) {
		if p, ok := paths[""]; ok {
			return filepath.Join(l.Unified, p), true
		}
	}
	return "", false
}

// HasV1 says whether controller ctl has a v1 hierarchy of its own
// (<root>/<ctl>) in this layout.
func (l Layout) HasV1(ctl string) bool {
	return l.Mode != V2 && isDir(filepath.Join(l.Root, ctl))
}

// Path is the directory of the cgroup rel (a path relative to a hierarchy's
// root, such as engine.Container.CgroupPath) for controller ctl: below the
// controller's v1 hierarchy, or below the unified root on V2.
func (l Layout) Path(ctl, rel string) string {
	if l.Mode == V2 {
		return filepath.Join(l.Unified, rel)
	}
	return filepath.Join(l.Root, ctl, rel)
}

// PressureDir is where a process's cgroup keeps cpu.pressure ("" when the
// machine has no unified mount).
func (l Layout) PressureDir(paths map[string]string) string {
	if d, ok := l.Dir(paths, "pressure"); ok {
		return d
	}
	return ""
}

// CPUUsage is the cumulative CPU time of the cgroup whose cpuacct (v1) or
// unified (v2) directory is dir: cpuacct.usage, else cpu.stat usage_usec.
func CPUUsage(dir string) (time.Duration, error) {
	if ns, err := ReadInt(dir, "cpuacct.usage"); err == nil {
		return time.Duration(ns), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("read cpu usage in %s: neither cpuacct.usage nor cpu.stat: %w", dir, unwrapPath(err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 2 && fs[0] == "usage_usec" {
			us, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse cpu.stat in %s: usage_usec %q", dir, fs[1])
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("cpu.stat in %s has no usage_usec", dir)
}

// CPUPressure reads dir/cpu.pressure.
func CPUPressure(dir string) (PSI, error) {
	f, err := os.Open(filepath.Join(dir, "cpu.pressure"))
	if err != nil {
		return PSI{}, fmt.Errorf("read cpu.pressure in %s: %w", dir, unwrapPath(err))
	}
	defer f.Close()
	p, err := ParsePressure(f)
	if err != nil {
		return p, fmt.Errorf("parse cpu.pressure in %s: %w", dir, err)
	}
	return p, nil
}

// ParseCPUUsage is a cgroup's cumulative CPU time from the content of its
// usage file: cpuacct.usage (v1, nanoseconds) or cpu.stat (v2, the
// usage_usec line).
func ParseCPUUsage(file string, b []byte) (time.Duration, error) {
	if file == "cpuacct.usage" {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpuacct.usage %q is not a whole number", bytes.TrimSpace(b))
		}
		return time.Duration(ns), nil
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
			us, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu.stat: usage_usec %q", bytes.TrimSpace(v))
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("cpu.stat has no usage_usec")
}

// PressureSomeTotal is the "some" line's total of a PSI file's content,
// without the averages ParsePressure also checks (the controller's
// sampler reads only this, every interval for every container).
func PressureSomeTotal(b []byte) (time.Duration, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("some "))
		if !ok {
			continue
		}
		i := bytes.Index(rest, []byte("total="))
		if i < 0 {
			break
		}
		us, err := strconv.ParseInt(string(bytes.TrimSpace(rest[i+len("total="):])), 10, 64)
		if err != nil || us < 0 || us > math.MaxInt64/int64(time.Microsecond) {
			return 0, fmt.Errorf("pressure total %q: not a whole number of microseconds", bytes.TrimSpace(rest[i+len("total="):]))
		}
		return time.Duration(us) * time.Microsecond, nil
	}
	return 0, fmt.Errorf("pressure has no some total")
}

package load

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// CPU weight of the generator's cgroup: ten times a container's default
// (cpu.shares 1024 on cgroup v1, cpu.weight 100 on v2).
const (
	GeneratorShares = 10240
	GeneratorWeight = 1000
)

// Protection is the cgroup ProtectGenerator moved the generator into.
type Protection struct {
	Dir   string // the group's directory
	File  string // cpu.shares (v1) or cpu.weight (v2)
	Value int
}

// String is "<dir> <file>=<value>", as results.LoadStats.Protected keeps it.
func (p Protection) String() string { return fmt.Sprintf("%s %s=%d", p.Dir, p.File, p.Value) }

// ProtectGenerator moves this process, all of its threads, into a cgroup of
// its own with a high CPU weight, so that a tenant that saturates the CPUs
// cannot delay the generator and have that delay counted as its
// neighbours' latency. The group is ctrperf/generator-<pid> in the v1 cpu
// hierarchy (cpu.shares) or in the unified one (cpu.weight), where `ctrperf
// clean` finds it should the process die inside it. The returned function
// moves the process back to the group it came from and removes the new one.
//
// The weight counts only against the group's siblings under ctrperf
// (host-runtime runs). Against the containers, which sit under docker/ or
// system.slice/, what counts is the weight of the ctrperf group itself:
// the default, like their parent's, and left as it is.
func ProtectGenerator(fs kernel.FS) (Protection, func() error, error) {
	return protector{kernel: fs, pid: os.Getpid(), dirs: cgroupfs{}}.protect()
}

// groupDirs creates and removes cgroup directories. On cgroupfs the kernel
// fills a new directory with its control files and drops them again on
// rmdir; a fixture tree needs a fake that does the same.
type groupDirs interface {
	Mkdir(dir string) error
	Rmdir(dir string) error
}

// cgroupfs is the kernel's groupDirs.
type cgroupfs struct{}

var _ groupDirs = cgroupfs{}

func (cgroupfs) Mkdir(dir string) error { return os.Mkdir(dir, 0o755) }

// Rmdir retries while the group is busy: the kernel needs a moment after
// the last task left.
func (cgroupfs) Rmdir(dir string) error {
	for i := 0; ; i++ {
		err := unix.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EBUSY) || i == 49:
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type protector struct {
	kernel kernel.FS
	pid    int
	dirs   groupDirs
}

// cpuHierarchy is where the cpu controller is mounted under a cgroup root.
type cpuHierarchy struct {
	top   string // the hierarchy's root directory: <root>/cpu (v1) or <root> (v2)
	v2    bool
	file  string // the weight file
	value int
}

// cpuHierarchyOf finds the cpu controller in the layout the kernel FS
// detected: a v1 hierarchy at <root>/cpu with cpu.shares (alone, or on a
// hybrid machine next to a unified mount without controllers), else the
// unified hierarchy at <root> if it offers cpu.
func cpuHierarchyOf(l kernel.Layout) (cpuHierarchy, error) {
	root := l.Root
	if l.HasV1("cpu") {
		v1 := l.Path("cpu", "")
		if _, err := os.Stat(filepath.Join(v1, "cpu.shares")); err == nil {
			return cpuHierarchy{top: v1, file: "cpu.shares", value: GeneratorShares}, nil
		}
	}
	if l.Mode != kernel.V2 {
		return cpuHierarchy{}, fmt.Errorf("no cpu controller under %s: neither a v1 hierarchy (cpu/cpu.shares) nor cgroup v2 (cgroup.controllers)", root)
	}
	if !l.V2Controllers["cpu"] {
		offered, _ := kernel.ReadFile(root, "cgroup.controllers")
		return cpuHierarchy{}, fmt.Errorf("cgroup v2 at %s does not offer the cpu controller (cgroup.controllers: %q)", root, offered)
	}
	return cpuHierarchy{top: root, v2: true, file: "cpu.weight", value: GeneratorWeight}, nil
}

func (p protector) protect() (Protection, func() error, error) {
	h, err := cpuHierarchyOf(p.kernel.Cgroups())
	if err != nil {
		return Protection{}, nil, err
	}
	// A read-only cgroup mount (a container without privileges) fails
	// here rather than half-way.
	if err := unix.Access(h.top, unix.W_OK); err != nil {
		return Protection{}, nil, fmt.Errorf("cgroup hierarchy %s is not writable: %w", h.top, err)
	}
	cur, err := kernel.ProcCgroupPath(p.kernel.Proc(), p.pid)
	if err != nil {
		return Protection{}, nil, fmt.Errorf("find the generator's cgroup: %w", err)
	}
	name := engine.GeneratorCgroupPrefix + strconv.Itoa(p.pid)
	if cur == "/"+filepath.Join(engine.NamePrefix, name) {
		return Protection{}, nil, fmt.Errorf("the generator is already in its own cgroup %s", cur)
	}
	from := filepath.Join(h.top, cur)
	if st, err := os.Stat(from); err != nil || !st.IsDir() {
		return Protection{}, nil, fmt.Errorf("the generator's cgroup %s (from %s) is not a directory of the cpu hierarchy", from, p.kernel.Proc(strconv.Itoa(p.pid), "cgroup"))
	}
	parent := filepath.Join(h.top, engine.NamePrefix)
	if h.v2 {
		// Children get cpu.weight only when their parent delegates the
		// controller, level by level (as the host runtime does).
		if err := kernel.WriteFile(h.top, "cgroup.subtree_control", "+cpu"); err != nil {
			return Protection{}, nil, err
		}
	}
	if err := p.dirs.Mkdir(parent); err != nil && !errors.Is(err, os.ErrExist) {
		return Protection{}, nil, fmt.Errorf("create cgroup %s: %w", parent, err)
	}
	if h.v2 {
		if err := kernel.WriteFile(parent, "cgroup.subtree_control", "+cpu"); err != nil {
			return Protection{}, nil, err
		}
	}
	dir := filepath.Join(parent, name)
	if err := p.dirs.Mkdir(dir); err != nil && !errors.Is(err, os.ErrExist) {
		return Protection{}, nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	pid := strconv.Itoa(p.pid)
	for _, w := range []struct{ file, value string }{{h.file, strconv.Itoa(h.value)}, {"cgroup.procs", pid}} {
		if err := kernel.WriteFile(dir, w.file, w.value); err != nil {
			if rmErr := p.dirs.Rmdir(dir); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("remove cgroup %s: %w", dir, rmErr))
			}
			return Protection{}, nil, err
		}
	}
	restore := func() error {
		// cgroup.procs moves every thread of the process, as on the way in.
		if err := kernel.WriteFile(from, "cgroup.procs", pid); err != nil {
			return fmt.Errorf("move the generator back: %w", err)
		}
		if err := p.dirs.Rmdir(dir); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		return nil
	}
	return Protection{Dir: dir, File: h.file, Value: h.value}, restore, nil
}

package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// FS is the kernel as one value, as prometheus/procfs' FS is /proc: the
// roots of /proc, /sys and the cgroup mount chosen once, the cgroup layout
// detected once, and one walker over the processes. Whoever needs the
// kernel is handed an FS; tests build one over a fixture root.
//
// An FS is a small value, cheap to copy; copies made from one NewFS share
// the detected layout. The zero FS reads the real mounts.
type FS struct {
	roots   Roots
	cgroups *cgroupsOnce // nil on the zero FS
}

// cgroupsOnce is the layout, detected on first use.
type cgroupsOnce struct {
	once   sync.Once
	layout Layout
}

// NewFS is the kernel under roots; an empty root is the real mount.
func NewFS(roots Roots) FS {
	return FS{roots: roots.WithDefaults(), cgroups: &cgroupsOnce{}}
}

// DefaultFS is the real kernel.
func DefaultFS() FS { return NewFS(Roots{}) }

// Roots are the mount points f reads.
func (f FS) Roots() Roots { return f.roots.WithDefaults() }

// Proc is the path of elem below the proc root (the root itself without elem).
func (f FS) Proc(elem ...string) string { return join(f.Roots().Proc, elem) }

// Sys is the path of elem below the sys root.
func (f FS) Sys(elem ...string) string { return join(f.Roots().Sys, elem) }

// Cgroup is the path of elem below the cgroup root.
func (f FS) Cgroup(elem ...string) string { return join(f.Roots().Cgroup, elem) }

func join(root string, elem []string) string {
	return filepath.Join(append([]string{root}, elem...)...)
}

// Cgroups is the cgroup layout under the cgroup root, detected on the
// first call (on every call of the zero FS).
func (f FS) Cgroups() Layout {
	if f.cgroups == nil {
		return DetectCgroups(f.Cgroup())
	}
	f.cgroups.once.Do(func() { f.cgroups.layout = DetectCgroups(f.Cgroup()) })
	return f.cgroups.layout
}

// PIDs lists the processes under the proc root (its numeric entries), in
// the directory's order. It is the one walk over the processes: callers
// pick theirs by reading each one's files (Cmdline, Comm, ProcAlive).
func (f FS) PIDs() ([]int, error) {
	ents, err := os.ReadDir(f.Proc())
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Cmdline is a process's argv (<proc>/<pid>/cmdline, split at its NULs);
// one empty argument for a kernel thread or a zombie.
func (f FS) Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(f.Proc(strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

// Comm is a process's command name (<proc>/<pid>/comm).
func (f FS) Comm(pid int) (string, error) {
	b, err := os.ReadFile(f.Proc(strconv.Itoa(pid), "comm"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

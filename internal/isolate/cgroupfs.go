package isolate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

// CPUClass is a container's CPU scheduling class as its cgroup states it:
// cpu.idle (1 = an idle-class group, preempted at once by any normal task)
// and its weight (v1 cpu.shares or v2 cpu.weight).
type CPUClass struct {
	// Idle is cpu.idle, or -1 when the kernel has none (before 5.15).
	Idle int `json:"idle"`
	// Weight is the value of WeightFile.
	Weight     int64  `json:"weight"`
	WeightFile string `json:"weight_file"` // cpu.shares or cpu.weight
}

// The lowest weights, the fallback demotion without cpu.idle.
const (
	minShares = 2 // cgroup v1 cpu.shares
	minWeight = 1 // cgroup v2 cpu.weight
)

func (c CPUClass) String() string {
	if c.Idle < 0 {
		return fmt.Sprintf("%s=%d", c.WeightFile, c.Weight)
	}
	return fmt.Sprintf("idle=%d %s=%d", c.Idle, c.WeightFile, c.Weight)
}

// Demoted is the class a demotion writes: cpu.idle=1 where the kernel has
// it, else (or with weight) the lowest weight.
func (c CPUClass) Demoted(weight bool) CPUClass {
	d := c
	if c.Idle >= 0 && !weight {
		d.Idle = 1
		return d
	}
	d.Weight = minShares
	if c.WeightFile == "cpu.weight" {
		d.Weight = minWeight
	}
	return d
}

// IsDemoted says whether c already is a demoted class: an idle group
// (below any weight), or, where the kernel has no cpu.idle or with
// weight, the lowest weight.
func (c CPUClass) IsDemoted(weight bool) bool {
	if c.Idle == 1 {
		return true
	}
	if c.Idle >= 0 && !weight {
		return false
	}
	return c.Weight == c.Demoted(true).Weight
}

// Same says whether c and o are the same class as the kernel applies it:
// an idle group's weight is the kernel's own (it refuses a write to it),
// so two idle classes are the same whatever their weights.
func (c CPUClass) Same(o CPUClass) bool {
	if c.Idle >= 0 && o.Idle >= 0 {
		if c.Idle != o.Idle {
			return false
		}
		if c.Idle == 1 {
			return true
		}
	}
	return c.Weight == o.Weight
}

// Demoter reads and writes a container's CPU class.
type Demoter interface {
	Class(ctx context.Context, id string) (CPUClass, error)
	SetClass(ctx context.Context, id string, c CPUClass) error
}

// StallReader returns how long a container's tasks have waited for a CPU
// in total (cgroup v2 cpu.pressure "some").
type StallReader interface {
	Stall(ctx context.Context, m Managed) (time.Duration, error)
}

// DirResolver maps a container to its cgroup directory for one controller
// ("cpu", "cpuset", "cpuacct", or "pressure" for the unified directory that
// holds cpu.pressure).
type DirResolver interface {
	Dir(ctx context.Context, id, controller string) (string, error)
}

// CgroupFS reads and writes containers' cgroup files: cpuset.cpus, the CPU
// class, usage and pressure. It holds no state: every call resolves the
// directory and names it, the file and the value in its errors.
type CgroupFS struct {
	Layout kernel.Layout
	Dirs   DirResolver
	// Files, when set, keeps the usage and pressure files of each
	// container open between samples (the controller's; nil: every read
	// opens its file).
	Files *StatFiles
}

// StatFiles keeps the files a step reads of each container open, so that
// a sample is one pread per file: open, fstat, read and close of two files
// per container ten times a second were most of an idle controller's
// cost. A read that fails drops the file (a container restarted under the
// same id has a new cgroup; a removed cgroup's open file says ENODEV).
//
// One pread, not os.File.ReadAt: a cgroup file is made whole when it is
// read from its start, so a read that leaves the buffer short holds all of
// it, and ReadAt's second pread, to meet the end of the file, was a
// system call more per file per step (800 a second with 20 containers).
// The descriptors are raw (no os.File): nothing here needs the runtime's
// poller or ReadAt's loop.
type StatFiles struct {
	mu    sync.Mutex
	files map[string]map[string]*statFile // container id -> file name -> file
	buf   [4096]byte
	// pread is unix.Pread; a test counts the reads through it.
	pread func(fd int, p []byte, offset int64) (int, error)
}

type statFile struct {
	fd   int
	path string
}

// read preads the file name in dir (a file of container id) from its
// start and parses what it holds.
func (s *StatFiles) read(id, dir, name string, parse func(name string, b []byte) (time.Duration, error)) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id][name]
	if f == nil {
		path := filepath.Join(dir, name)
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, &os.PathError{Op: "open", Path: path, Err: err}
		}
		if s.files == nil {
			s.files = map[string]map[string]*statFile{}
		}
		if s.files[id] == nil {
			s.files[id] = map[string]*statFile{}
		}
		f = &statFile{fd: fd, path: path}
		s.files[id][name] = f
	}
	pread := s.pread
	if pread == nil {
		pread = unix.Pread
	}
	n, err := pread(f.fd, s.buf[:], 0)
	for err == unix.EINTR {
		n, err = pread(f.fd, s.buf[:], 0)
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		_ = unix.Close(f.fd)
		delete(s.files[id], name)
		return 0, fmt.Errorf("read %s: %w", f.path, &os.PathError{Op: "pread", Path: f.path, Err: err})
	}
	v, err := parse(name, s.buf[:n])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.path, err)
	}
	return v, nil
}

// Forget closes a gone container's files.
func (s *StatFiles) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files[id] {
		_ = unix.Close(f.fd)
	}
	delete(s.files, id)
}

// Close closes every file.
func (s *StatFiles) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fs := range s.files {
		for _, f := range fs {
			_ = unix.Close(f.fd)
		}
	}
	s.files = nil
	return nil
}

var (
	_ CPUSetter   = CgroupFS{}
	_ Demoter     = CgroupFS{}
	_ UsageReader = CgroupFS{}
	_ StallReader = CgroupFS{}
)

// CPUs returns the container's current cpuset.cpus.
func (c CgroupFS) CPUs(ctx context.Context, id string) (string, error) {
	dir, err := c.Dirs.Dir(ctx, id, "cpuset")
	if err != nil {
		return "", err
	}
	return kernel.ReadFile(dir, "cpuset.cpus")
}

// SetCPUs writes cpuset.cpus, refusing an empty set.
func (c CgroupFS) SetCPUs(ctx context.Context, id string, cpus cpuset.CPUSet) error {
	if cpus.IsEmpty() {
		return fmt.Errorf("container %s: refusing an empty cpuset", id)
	}
	dir, err := c.Dirs.Dir(ctx, id, "cpuset")
	if err != nil {
		return err
	}
	return kernel.WriteFile(dir, "cpuset.cpus", cpus.String())
}

func (c CgroupFS) weightFile() string {
	if c.Layout.Mode == kernel.V2 {
		return "cpu.weight"
	}
	return "cpu.shares"
}

// Class reads cpu.idle (absent: -1) and the weight.
func (c CgroupFS) Class(ctx context.Context, id string) (CPUClass, error) {
	dir, err := c.Dirs.Dir(ctx, id, "cpu")
	if err != nil {
		return CPUClass{}, err
	}
	cl := CPUClass{Idle: -1, WeightFile: c.weightFile()}
	if v, err := kernel.ReadInt(dir, "cpu.idle"); err == nil {
		cl.Idle = int(v)
	} else if !errors.Is(err, os.ErrNotExist) {
		return cl, err
	}
	if cl.Weight, err = kernel.ReadInt(dir, cl.WeightFile); err != nil {
		return cl, err
	}
	return cl, nil
}

// SetClass writes a class: cpu.idle first, then the weight unless the
// group is idle (an idle group refuses a weight, and on v1 leaving the
// idle class resets cpu.shares to 1024, so the weight must come after).
func (c CgroupFS) SetClass(ctx context.Context, id string, cl CPUClass) error {
	dir, err := c.Dirs.Dir(ctx, id, "cpu")
	if err != nil {
		return err
	}
	if cl.Idle >= 0 {
		if err := kernel.WriteFile(dir, "cpu.idle", strconv.Itoa(cl.Idle)); err != nil {
			return err
		}
		if cl.Idle == 1 {
			return nil
		}
	}
	file := cl.WeightFile
	if file == "" {
		file = c.weightFile()
	}
	return kernel.WriteFile(dir, file, strconv.FormatInt(cl.Weight, 10))
}

// CPUTime implements UsageReader.
func (c CgroupFS) CPUTime(ctx context.Context, m Managed) (time.Duration, error) {
	dir, err := c.Dirs.Dir(ctx, m.ID, "cpuacct")
	if err != nil {
		return 0, err
	}
	if c.Files == nil {
		return kernel.CPUUsage(dir)
	}
	file := "cpuacct.usage"
	if c.Layout.Mode == kernel.V2 {
		file = "cpu.stat"
	}
	return c.Files.read(m.ID, dir, file, kernel.ParseCPUUsage)
}

// Stall implements StallReader.
func (c CgroupFS) Stall(ctx context.Context, m Managed) (time.Duration, error) {
	dir, err := c.Dirs.Dir(ctx, m.ID, "pressure")
	if err != nil {
		return 0, err
	}
	if c.Files != nil {
		return c.Files.read(m.ID, dir, "cpu.pressure", pressureSomeTotal)
	}
	p, err := kernel.CPUPressure(dir)
	if err != nil {
		return 0, err
	}
	return p.Some.Total, nil
}

func pressureSomeTotal(_ string, b []byte) (time.Duration, error) { return kernel.PressureSomeTotal(b) }

// ContainerCgroup reports whether a cgroup path belongs to the container id
// (cgroupfs driver: /docker/<id>; systemd driver: .../docker-<id>.scope).
func ContainerCgroup(path, id string) bool {
	return path != "/" && path != "" && id != "" && strings.Contains(path, id)
}

// forgetFiles closes a gone container's open files (the sampler's forget).
func (c CgroupFS) forgetFiles(id string) {
	if c.Files != nil {
		c.Files.Forget(id)
	}
}

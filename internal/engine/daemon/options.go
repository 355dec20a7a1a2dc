// Package daemon finds and starts Docker engines for ctrperf: the engine the
// user already runs (DOCKER_HOST or the default socket), or a private dockerd
// of ctrperf's own with daemon-level knobs (storage driver, a data root on a
// loop-mounted image file, userland proxy on or off).
//
// A private engine gets its own socket, exec-root, pidfile, config file and
// bridge, so several run side by side with the user's engine, which ctrperf
// never reconfigures. Everything it creates is named with "ctrperf" and the
// run id, and recorded in a state file under /run/ctrperf/engines/<name>/
// before it is created, so CleanAll can remove it after any kind of exit,
// including SIGKILL of ctrperf or of the dockerd itself.
package daemon

import (
	"os/exec"
	"path/filepath"
	"time"

	"ctrperf/internal/kernel"
)

// Options are the roots and knobs shared by every entry point. Tests point
// the roots at temporary directories; production uses the defaults.
type Options struct {
	RunDir   string                       // volatile state: sockets, pidfiles, exec-roots, state files
	LibDir   string                       // persistent data: data roots, loop images, mount points
	Kernel   kernel.FS                    // /proc, /sys and the cgroup mount
	DevRoot  string                       // /dev
	LookPath func(string) (string, error) // finds tools; exec.LookPath
	Dockerd  string                       // dockerd binary; "" = look it up in PATH
	LoopSize int64                        // size of a sparse loop image file in bytes
	Ready    time.Duration                // how long a starting dockerd may take to answer
	StopWait time.Duration                // how long a dockerd may take to exit after SIGTERM
}

// Option changes Options.
type Option func(*Options)

// WithRunDir sets the volatile state directory (default /run/ctrperf).
func WithRunDir(dir string) Option { return func(o *Options) { o.RunDir = dir } }

// WithLibDir sets the persistent data directory (default /var/lib/ctrperf).
func WithLibDir(dir string) Option { return func(o *Options) { o.LibDir = dir } }

// WithKernel sets where the kernel's file systems are read from (default
// the real ones).
func WithKernel(fs kernel.FS) Option { return func(o *Options) { o.Kernel = fs } }

// WithDevRoot sets where /dev is looked at (for /dev/loop-control).
func WithDevRoot(dir string) Option { return func(o *Options) { o.DevRoot = dir } }

// WithLookPath replaces exec.LookPath for finding tools.
func WithLookPath(f func(string) (string, error)) Option { return func(o *Options) { o.LookPath = f } }

// WithDockerd sets the dockerd binary instead of looking it up in PATH.
func WithDockerd(path string) Option { return func(o *Options) { o.Dockerd = path } }

// WithLoopSize sets the size of sparse loop image files.
func WithLoopSize(bytes int64) Option { return func(o *Options) { o.LoopSize = bytes } }

// WithReadyTimeout sets how long a starting dockerd may take to answer.
func WithReadyTimeout(d time.Duration) Option { return func(o *Options) { o.Ready = d } }

func buildOptions(opts []Option) Options {
	o := Options{
		RunDir:   "/run/ctrperf",
		LibDir:   "/var/lib/ctrperf",
		Kernel:   kernel.DefaultFS(),
		DevRoot:  "/dev",
		LookPath: exec.LookPath,
		// Sparse: only what the engine writes takes disk space.
		LoopSize: 20 << 30,
		Ready:    90 * time.Second,
		StopWait: 20 * time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// linkExists says whether a network interface exists under the sys root.
func (o Options) linkExists(name string) bool { return kernel.LinkExists(o.Kernel.Sys(), name) }

func (o Options) enginesDir() string  { return filepath.Join(o.RunDir, "engines") }
func (o Options) loopDir() string     { return filepath.Join(o.LibDir, "loop") }
func (o Options) mntDir() string      { return filepath.Join(o.LibDir, "mnt") }
func (o Options) dataRootDir() string { return filepath.Join(o.LibDir, "engines") }

// execRootDir is short on purpose: dockerd puts containerd's sockets below
// the exec-root, and a unix socket path may not exceed 107 bytes.
func (o Options) execRootDir() string { return filepath.Join(o.RunDir, "x") }

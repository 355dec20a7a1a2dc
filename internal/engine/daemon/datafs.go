package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ctrperf/internal/engine"
	"ctrperf/internal/fsutil"
	"ctrperf/internal/kernel"
)

// A data filesystem is a run's own filesystem for its services' data (the
// plan's `filesystem` knob): a sparse image file made with mkfs.<type>,
// attached to a loop device and mounted with the plan's options. It is
// named ctrperf-fs-<run>, recorded in a state file under
// /run/ctrperf/datafs before anything is created, and belongs to the run id,
// whose owner record (internal/owner) says whether it is still in use; the
// image and mount point sit in the same loop and mnt directories as the
// private engines' data roots, so the orphan sweep of CleanEngines sees
// them, and CleanDataFS removes those of dead runs.

// DataFS is one mounted data filesystem.
type DataFS struct {
	Name    string    `json:"name"`
	RunID   string    `json:"run_id"`
	FS      string    `json:"fs"`
	Options []string  `json:"options,omitempty"`
	Size    int64     `json:"size"`
	Image   string    `json:"image"`
	Device  string    `json:"device,omitempty"`
	Mount   string    `json:"mount"`
	Created time.Time `json:"created"`
	// Applied is what the kernel shows for the mount once mounted
	// (mountinfo's mount options, then the filesystem's): what was run.
	Applied []string `json:"applied,omitempty"`
}

// ErrDataFSUnsupported marks a data filesystem this machine cannot make or
// mount as asked: a missing mkfs tool, no loop devices, or a mount option
// the kernel refuses. A run asking for it cannot run here at all.
var ErrDataFSUnsupported = errors.New("data filesystem not supported here")

// DataFSName is the name of a run's data filesystem.
func DataFSName(runID string) string { return engine.NamePrefix + "-fs-" + runTag(runID) }

func (o Options) dataFSDir() string { return filepath.Join(o.RunDir, "datafs") }

func dataFSStatePath(o Options, name string) string {
	return filepath.Join(o.dataFSDir(), name+".json")
}

func writeDataFS(o Options, f *DataFS) error {
	if err := os.MkdirAll(o.dataFSDir(), 0o700); err != nil {
		return fmt.Errorf("create data filesystem state dir: %w", err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(dataFSStatePath(o, f.Name), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write state of data filesystem %s: %w", f.Name, err)
	}
	return nil
}

// ListDataFS reads every data filesystem state.
func ListDataFS(opts ...Option) ([]DataFS, error) {
	return listDataFS(buildOptions(opts))
}

func listDataFS(o Options) ([]DataFS, error) {
	ents, err := os.ReadDir(o.dataFSDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list data filesystems in %s: %w", o.dataFSDir(), err)
	}
	var out []DataFS
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(o.dataFSDir(), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("read data filesystem state: %w", err))
			continue
		}
		var f DataFS
		if err := json.Unmarshal(b, &f); err != nil || f.Name == "" {
			errs = append(errs, fmt.Errorf("parse data filesystem state %s: %v", p, err))
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// mountFlags are the options the VFS takes as mount(2) flags, as mount(8)
// turns them into flags; every other option goes to the filesystem.
var mountFlags = map[string]uintptr{
	"noatime":     unix.MS_NOATIME,
	"nodiratime":  unix.MS_NODIRATIME,
	"relatime":    unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME,
	"lazytime":    unix.MS_LAZYTIME,
	"sync":        unix.MS_SYNCHRONOUS,
	"dirsync":     unix.MS_DIRSYNC,
	"nosuid":      unix.MS_NOSUID,
	"nodev":       unix.MS_NODEV,
	"noexec":      unix.MS_NOEXEC,
}

// safeMountFlags are on every data filesystem, whatever the plan asks: a
// setuid program or device node that root in a container leaves there
// works for no one. A plan's options may add flags, never clear these.
const safeMountFlags = unix.MS_NOSUID | unix.MS_NODEV

// unsafeMountOptions are the options that would clear safeMountFlags.
var unsafeMountOptions = []string{"suid", "dev"}

// MountArgs renders options for mount(2): the flags, always with nosuid
// and nodev, and the filesystem's data string
// ("data=writeback,discard,barrier=0").
func MountArgs(options []string) (flags uintptr, data string) {
	flags = safeMountFlags
	var rest []string
	for _, o := range options {
		if f, ok := mountFlags[o]; ok {
			flags |= f
			continue
		}
		rest = append(rest, o)
	}
	return flags, strings.Join(rest, ",")
}

// MountDataFS makes, attaches and mounts run runID's data filesystem. On
// error everything it created is removed again; an error wrapping
// ErrDataFSUnsupported says the machine cannot do what was asked.
func MountDataFS(ctx context.Context, runID, fsType string, options []string, size int64, opts ...Option) (f *DataFS, err error) {
	o := buildOptions(opts)
	name := DataFSName(runID)
	f = &DataFS{Name: name, RunID: runID, FS: fsType, Options: options, Size: size,
		Image: filepath.Join(o.loopDir(), name+".img"), Mount: filepath.Join(o.mntDir(), name), Created: time.Now().UTC()}
	for _, opt := range options {
		if slices.Contains(unsafeMountOptions, opt) {
			return nil, fmt.Errorf("data filesystem %s: mount option %q would allow setuid programs or devices there; ctrperf always mounts it nosuid,nodev", name, opt)
		}
	}
	if _, err := os.Stat(dataFSStatePath(o, name)); err == nil {
		return nil, fmt.Errorf("data filesystem %s already exists (run id in use); run `ctrperf clean --run %s`", name, runID)
	}
	if _, err := o.LookPath("mkfs." + fsType); err != nil {
		return nil, fmt.Errorf("%w: mkfs.%s not found (install Debian package %s): %v", ErrDataFSUnsupported, fsType, mkfsPackage[fsType], err)
	}
	if _, err := o.LookPath("losetup"); err != nil {
		return nil, fmt.Errorf("%w: losetup not found: %v", ErrDataFSUnsupported, err)
	}
	if err := writeDataFS(o, f); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if rerr := removeDataFS(context.WithoutCancel(ctx), o, f); rerr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, rerr)
			}
			f = nil
		}
	}()
	st := &State{Name: name, Loop: &LoopState{FS: fsType, Image: f.Image, Mount: f.Mount}}
	if err := makeLoopImage(ctx, st.Loop, size, dataMkfsArgs(fsType, f.Image)); err != nil {
		return f, err
	}
	dev, err := runTool(ctx, "losetup", "--find", "--show", f.Image)
	if err != nil {
		return f, fmt.Errorf("attach loop device for %s: %w", name, err)
	}
	f.Device = dev
	if err := writeDataFS(o, f); err != nil {
		return f, err
	}
	if err := os.MkdirAll(f.Mount, 0o700); err != nil {
		return f, fmt.Errorf("create mount point %s: %w", f.Mount, err)
	}
	flags, data := MountArgs(options)
	if err := unix.Mount(dev, f.Mount, fsType, flags, data); err != nil {
		if errors.Is(err, unix.EINVAL) && len(options) > 0 {
			return f, fmt.Errorf("%w: %s", ErrDataFSUnsupported, refusedOptions(dev, f.Mount, fsType, options, err))
		}
		return f, fmt.Errorf("mount %s (%s on %s) at %s with %q: %w", dev, fsType, f.Image, f.Mount, strings.Join(options, ","), err)
	}
	// The services' directories below it are as open as their users need
	// (the engine's data directories); what leads to them is closed to
	// every other local user.
	if err := os.Chmod(f.Mount, 0o700); err != nil {
		return f, fmt.Errorf("close %s to other users: %w", f.Mount, err)
	}
	if mnts, err := kernel.Mounts(o.Kernel.Proc()); err == nil {
		for _, m := range mnts {
			if m.Point == f.Mount {
				f.Applied = append(append([]string{}, m.Options...), m.SuperOptions...)
			}
		}
	}
	if err := writeDataFS(o, f); err != nil {
		return f, err
	}
	return f, nil
}

// dataMkfsArgs is mkfsArgs without ext4's lazy initialisation: the kernel
// thread that zeroes inode tables after mount would write during the
// measurement.
func dataMkfsArgs(fs, image string) []string {
	if fs == "ext4" {
		return []string{"mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image}
	}
	return mkfsArgs(fs, image)
}

// makeLoopImage creates the sparse image and makes the filesystem on it
// with mkfs.
func makeLoopImage(ctx context.Context, l *LoopState, size int64, mkfs []string) error {
	if err := os.MkdirAll(filepath.Dir(l.Image), 0o700); err != nil {
		return fmt.Errorf("create loop image dir: %w", err)
	}
	img, err := os.OpenFile(l.Image, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create loop image %s: %w", l.Image, err)
	}
	err = img.Truncate(size)
	img.Close()
	if err != nil {
		return fmt.Errorf("size loop image %s to %d bytes: %w", l.Image, size, err)
	}
	if _, err := runTool(ctx, mkfs...); err != nil {
		return fmt.Errorf("make %s on loop image: %w", l.FS, err)
	}
	return nil
}

// refusedOptions names the options the kernel refuses, found by mounting
// with each alone (a mount without options first, to tell a refused
// option from a filesystem the kernel cannot mount at all).
func refusedOptions(dev, point, fsType string, options []string, err error) string {
	if e := unix.Mount(dev, point, fsType, 0, ""); e != nil {
		return fmt.Sprintf("the kernel cannot mount %s here: %v", fsType, e)
	}
	_ = unix.Unmount(point, 0)
	var bad []string
	for _, o := range options {
		flags, data := MountArgs([]string{o})
		if e := unix.Mount(dev, point, fsType, flags, data); e != nil {
			bad = append(bad, o)
			continue
		}
		_ = unix.Unmount(point, 0)
	}
	release := kernelRelease()
	if len(bad) == 0 {
		return fmt.Sprintf("the kernel (%s) refuses the mount options %q together: %v", release, strings.Join(options, ","), err)
	}
	return fmt.Sprintf("the kernel (%s) refuses mount option %s on %s: %v", release, strings.Join(bad, ", "), fsType, err)
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown release"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}

// RemoveDataFS unmounts and removes a data filesystem: mount, loop device,
// image, state. Safe to repeat.
func RemoveDataFS(ctx context.Context, f *DataFS, opts ...Option) error {
	return removeDataFS(ctx, buildOptions(opts), f)
}

func removeDataFS(ctx context.Context, o Options, f *DataFS) error {
	var errs []error
	if mnts, err := kernel.Mounts(o.Kernel.Proc()); err == nil {
		for _, p := range kernel.MountsUnder(mnts, f.Mount) {
			if err := unmountPatiently(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		errs = append(errs, err)
	}
	for dev := range loopDevicesOf(o.Kernel, f.Image) {
		if _, err := detachLoop(ctx, o.Kernel, dev, f.Image); err != nil {
			errs = append(errs, err)
		}
	}
	if f.Device != "" {
		// Attached but not yet seen in /sys by the scan above: detach by
		// name, only while still attached to our image.
		if _, err := detachLoop(ctx, o.Kernel, f.Device, f.Image); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(f.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove loop image %s: %w", f.Image, err))
	}
	if err := os.Remove(f.Mount); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove mount point %s: %w", f.Mount, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove data filesystem %s: %w", f.Name, errors.Join(errs...))
	}
	if err := os.Remove(dataFSStatePath(o, f.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove state of data filesystem %s: %w", f.Name, err)
	}
	return nil
}

// unmountPatiently unmounts p, waiting a little while a container that was
// just removed still holds it busy, then detaches it lazily.
func unmountPatiently(ctx context.Context, p string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Unmount(p, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) || ctx.Err() != nil {
			if errors.Is(err, unix.EBUSY) {
				if derr := unix.Unmount(p, unix.MNT_DETACH); derr == nil {
					return nil
				}
			}
			return fmt.Errorf("unmount %s: %w", p, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CleanDataFS removes the data filesystems of run runID ("" = all) except
// those keep says to keep (a live session's). It returns what it removed.
func CleanDataFS(ctx context.Context, runID string, keep func(DataFS) bool, opts ...Option) ([]string, error) {
	o := buildOptions(opts)
	fss, err := listDataFS(o)
	errs := []error{err}
	var done []string
	for i := range fss {
		f := &fss[i]
		if runID != "" && f.RunID != runID {
			continue
		}
		if keep != nil && keep(*f) {
			continue
		}
		if err := removeDataFS(ctx, o, f); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, fmt.Sprintf("data filesystem %s (%s on %s)", f.Name, f.FS, f.Mount))
	}
	return done, errors.Join(errs...)
}

// ProbeMountOptions makes one small filesystem of type fsType and mounts it
// with each option alone, for ctrperf doctor: the kernel's answer per
// option (nil: accepted). The error is for the probe itself (no root, no
// mkfs); nothing of it is left either way.
func ProbeMountOptions(ctx context.Context, fsType string, options []string, opts ...Option) (map[string]error, error) {
	o := buildOptions(opts)
	f, err := MountDataFS(ctx, fmt.Sprintf("probe-%d-%s", os.Getpid(), fsType), fsType, nil, 512<<20, opts...)
	if err != nil {
		return nil, err
	}
	out := map[string]error{}
	var errs []error
	for _, opt := range options {
		if err := unix.Unmount(f.Mount, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount probe %s: %w", f.Mount, err))
			break
		}
		flags, data := MountArgs([]string{opt})
		if err := unix.Mount(f.Device, f.Mount, fsType, flags, data); err != nil {
			out[opt] = fmt.Errorf("the kernel (%s) refuses it: %w", kernelRelease(), err)
			continue
		}
		out[opt] = nil
	}
	if err := removeDataFS(context.WithoutCancel(ctx), o, f); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

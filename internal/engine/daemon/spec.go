package daemon

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// StorageDrivers are the drivers dockerd 20.10 knows, in the order doctor
// lists them.
var StorageDrivers = []string{"overlay2", "btrfs", "vfs", "fuse-overlayfs", "zfs", "devicemapper", "aufs", "overlay"}

// LoopFilesystems are the filesystems a loop data root can carry.
var LoopFilesystems = []string{"ext4", "xfs", "btrfs"}

// HostFacts is what the host can do for private engines. Read once by
// ReadHostFacts; every decision below is a pure function of it.
type HostFacts struct {
	Filesystems  map[string]bool   `json:"filesystems"`   // from /proc/filesystems
	Tools        map[string]string `json:"tools"`         // name -> path, "" when missing
	DeviceMapper bool              `json:"device_mapper"` // dm_mod loaded or built in
	LoopControl  bool              `json:"loop_control"`  // /dev/loop-control exists
	NativeFS     string            `json:"native_fs"`     // filesystem under the lib dir
}

// toolsWanted are the binaries private engines may need.
var toolsWanted = []string{"dockerd", "losetup", "mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "fuse-overlayfs", "iptables", "iptables-save"}

// ReadHostFacts reads the host through the roots in opts.
func ReadHostFacts(opts ...Option) (HostFacts, error) {
	o := buildOptions(opts)
	h := HostFacts{Tools: map[string]string{}}
	f, err := os.Open(o.Kernel.Proc("filesystems"))
	if err != nil {
		return h, fmt.Errorf("read supported filesystems: %w", err)
	}
	h.Filesystems, err = parseFilesystems(f)
	f.Close()
	if err != nil {
		return h, fmt.Errorf("parse %s: %w", o.Kernel.Proc("filesystems"), err)
	}
	for _, t := range toolsWanted {
		h.Tools[t], _ = o.LookPath(t)
	}
	if o.Dockerd != "" {
		h.Tools["dockerd"] = o.Dockerd
	}
	if _, err := os.Stat(o.Kernel.Sys("module", "dm_mod")); err == nil {
		h.DeviceMapper = true
	} else if f, err := os.Open(o.Kernel.Proc("devices")); err == nil {
		h.DeviceMapper = hasBlockDevice(f, "device-mapper")
		f.Close()
	}
	if _, err := os.Stat(filepath.Join(o.DevRoot, "loop-control")); err == nil {
		h.LoopControl = true
	}
	if mi, err := kernel.Mounts(o.Kernel.Proc()); err == nil {
		h.NativeFS = fsOf(mi, o.LibDir)
	}
	return h, nil
}

// parseFilesystems reads /proc/filesystems: "[nodev]\tname" per line.
func parseFilesystems(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		out[f[len(f)-1]] = true
	}
	return out, sc.Err()
}

// hasBlockDevice reports whether /proc/devices lists a block major of name.
func hasBlockDevice(r io.Reader, name string) bool {
	sc := bufio.NewScanner(r)
	block := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "Block devices:":
			block = true
		case line == "Character devices:":
			block = false
		case block:
			if f := strings.Fields(line); len(f) == 2 && f[1] == name {
				return true
			}
		}
	}
	return false
}

// dataRootFS is the filesystem a spec's data root will have, "" if unknown.
func (h HostFacts) dataRootFS(dataRoot string) string {
	if fs, ok := strings.CutPrefix(dataRoot, "loop-"); ok {
		return fs
	}
	return h.NativeFS
}

// LoopFSSupport says whether a loop image of fs can be made and mounted here.
func (h HostFacts) LoopFSSupport(fs string) error {
	if !contains(LoopFilesystems, fs) {
		return fmt.Errorf("unknown loop filesystem %q (known: %s)", fs, strings.Join(LoopFilesystems, ", "))
	}
	if !h.LoopControl {
		return errors.New("no /dev/loop-control: the kernel has no loop device support (modprobe loop)")
	}
	if h.Tools["losetup"] == "" {
		return errors.New("losetup not found: install Debian package mount")
	}
	if !h.Filesystems[fs] {
		return fmt.Errorf("kernel does not support %s (not in /proc/filesystems; modprobe %s)", fs, fs)
	}
	if h.Tools["mkfs."+fs] == "" {
		return fmt.Errorf("mkfs.%s not found: install Debian package %s", fs, mkfsPackage[fs])
	}
	return nil
}

var mkfsPackage = map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs", "btrfs": "btrfs-progs"}

// StorageDriverSupport says whether dockerd can run driver on a data root of
// filesystem fs here; nil means it can.
func (h HostFacts) StorageDriverSupport(driver, fs string) error {
	switch driver {
	case "", "vfs":
		return nil
	case "overlay2", "overlay":
		if !h.Filesystems["overlay"] {
			return fmt.Errorf("%s unavailable: kernel has no overlay filesystem (modprobe overlay); use vfs or btrfs", driver)
		}
		if fs == "overlay" {
			return fmt.Errorf("storage driver %s cannot run on a data root that is itself on overlayfs; use data_root: loop-ext4", driver)
		}
		return nil
	case "btrfs":
		if !h.Filesystems["btrfs"] {
			return errors.New("btrfs unavailable: kernel has no btrfs (modprobe btrfs)")
		}
		if fs != "btrfs" {
			return fmt.Errorf("storage driver btrfs needs data_root: loop-btrfs (a btrfs data root; this one is %s)", orUnknown(fs))
		}
		return nil
	case "zfs":
		if !h.Filesystems["zfs"] {
			return errors.New("zfs unavailable: kernel has no zfs module; use overlay2 or btrfs")
		}
		if fs != "zfs" {
			return errors.New("storage driver zfs needs its data root on a zfs dataset, which ctrperf does not create; use overlay2 or btrfs")
		}
		return nil
	case "devicemapper":
		if !h.DeviceMapper {
			return errors.New("devicemapper unavailable: kernel has no device-mapper (no dm_mod); use overlay2 or btrfs")
		}
		return nil
	case "aufs":
		if !h.Filesystems["aufs"] {
			return errors.New("aufs unavailable: kernel has no aufs; use overlay2")
		}
		return nil
	case "fuse-overlayfs":
		if h.Tools["fuse-overlayfs"] == "" {
			return errors.New("fuse-overlayfs unavailable: needs the fuse-overlayfs binary; install Debian package fuse-overlayfs")
		}
		if !h.Filesystems["fuse"] {
			return errors.New("fuse-overlayfs unavailable: kernel has no fuse (modprobe fuse)")
		}
		return nil
	}
	return fmt.Errorf("unknown storage driver %q (known: %s)", driver, strings.Join(StorageDrivers, ", "))
}

// CheckSpec validates a private engine spec against the host before anything
// is started, so a bad plan fails in a second with advice and no leftovers.
func CheckSpec(spec engine.EngineSpec, h HostFacts) error {
	switch spec.DataRoot {
	case "", "native":
	default:
		fs, ok := strings.CutPrefix(spec.DataRoot, "loop-")
		if !ok || !contains(LoopFilesystems, fs) {
			return fmt.Errorf("unknown data_root %q (known: native, loop-ext4, loop-xfs, loop-btrfs)", spec.DataRoot)
		}
		if err := h.LoopFSSupport(fs); err != nil {
			return fmt.Errorf("data_root %s: %w", spec.DataRoot, err)
		}
	}
	if err := h.StorageDriverSupport(spec.StorageDriver, h.dataRootFS(spec.DataRoot)); err != nil {
		return err
	}
	if h.Tools["dockerd"] == "" {
		return ErrNoDockerd
	}
	return nil
}

// ErrNoDockerd is CheckSpec's error when dockerd is not installed.
var ErrNoDockerd = errors.New("dockerd not found in PATH: install Debian package docker.io (apt-get install docker.io)")

// DriverSupport is one storage driver and the data roots it works on here.
type DriverSupport struct {
	Driver    string   `json:"driver"`
	DataRoots []string `json:"data_roots,omitempty"` // usable data_root values
	Reason    string   `json:"reason,omitempty"`     // why not, when none is usable
}

// Drivers lists every known storage driver with the data roots it can use on
// this host; doctor prints it and plans can be checked against it.
func (h HostFacts) Drivers() []DriverSupport {
	roots := []string{"native"}
	for _, fs := range LoopFilesystems {
		roots = append(roots, "loop-"+fs)
	}
	var out []DriverSupport
	for _, d := range StorageDrivers {
		ds := DriverSupport{Driver: d}
		var firstErr error
		for _, r := range roots {
			err := CheckSpec(engine.EngineSpec{StorageDriver: d, DataRoot: r}, h)
			if err == nil {
				ds.DataRoots = append(ds.DataRoots, r)
			} else if firstErr == nil || r == "native" {
				firstErr = err
			}
		}
		if len(ds.DataRoots) == 0 && firstErr != nil {
			ds.Reason = firstErr.Error()
		}
		out = append(out, ds)
	}
	return out
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// engineName is the private engine's name: ctrperf, the spec's key, the run id.
func engineName(spec engine.EngineSpec, runID string) string {
	n := engine.NamePrefix + "-" + spec.Key()
	if runID != "" {
		n += "-" + runTag(runID)
	}
	return n
}

// runTag is the run id as it appears in names: path-safe, and short enough
// that the engine's socket path stays under the 107-byte unix limit (a long
// id keeps its first 16 bytes and gains a hash of the whole).
func runTag(runID string) string {
	t := nameUnsafe.ReplaceAllString(runID, "_")
	if len(t) > 24 {
		t = t[:16] + "-" + shortID(runID)[:7]
	}
	return t
}

// bridgeName fits the 15-byte interface name limit and still says ctrperf.
// It hashes the engine's state dir, not just its name, so engines of the
// same name under different run dirs (tests) never share a bridge.
func bridgeName(stateDir string) string {
	s := sha256.Sum256([]byte(stateDir))
	return engine.NamePrefix + hex.EncodeToString(s[:])[:8]
}

// shortID names the exec-root: short, see Options.execRootDir.
func shortID(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])[:12]
}

// dockerdArgs is the dockerd command line for a private engine.
func dockerdArgs(st *State) []string {
	args := []string{
		"--host", "unix://" + st.Socket,
		"--exec-root", st.ExecRoot,
		"--data-root", st.DataRoot,
		"--pidfile", st.PIDFile,
		// Our own (empty) config, so the user's /etc/docker/daemon.json
		// cannot change the knobs under test.
		"--config-file", st.ConfigFile,
		"--bridge", st.Bridge,
		"--iptables=" + strconv.FormatBool(st.IPTables),
		// Off whatever dockerd's default (on since Docker 27): a starting
		// dockerd flushes the DOCKER* chains of every table it manages,
		// and the snapshot that puts the other engines' rules back
		// (rulesnapshot.go) covers IPv4 only. ctrperf publishes on IPv4.
		"--ip6tables=false",
		"--log-level", "info",
	}
	if st.Spec.StorageDriver != "" {
		args = append(args, "--storage-driver", st.Spec.StorageDriver)
	}
	if st.Spec.UserlandProxy != nil {
		args = append(args, "--userland-proxy="+strconv.FormatBool(*st.Spec.UserlandProxy))
	}
	return args
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

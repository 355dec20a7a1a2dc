package daemon

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"ctrperf/internal/engine"
	"ctrperf/internal/kernel"
)

// hostLikeThis is the machine the project runs on: ext4 root, overlay, btrfs,
// xfs, loop devices, no device-mapper.
func hostLikeThis() HostFacts {
	return HostFacts{
		Filesystems: map[string]bool{"overlay": true, "ext4": true, "xfs": true, "btrfs": true},
		Tools: map[string]string{"dockerd": "/usr/sbin/dockerd", "losetup": "/usr/sbin/losetup",
			"mkfs.ext4": "/usr/sbin/mkfs.ext4", "mkfs.xfs": "/usr/sbin/mkfs.xfs", "mkfs.btrfs": "/usr/sbin/mkfs.btrfs"},
		LoopControl: true,
		NativeFS:    "ext4",
	}
}

func boolp(b bool) *bool { return &b }

func TestCheckSpec(t *testing.T) {
	noXFS := hostLikeThis()
	noXFS.Tools["mkfs.xfs"] = ""
	noDockerd := hostLikeThis()
	noDockerd.Tools["dockerd"] = ""
	noLoop := hostLikeThis()
	noLoop.LoopControl = false
	withDM := hostLikeThis()
	withDM.DeviceMapper = true
	onOverlay := hostLikeThis()
	onOverlay.NativeFS = "overlay"

	tests := []struct {
		desc    string
		host    HostFacts
		spec    engine.EngineSpec
		wantErr string // substring; "" = valid
	}{
		{"default spec is fine", hostLikeThis(), engine.EngineSpec{}, ""},
		{"overlay2 on the native ext4 root", hostLikeThis(), engine.EngineSpec{StorageDriver: "overlay2"}, ""},
		{"vfs always works", hostLikeThis(), engine.EngineSpec{StorageDriver: "vfs", DataRoot: "native"}, ""},
		{"btrfs on loop-btrfs", hostLikeThis(), engine.EngineSpec{StorageDriver: "btrfs", DataRoot: "loop-btrfs", UserlandProxy: boolp(false)}, ""},
		{"overlay2 on loop-xfs", hostLikeThis(), engine.EngineSpec{StorageDriver: "overlay2", DataRoot: "loop-xfs"}, ""},
		{"btrfs on ext4 says which data root it needs", hostLikeThis(), engine.EngineSpec{StorageDriver: "btrfs"}, "needs data_root: loop-btrfs"},
		{"btrfs on loop-ext4 says the same", hostLikeThis(), engine.EngineSpec{StorageDriver: "btrfs", DataRoot: "loop-ext4"}, "needs data_root: loop-btrfs"},
		{"unknown driver names the known ones", hostLikeThis(), engine.EngineSpec{StorageDriver: "overlay3"}, `unknown storage driver "overlay3" (known: overlay2, btrfs`},
		{"devicemapper without dm_mod", hostLikeThis(), engine.EngineSpec{StorageDriver: "devicemapper"}, "kernel has no device-mapper (no dm_mod); use overlay2 or btrfs"},
		{"devicemapper with dm_mod", withDM, engine.EngineSpec{StorageDriver: "devicemapper"}, ""},
		{"zfs without the module", hostLikeThis(), engine.EngineSpec{StorageDriver: "zfs"}, "no zfs module"},
		{"overlay2 on an overlay root", onOverlay, engine.EngineSpec{StorageDriver: "overlay2"}, "use data_root: loop-ext4"},
		{"unknown data root", hostLikeThis(), engine.EngineSpec{DataRoot: "loop-ntfs"}, `unknown data_root "loop-ntfs"`},
		{"loop-xfs without mkfs.xfs names the package", noXFS, engine.EngineSpec{DataRoot: "loop-xfs"}, "install Debian package xfsprogs"},
		{"no loop devices", noLoop, engine.EngineSpec{DataRoot: "loop-ext4"}, "no /dev/loop-control"},
		{"no dockerd names docker.io", noDockerd, engine.EngineSpec{StorageDriver: "vfs"}, "install Debian package docker.io"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := CheckSpec(tt.spec, tt.host)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckSpec(%+v) = %v, want nil", tt.spec, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckSpec(%+v) = %v, want error containing %q", tt.spec, err, tt.wantErr)
			}
		})
	}
}

func TestDrivers(t *testing.T) {
	got := map[string]DriverSupport{}
	for _, d := range hostLikeThis().Drivers() {
		got[d.Driver] = d
	}
	tests := []struct {
		desc   string
		driver string
		roots  []string
		reason string
	}{
		{"overlay2 everywhere", "overlay2", []string{"native", "loop-ext4", "loop-xfs", "loop-btrfs"}, ""},
		{"btrfs only on its loop", "btrfs", []string{"loop-btrfs"}, ""},
		{"vfs everywhere", "vfs", []string{"native", "loop-ext4", "loop-xfs", "loop-btrfs"}, ""},
		{"devicemapper nowhere, with the reason", "devicemapper", nil, "no dm_mod"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d := got[tt.driver]
			if !reflect.DeepEqual(d.DataRoots, tt.roots) {
				t.Errorf("data roots of %s = %v, want %v", tt.driver, d.DataRoots, tt.roots)
			}
			if tt.reason == "" && d.Reason != "" || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason for %s = %q, want containing %q", tt.driver, d.Reason, tt.reason)
			}
		})
	}
}

func TestReadHostFacts(t *testing.T) {
	h, err := ReadHostFacts(WithKernel(kernel.NewFS(kernel.Roots{Proc: "testdata/proc", Sys: t.TempDir()})), WithLibDir("/var/lib/ctrperf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range []string{"overlay", "ext4", "xfs", "btrfs", "fuse"} {
		if !h.Filesystems[fs] {
			t.Errorf("filesystem %s missing from %v", fs, h.Filesystems)
		}
	}
	if h.DeviceMapper {
		t.Error("device-mapper reported, but the fixture only has a character device that looks alike")
	}
	if h.NativeFS != "ext4" {
		t.Errorf("native fs = %q, want ext4 (the root mount)", h.NativeFS)
	}
}

func TestHasBlockDevice(t *testing.T) {
	tests := []struct {
		desc  string
		input string
		want  bool
	}{
		{"block device listed", "Character devices:\n 1 mem\n\nBlock devices:\n253 device-mapper\n", true},
		{"only a character device of that name", "Character devices:\n253 device-mapper\n\nBlock devices:\n  7 loop\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := hasBlockDevice(strings.NewReader(tt.input), "device-mapper"); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDockerdArgs(t *testing.T) {
	o := buildOptions([]Option{WithRunDir("/run/ctrperf"), WithLibDir("/var/lib/ctrperf")})
	tests := []struct {
		desc    string
		spec    engine.EngineSpec
		want    []string
		notWant []string
	}{
		{"driver and proxy off", engine.EngineSpec{StorageDriver: "btrfs", DataRoot: "loop-btrfs", UserlandProxy: boolp(false)},
			[]string{"--storage-driver btrfs", "--userland-proxy=false", "--data-root /var/lib/ctrperf/mnt/ctrperf-btrfs-loop-btrfs-noproxy-r1/docker", "--iptables=true"}, nil},
		{"proxy on is explicit", engine.EngineSpec{UserlandProxy: boolp(true)}, []string{"--userland-proxy=true"}, []string{"--storage-driver"}},
		{"defaults leave dockerd's defaults", engine.EngineSpec{StorageDriver: "vfs"}, []string{"--storage-driver vfs", "--data-root /var/lib/ctrperf/engines/ctrperf-vfs-native-r1"}, []string{"--userland-proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			st := newState(o, engineName(tt.spec, "r1"), "r1", tt.spec)
			line := strings.Join(dockerdArgs(st), " ")
			for _, w := range append(tt.want, "--host unix://"+st.Socket, "--exec-root "+st.ExecRoot, "--config-file "+st.ConfigFile, "--bridge "+st.Bridge, "--pidfile "+st.PIDFile, "--ip6tables=false") {
				if !strings.Contains(line, w) {
					t.Errorf("args %q lack %q", line, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(line, w) {
					t.Errorf("args %q should not contain %q", line, w)
				}
			}
			if strings.Contains(line, "--bip") {
				t.Errorf("args %q: --bip and --bridge are mutually exclusive in dockerd", line)
			}
		})
	}
}

func TestNamesFitKernelLimits(t *testing.T) {
	o := buildOptions(nil)
	long := strings.Repeat("r", 40)
	tests := []struct {
		desc  string
		spec  engine.EngineSpec
		runID string
	}{
		{"default", engine.EngineSpec{}, ""},
		{"longest key and a long run id", engine.EngineSpec{StorageDriver: "fuse-overlayfs", DataRoot: "loop-btrfs", UserlandProxy: boolp(false)}, long},
		{"run id with unsafe characters", engine.EngineSpec{StorageDriver: "vfs"}, "a/b c"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			name := engineName(tt.spec, tt.runID)
			if !strings.HasPrefix(name, "ctrperf-") || strings.ContainsAny(name, "/ ") {
				t.Errorf("engine name %q must start with ctrperf- and be path-safe", name)
			}
			if b := bridgeName(stateDir(o, name)); len(b) > 15 || !strings.HasPrefix(b, "ctrperf") {
				t.Errorf("bridge %q: must fit IFNAMSIZ (15) and say ctrperf", b)
			}
			st := newState(o, name, tt.runID, tt.spec)
			// containerd's ttrpc socket is the deepest socket dockerd makes.
			if p := st.ExecRoot + "/containerd/containerd.sock.ttrpc"; len(p) > 107 {
				t.Errorf("socket path %q is %d bytes, over the unix limit", p, len(p))
			}
			if len(st.Socket) > 107 {
				t.Errorf("engine socket %q is %d bytes, over the unix limit", st.Socket, len(st.Socket))
			}
		})
	}
	if bridgeName("/run/ctrperf/engines/ctrperf-a") == bridgeName("/run/ctrperf/engines/ctrperf-b") {
		t.Error("different engines must get different bridges")
	}
}

func TestParseFilesystems(t *testing.T) {
	f, err := os.Open("testdata/proc/filesystems")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parseFilesystems(f)
	if err != nil {
		t.Fatal(err)
	}
	if !got["overlay"] || !got["ext4"] || got["nodev"] {
		t.Errorf("parsed %v: want overlay and ext4, never the nodev marker", got)
	}
}

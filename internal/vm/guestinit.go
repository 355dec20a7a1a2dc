package vm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The guest's init: the kernel runs the initramfs's /ctrperf as PID 1
// (`rdinit=/ctrperf -- __vminit`). It loads the modules the guest needs,
// mounts the root disk, bind-mounts itself at GuestBinary there, moves
// into it, mounts what a Debian system expects (/proc, /sys, cgroup2,
// tmpfs on /run and /tmp), configures the network from the kernel's
// command line, and then serves the agent port: `ctrperf agent` with the
// port as its stdin and stdout, started again whenever a session ends (the
// host closed its end), while reaping every orphan, as a PID 1 must.

// GuestBinary is where ctrperf is in the guest.
const GuestBinary = "/usr/local/bin/ctrperf"

// AgentPort is the name of the virtio-serial port the agent serves.
const AgentPort = "ctrperf.agent"

// Kernel command line keys of the guest's network: its address with the
// prefix length, and the host's address on the tap (which dials it).
const (
	cmdlineIP   = "ctrperf.ip"
	cmdlineHost = "ctrperf.host"
	// cmdlineVirtiofs is the tag of a virtiofs share to mount at
	// GuestDataDir (disk: virtiofs).
	cmdlineVirtiofs = "ctrperf.virtiofs"
)

// GuestDataDir is where a guest with disk: virtiofs has the directory of
// this machine shared into it; the services' data directories are made
// under it (engine.DeploySpec.DataRoot).
const GuestDataDir = "/var/lib/ctrperf/virtiofs"

// ReadyLine is what init prints on the console once the agent port is
// served; a boot's log shows how long each step took before it.
const ReadyLine = "ctrperf-guest: agent port ready"

// GuestInit runs as the guest's PID 1 and never returns unless it fails.
func GuestInit() error {
	if os.Getpid() != 1 {
		return errors.New("__vminit is the init of ctrperf's VM guests (PID 1), not a command")
	}
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stdout, "ctrperf-guest: %6.2fs "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	if err := earlyMounts(); err != nil {
		return err
	}
	if err := loadModules("/modules.list", logf); err != nil {
		return err
	}
	if early, _ := os.ReadFile("/proc/cmdline"); cmdlineValue(string(early), cmdlineDocker) != "" {
		// Before the root moves: the modules are the initramfs's.
		if err := loadModules(dockerModulesList, logf); err != nil {
			return err
		}
	}
	if err := switchRoot(logf); err != nil {
		return err
	}
	if err := rootMounts(); err != nil {
		return err
	}
	_ = unix.Sethostname([]byte("ctrperf-guest"))
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if err := network(string(cmdline), logf); err != nil {
		logf("network: %v", err)
	}
	if tag := cmdlineValue(string(cmdline), cmdlineVirtiofs); tag != "" {
		if err := mountVirtiofs(tag, GuestDataDir); err != nil {
			return err
		}
		logf("virtiofs %s on %s", tag, GuestDataDir)
	}
	if wait, ok, err := dockerWanted(string(cmdline)); err != nil {
		logf("docker: %v", err)
	} else if ok {
		// The agent port opens after: its hello then finds the engine.
		// A dockerd that fails is said here, and the agent's hello says
		// that the guest has no engine.
		if err := startDockerd(guestEnv, wait); err != nil {
			logf("docker: %v", err)
		} else {
			logf("dockerd answers")
		}
	}
	port, err := findPort("/sys/class/virtio-ports", AgentPort, 30*time.Second)
	if err != nil {
		return err
	}
	logf("agent port %s", port)
	fmt.Println(ReadyLine)
	return serveAgent(port, logf)
}

func earlyMounts() error {
	for _, m := range []struct{ src, dst, fs string }{{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dst, err)
		}
	}
	return nil
}

// loadModules loads each module of list in its order; a line starting
// with "?" may fail.
func loadModules(list string, logf func(string, ...any)) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	for _, l := range strings.Fields(string(b)) {
		optional := strings.HasPrefix(l, "?")
		p := strings.TrimPrefix(l, "?")
		err := loadModule(p)
		if err != nil && !optional {
			return fmt.Errorf("load module %s: %w", p, err)
		}
		if err != nil {
			logf("module %s not loaded (optional): %v", filepath.Base(p), err)
		}
	}
	return nil
}

func loadModule(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// switchRoot mounts the root disk at /newroot, puts this binary at
// GuestBinary there, and makes it the root (the initramfs stays in memory
// beneath: the binary bound at GuestBinary is its file).
func switchRoot(logf func(string, ...any)) error {
	disk := "/dev/vda"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(disk); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no root disk %s after 30 s", disk)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := unix.Mount(disk, "/newroot", "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount %s: %w", disk, err)
	}
	logf("root disk %s mounted", disk)
	bin := "/newroot" + GuestBinary
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	if f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755); err == nil {
		f.Close()
	}
	if err := unix.Mount("/ctrperf", bin, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind ctrperf to %s: %w", bin, err)
	}
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		_ = os.MkdirAll("/newroot"+d, 0o755)
		if err := unix.Mount(d, "/newroot"+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s: %w", d, err)
		}
	}
	if err := os.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the root disk to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return os.Chdir("/")
}

func rootMounts() error {
	for _, m := range []struct{ src, dst, fs, data string }{
		{"tmpfs", "/run", "tmpfs", "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777"},
		{"devpts", "/dev/pts", "devpts", "gid=5,mode=620,ptmxmode=666"},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", ""},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID|unix.MS_NODEV, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dst, err)
		}
	}
	// Every controller for the engine's groups below the root.
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		var ctl []string
		for _, c := range strings.Fields(string(b)) {
			ctl = append(ctl, "+"+c)
		}
		_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte(strings.Join(ctl, " ")), 0o644)
	}
	return nil
}

// mountVirtiofs mounts the virtiofs share tag at dir.
func mountVirtiofs(tag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(tag, dir, "virtiofs", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount virtiofs %s on %s: %w", tag, dir, err)
	}
	return nil
}

// cmdlineValue is key's value on the kernel command line, "" without it.
func cmdlineValue(cmdline, key string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// network brings lo up and, when the command line gives the guest an
// address, the first ethernet device with it.
func network(cmdline string, logf func(string, ...any)) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	ip := cmdlineValue(cmdline, cmdlineIP)
	if ip == "" {
		return nil
	}
	pfx, err := netip.ParsePrefix(ip)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", cmdlineIP, ip, err)
	}
	var eth netlink.Link
	for range 100 {
		links, _ := netlink.LinkList()
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" {
				eth = l
				break
			}
		}
		if eth != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if eth == nil {
		return errors.New("no network device")
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), 32)}}
	if err := netlink.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, eth.Attrs().Name, err)
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return err
	}
	logf("network %s on %s", ip, eth.Attrs().Name)
	return nil
}

// findPort is the device of the virtio-serial port named name.
func findPort(class, name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		ports, _ := filepath.Glob(filepath.Join(class, "*", "name"))
		for _, p := range ports {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == name {
				return "/dev/" + filepath.Base(filepath.Dir(p)), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port %q after %s", name, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// guestEnv is the environment of init's children (the agent, dockerd).
var guestEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}

// serveAgent runs `ctrperf agent` on port, again after each session, and
// reaps every child.
func serveAgent(port string, logf func(string, ...any)) error {
	env := guestEnv
	start := func() (int, error) {
		f, err := os.OpenFile(port, os.O_RDWR, 0)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		pid, err := syscall.ForkExec(GuestBinary, []string{GuestBinary, "agent"}, &syscall.ProcAttr{
			Dir: "/", Env: env, Files: []uintptr{f.Fd(), f.Fd(), os.Stderr.Fd()},
			Sys: &syscall.SysProcAttr{Setsid: true},
		})
		return pid, err
	}
	agent, err := start()
	if err != nil {
		return fmt.Errorf("start the agent: %w", err)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				pid, ws = agent, 0 // nothing to wait for: start it again
			} else {
				return err
			}
		}
		if pid != agent {
			continue
		}
		// A session ended (or the host is not connected, and the port
		// reads end of file at once): serve the next one.
		time.Sleep(200 * time.Millisecond)
		if agent, err = start(); err != nil {
			logf("start the agent: %v", err)
			time.Sleep(time.Second)
		}
	}
}

// consoleTail is the end of a console log, for errors.
func consoleTail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(io.LimitReader(f, 4<<20))
	for sc.Scan() {
		all = append(all, sc.Text())
		if len(all) > lines {
			all = all[1:]
		}
	}
	return strings.Join(all, "\n")
}

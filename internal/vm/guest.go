package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"ctrperf/internal/fsutil"
	"ctrperf/internal/remote"
)

// Config is a guest as a plan's vm: block asks for it.
type Config struct {
	VCPUs  int
	Memory int64 // bytes
	Accel  string
	// Network is NetworkTap (the default) or NetworkUser; Disk
	// DiskVirtioBlk (the default) or DiskVirtiofs.
	Network, Disk string
	// Docker boots the GuestDocker disk and starts dockerd in the guest
	// before its agent answers.
	Docker bool
}

// Machine is what boots a guest on this machine: QEMU, the guest kernel,
// this ctrperf's binary, the base disk and where a guest's files go.
type Machine struct {
	QEMU, QEMUImg string
	// Virtiofsd is virtiofsd's path, "" where it is not installed (disk:
	// virtiofs then does not boot).
	Virtiofsd string
	Kernel    Kernel
	Self      string // ctrperf's static binary: the guest's init and agent
	// BaseDisk makes (once) and names the base disk image; DockerDisk
	// the disk of a guest with Docker (the GuestDocker rootfs), made only
	// when a guest asks for it.
	BaseDisk, DockerDisk func(ctx context.Context) (string, error)
	// Images are where the images a guest's Docker engine lacks come
	// from (this machine's engine: docker save | load on a disk attached
	// to the guest, Guest.Ship; never a pull); nil: the guest's engine
	// must have them.
	Images remote.ImageSource
	// ContainerImage is the image a guest's containers run
	// (ContainerImage by default).
	ContainerImage string
	// DockerTimeout bounds how long a guest's init waits for its dockerd
	// to answer (default 3 min: tens of seconds under emulation here).
	DockerTimeout time.Duration
	RunDir        string // RunDir by default
	DataDir       string // DataDir by default
	// RunID is the session the guests belong to (the owner records' run
	// id): clean keeps a live session's guests.
	RunID string
	// BootTimeout bounds a boot until the agent answers (default 3 min:
	// about 10 s under emulation here, a second or two under KVM; with
	// Docker, DockerTimeout more).
	BootTimeout time.Duration
	Log         io.Writer
}

// Guest is a booted guest with its agent's session.
type Guest struct {
	State
	Client *remote.Client
	cmd    *exec.Cmd
	exited chan struct{}
	// virtiofsd serves the data directory of disk: virtiofs (nil
	// without); it ends when QEMU closes its socket.
	virtiofsd       *exec.Cmd
	virtiofsdExited chan struct{}
	// forwards are the user-mode network's port forwards by run;
	// shipments the image archives shipped on disks (ship.go), ships
	// their count.
	mu        sync.Mutex
	forwards  map[string][]forward
	shipments []Shipment
	ships     int
	log       io.Writer
	// Booted is how long the boot took until the agent answered.
	Booted time.Duration
}

// State is a guest's record in its run directory (guest.json), which
// clean reads to find a dead session's guest: its QEMU by pid file and
// command line, its tap, its overlay.
type State struct {
	Name    string       `json:"name"`
	RunID   string       `json:"run_id"`
	Dir     string       `json:"dir"`      // run directory: pid file, socket, console
	DataDir string       `json:"data_dir"` // the overlay's directory
	Tap     string       `json:"tap"`      // "" on the user-mode network
	Network string       `json:"network,omitempty"`
	HostIP  netip.Addr   `json:"host_ip"`
	GuestIP netip.Prefix `json:"guest_ip"`
	Accel   string       `json:"accel"`
}

const stateFile = "guest.json"

func (s State) pidFile() string { return filepath.Join(s.Dir, "qemu.pid") }
func (s State) socket() string  { return filepath.Join(s.Dir, "agent.sock") }
func (s State) console() string { return filepath.Join(s.Dir, "console.log") }
func (s State) qemuLog() string { return filepath.Join(s.Dir, "qemu.log") }
func (s State) overlay() string { return filepath.Join(s.DataDir, "root.qcow2") }
func (s State) qmp() string     { return filepath.Join(s.Dir, "qmp.sock") }

// The data directory of disk: virtiofs, and virtiofsd's socket and pid.
func (s State) shared() string           { return filepath.Join(s.DataDir, "shared") }
func (s State) virtiofsSocket() string   { return filepath.Join(s.Dir, "virtiofs.sock") }
func (s State) virtiofsdPIDFile() string { return filepath.Join(s.Dir, "virtiofsd.pid") }
func (s State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(s.Dir, stateFile), append(b, '\n'), 0o644)
}

func (m *Machine) defaults() {
	if m.RunDir == "" {
		m.RunDir = RunDir
	}
	if m.DataDir == "" {
		m.DataDir = DataDir
	}
	if m.BootTimeout == 0 {
		m.BootTimeout = 3 * time.Minute
	}
	if m.DockerTimeout == 0 {
		m.DockerTimeout = 3 * time.Minute
	}
	if m.Log == nil {
		m.Log = io.Discard
	}
}

// Boot starts a guest and opens its agent's session. On failure nothing of
// it is left.
func (m *Machine) Boot(ctx context.Context, cfg Config, clientOpts remote.ClientOptions) (g *Guest, err error) {
	m.defaults()
	start := time.Now()
	disk := m.BaseDisk
	if cfg.Docker {
		disk = m.DockerDisk
	}
	if disk == nil {
		return nil, errors.New("guest disk: this machine makes no disk with Docker")
	}
	base, err := disk(ctx)
	if err != nil {
		return nil, err
	}
	initrd, err := Initramfs(m.Self, m.Kernel, filepath.Join(m.DataDir, "cache"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(m.RunDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, filepath.Join(m.RunDir, "slots.lock"))
	if err != nil {
		return nil, err
	}
	slot, err := pickSlot(m.RunDir)
	if err != nil {
		unlock()
		return nil, err
	}
	hostIP, guestIP := guestSlot(slot)
	tap := tapName(slot)
	if cfg.Network == NetworkUser {
		hostIP, guestIP, tap = userHost, userGuest, ""
	}
	name := fmt.Sprintf("ctrperf-vm-%s-%d", shortRun(m.RunID), slot)
	g = &Guest{State: State{Name: name, RunID: m.RunID, Dir: filepath.Join(m.RunDir, name), DataDir: filepath.Join(m.DataDir, name),
		Tap: tap, Network: cfg.Network, HostIP: hostIP, GuestIP: guestIP, Accel: cfg.Accel}, exited: make(chan struct{}), log: m.Log}
	defer func() {
		if err != nil {
			_ = g.Shutdown(context.WithoutCancel(ctx))
			g = nil
		}
	}()
	// The state first, then the overlay's directory: clean takes a
	// directory of DataDir that no state names for a crash's leftover.
	if err := os.MkdirAll(g.Dir, 0o755); err != nil {
		unlock()
		return g, err
	}
	if err := g.save(); err != nil {
		unlock()
		return g, err
	}
	if err := os.MkdirAll(g.DataDir, 0o755); err != nil {
		unlock()
		return g, err
	}
	if err := overlay(ctx, m.QEMUImg, base, g.overlay()); err != nil {
		unlock()
		return g, err
	}
	mc := machine{Name: name, Accel: cfg.Accel, VCPUs: cfg.VCPUs, Memory: cfg.Memory, Kernel: m.Kernel.Image, Initrd: initrd,
		Overlay: g.overlay(), Socket: g.socket(), Console: g.console(), PIDFile: g.pidFile(),
		Network: cfg.Network, Tap: g.Tap, GuestIP: guestIP, HostIP: hostIP, QMP: g.qmp(), Docker: cfg.Docker}
	if cfg.Docker {
		mc.DockerTimeout = m.DockerTimeout
	}
	if cfg.Disk == DiskVirtiofs {
		if err := g.startVirtiofsd(ctx, m.Virtiofsd); err != nil {
			unlock()
			return g, err
		}
		mc.Virtiofs = g.virtiofsSocket()
	}
	if err := g.startQEMU(m.QEMU, mc); err != nil {
		unlock()
		return g, err
	}
	if g.Tap != "" {
		err = g.configureTap(ctx)
	}
	unlock()
	if err != nil {
		return g, err
	}
	boot := m.BootTimeout
	if cfg.Docker {
		boot += m.DockerTimeout // the agent port opens once dockerd answers
	}
	bctx, cancel := context.WithTimeout(ctx, boot)
	defer cancel()
	conn, err := g.dialSocket(bctx)
	if err != nil {
		return g, err
	}
	clientOpts.Name = name
	clientOpts.Closer = conn
	if clientOpts.HelloTimeout == 0 {
		clientOpts.HelloTimeout = boot
	}
	// The hello waits in the socket until the guest's init opens the port
	// and its agent reads it: the boot's end.
	type dialed struct {
		c   *remote.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := remote.NewClient(bctx, conn, conn, clientOpts)
		ch <- dialed{c, err}
	}()
	select {
	case d := <-ch:
		if d.err != nil {
			return g, fmt.Errorf("guest %s: %w%s", name, d.err, g.consoleSays())
		}
		g.Client = d.c
	case <-g.exited:
		conn.Close()
		<-ch
		return g, fmt.Errorf("guest %s: QEMU exited while the guest booted%s", name, g.consoleSays())
	}
	g.Booted = time.Since(start)
	docker := ""
	if cfg.Docker {
		docker = ", Docker inside"
	}
	fmt.Fprintf(m.Log, "vm: guest %s (accel %s, %d vCPUs, %d MiB, network %s at %s, disk %s%s) answered after %s\n", name, cfg.Accel, cfg.VCPUs, cfg.Memory>>20,
		orDefault(cfg.Network, NetworkTap), guestIP.Addr(), orDefault(cfg.Disk, DiskVirtioBlk), docker, g.Booted.Round(100*time.Millisecond))
	return g, nil
}

// consoleSays is the end of the console and QEMU's log, for an error.
func (g *Guest) consoleSays() string {
	var parts []string
	if t := consoleTail(g.qemuLog(), 5); t != "" {
		parts = append(parts, "QEMU: "+t)
	}
	if t := consoleTail(g.console(), 8); t != "" {
		parts = append(parts, "console ("+g.console()+"):\n"+t)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func shortRun(runID string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(runID))
	if len(s) > 24 {
		s = s[len(s)-24:]
	}
	return strings.Trim(s, "-")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pickSlot is a free guest network and name on this machine (under the
// slots lock).
func pickSlot(runDir string) (int, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return 0, fmt.Errorf("guest network: %w", err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 0, fmt.Errorf("guest network: %w", err)
	}
	var as []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			as = append(as, ip.Unmap())
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(runDir, "ctrperf-vm-*"))
	for i, d := range dirs {
		dirs[i] = filepath.Base(d)
	}
	return freeSlot(names, as, dirs)
}

func (g *Guest) startQEMU(qemu string, mc machine) error {
	log, err := os.Create(g.qemuLog())
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(qemu, mc.args()...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: Ctrl-C reaches ctrperf, whose shutdown
	// stops the guest in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("guest %s: start %s: %w", g.Name, qemu, err)
	}
	g.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(g.exited)
	}()
	return nil
}

// configureTap gives the tap QEMU made the host's address and brings it up.
func (g *Guest) configureTap(ctx context.Context) error {
	var link netlink.Link
	for {
		l, err := netlink.LinkByName(g.Tap)
		if err == nil {
			link = l
			break
		}
		select {
		case <-g.exited:
			return fmt.Errorf("guest %s: QEMU exited before it made its tap %s%s", g.Name, g.Tap, g.consoleSays())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: g.HostIP.AsSlice(), Mask: net.CIDRMask(g.GuestIP.Bits(), 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("guest %s: address %s on %s: %w", g.Name, g.HostIP, g.Tap, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("guest %s: %s up: %w", g.Name, g.Tap, err)
	}
	return nil
}

// dialSocket connects to the agent port's socket once QEMU listens.
func (g *Guest) dialSocket(ctx context.Context) (net.Conn, error) {
	for {
		c, err := net.Dial("unix", g.socket())
		if err == nil {
			return c, nil
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("guest %s: QEMU exited%s", g.Name, g.consoleSays())
		case <-ctx.Done():
			return nil, fmt.Errorf("guest %s: the agent socket %s: %w", g.Name, g.socket(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Alive says whether the guest's QEMU still runs.
func (g *Guest) Alive() bool {
	select {
	case <-g.exited:
		return false
	default:
		return g.cmd != nil
	}
}

// Exited is closed when QEMU exits.
func (g *Guest) Exited() <-chan struct{} { return g.exited }

// Shutdown ends the agent's session (it tears down what is left in the
// guest), stops QEMU (SIGTERM, SIGKILL after 10 s: the guest's disk is an
// overlay thrown away, so nothing in it needs an orderly shutdown), and
// removes the guest's directories; its tap went with QEMU.
func (g *Guest) Shutdown(ctx context.Context) error {
	var errs []error
	if g.Client != nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := g.Client.Close(cctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if g.cmd != nil && g.cmd.Process != nil {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(10 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.exited
		}
	}
	if g.virtiofsd != nil {
		// It ends with QEMU's connection; one that QEMU never opened
		// does not.
		select {
		case <-g.virtiofsdExited:
		case <-time.After(5 * time.Second):
			_ = g.virtiofsd.Process.Kill()
			<-g.virtiofsdExited
		}
	}
	errs = append(errs, removeGuest(g.State))
	return errors.Join(errs...)
}

// removeGuest removes a stopped guest's tap (if QEMU's death left it),
// overlay and run directory.
func removeGuest(s State) error {
	var errs []error
	if s.Tap != "" {
		if l, err := netlink.LinkByName(s.Tap); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("remove tap %s: %w", s.Tap, err))
			}
		}
	}
	for _, d := range []string{s.DataDir, s.Dir} {
		if d != "" {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// qemuPID is the pid in s's pid file when that process is s's QEMU (its
// command line names s's guest), else 0: a pid reused by another process
// is never signalled.
func qemuPID(s State, procRoot string) int {
	b, err := os.ReadFile(s.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	cmdline, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return 0
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		if a == "-name" && i+1 < len(args) && args[i+1] == s.Name {
			return pid
		}
	}
	return 0
}

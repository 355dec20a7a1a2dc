package vm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// machine is one guest's QEMU as its command line says it.
type machine struct {
	Name    string
	Accel   string
	VCPUs   int
	Memory  int64 // bytes
	Kernel  string
	Initrd  string
	Overlay string
	Socket  string // the agent port's unix socket (QEMU listens)
	Console string // the serial console's log
	PIDFile string
	// Network is NetworkTap or NetworkUser. Tap is the tap device QEMU
	// creates (gone when QEMU exits), with the guest's address GuestIP
	// (and the host's HostIP) in one /30; under NetworkUser the guest is
	// at userGuest in QEMU's own network, the host at userHost.
	Network string
	Tap     string
	GuestIP netip.Prefix
	HostIP  netip.Addr
	// QMP is QEMU's control socket (QEMU listens): the user-mode
	// network's port forwards are added and removed there.
	QMP string
	// Virtiofs is virtiofsd's socket when the guest's data directory is a
	// directory of this machine (DiskVirtiofs), "" otherwise.
	Virtiofs string
	// Docker: the guest's init starts dockerd and waits up to
	// DockerTimeout for it to answer before it serves the agent port (its
	// disk is the GuestDocker rootfs's).
	Docker        bool
	DockerTimeout time.Duration
}

// The user-mode network's addresses (QEMU's defaults): the guest, and
// the host as the guest sees it (forwarded connections come from there).
var (
	userGuest = netip.MustParsePrefix("10.0.2.15/24")
	userHost  = netip.MustParseAddr("10.0.2.2")
)

// VirtiofsTag is the virtiofs share's tag, which the guest's init mounts
// at GuestDataDir.
const VirtiofsTag = "ctrperf-data"

// args is QEMU's command line: a machine with no default devices, the
// kernel booted directly with ctrperf's initramfs as PID 1, the overlay as
// a virtio-blk disk without the host's page cache (the guest has its own,
// as on a cloud VM), the agent's virtio-serial port on a unix socket,
// virtio-net on the tap or on QEMU's user-mode network (restricted: the
// guest reaches nothing but what is forwarded to it), and with virtiofs
// the guest's memory shared with virtiofsd (vhost-user needs it).
func (m machine) args() []string {
	cmdline := []string{"console=ttyS0", "loglevel=4", "panic=-1", "rdinit=/ctrperf",
		cmdlineIP + "=" + m.GuestIP.String(), cmdlineHost + "=" + m.HostIP.String()}
	if m.Virtiofs != "" {
		cmdline = append(cmdline, cmdlineVirtiofs+"="+VirtiofsTag)
	}
	if m.Docker {
		cmdline = append(cmdline, fmt.Sprintf("%s=%d", cmdlineDocker, int(max(m.DockerTimeout, time.Second).Seconds())))
	}
	cmdline = append(cmdline, "--", "__vminit")
	mem := strconv.FormatInt(m.Memory>>20, 10) + "M"
	a := []string{
		"-name", m.Name,
		"-accel", m.Accel,
		"-smp", strconv.Itoa(m.VCPUs),
		"-m", mem,
		"-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
		"-serial", "file:" + m.Console,
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", strings.Join(cmdline, " "),
		"-drive", "file=" + m.Overlay + ",if=none,id=root,format=qcow2,cache=none,aio=threads",
		"-device", "virtio-blk-pci,drive=root",
		"-device", "virtio-serial-pci,id=serial0",
		"-chardev", "socket,id=agent,path=" + m.Socket + ",server=on,wait=off",
		"-device", "virtserialport,bus=serial0.0,chardev=agent,name=" + AgentPort,
	}
	switch m.Network {
	case NetworkUser:
		a = append(a, "-netdev", fmt.Sprintf("user,id=net0,restrict=on,net=%s,host=%s,dhcpstart=%s", m.GuestIP.Masked(), m.HostIP, m.GuestIP.Addr()))
	default:
		a = append(a, "-netdev", "tap,id=net0,ifname="+m.Tap+",script=no,downscript=no")
	}
	a = append(a, "-device", "virtio-net-pci,netdev=net0")
	if m.QMP != "" {
		a = append(a, "-qmp", "unix:"+m.QMP+",server=on,wait=off")
	}
	if m.Virtiofs != "" {
		a = append(a,
			"-object", "memory-backend-memfd,id=mem,size="+mem+",share=on", "-numa", "node,memdev=mem",
			"-chardev", "socket,id=virtiofs,path="+m.Virtiofs,
			"-device", "vhost-user-fs-pci,chardev=virtiofs,tag="+VirtiofsTag)
	}
	a = append(a, "-pidfile", m.PIDFile)
	if m.Accel == AccelKVM {
		a = append(a, "-cpu", "host")
	}
	return a
}

// guestNet is 198.19.220.0/24, a /30 per guest (slot i: .4i+1 the host's
// tap, .4i+2 the guest): in ctrperf's benchmarking range, away from the
// client namespaces' slots (198.18.0.0/16 first), the lab's
// (198.19.200-207) and the lab cluster's (198.19.64/18, .96/20, .210).
const guestSlots = 64

func guestSlot(i int) (host netip.Addr, guest netip.Prefix) {
	host = netip.AddrFrom4([4]byte{198, 19, 220, byte(4*i + 1)})
	guest = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, 220, byte(4*i + 2)}), 30)
	return host, guest
}

// tapName is slot i's tap device.
func tapName(i int) string { return fmt.Sprintf("ctrperf-vm%d", i) }

// freeSlot is the first slot whose tap, addresses and guest name nobody
// uses (guests are the run directories' names: a guest on the user-mode
// network has no tap, and its slot still names it).
func freeSlot(links []string, addrs []netip.Addr, guests []string) (int, error) {
	used := map[string]bool{}
	for _, l := range links {
		used[l] = true
	}
	for _, g := range guests {
		if i := strings.LastIndexByte(g, '-'); i >= 0 {
			if n, err := strconv.Atoi(g[i+1:]); err == nil {
				used[tapName(n)] = true
			}
		}
	}
	for i := range guestSlots {
		_, g := guestSlot(i)
		free := !used[tapName(i)]
		for _, a := range addrs {
			if g.Masked().Contains(a) {
				free = false
			}
		}
		if free {
			return i, nil
		}
	}
	return 0, fmt.Errorf("all %d guest networks of 198.19.220.0/24 are in use; run `ctrperf clean`", guestSlots)
}

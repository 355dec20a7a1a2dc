package vm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
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
	// Tap is the tap device QEMU creates (gone when QEMU exits), with the
	// guest's address GuestIP (and the host's HostIP) in one /30.
	Tap     string
	GuestIP netip.Prefix
	HostIP  netip.Addr
}

// args is QEMU's command line: a machine with no default devices, the
// kernel booted directly with ctrperf's initramfs as PID 1, the overlay as
// a virtio-blk disk without the host's page cache (the guest has its own,
// as on a cloud VM), the agent's virtio-serial port on a unix socket, and
// virtio-net on the tap.
func (m machine) args() []string {
	cmdline := []string{"console=ttyS0", "loglevel=4", "panic=-1", "rdinit=/ctrperf",
		cmdlineIP + "=" + m.GuestIP.String(), cmdlineHost + "=" + m.HostIP.String(), "--", "__vminit"}
	a := []string{
		"-name", m.Name,
		"-accel", m.Accel,
		"-smp", strconv.Itoa(m.VCPUs),
		"-m", strconv.FormatInt(m.Memory>>20, 10) + "M",
		"-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
		"-serial", "file:" + m.Console,
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", strings.Join(cmdline, " "),
		"-drive", "file=" + m.Overlay + ",if=none,id=root,format=qcow2,cache=none,aio=threads",
		"-device", "virtio-blk-pci,drive=root",
		"-device", "virtio-serial-pci,id=serial0",
		"-chardev", "socket,id=agent,path=" + m.Socket + ",server=on,wait=off",
		"-device", "virtserialport,bus=serial0.0,chardev=agent,name=" + AgentPort,
		"-netdev", "tap,id=net0,ifname=" + m.Tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=net0",
		"-pidfile", m.PIDFile,
	}
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

// freeSlot is the first slot whose tap and addresses nobody uses.
func freeSlot(links []string, addrs []netip.Addr) (int, error) {
	used := map[string]bool{}
	for _, l := range links {
		used[l] = true
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

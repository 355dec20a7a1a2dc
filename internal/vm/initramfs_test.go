package vm

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

const modulesDep = `kernel/arch/x86/crypto/crc32c-intel.ko:
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/crypto/crc32c_generic.ko:
kernel/lib/crc16.ko:
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/char/virtio_console.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
`

// TestLoadOrder: every module after its dependencies, each once, from
// Debian 6.1's modules.dep (trimmed); a missing optional module is
// skipped, a missing required one is an error.
func TestLoadOrder(t *testing.T) {
	deps, err := parseModulesDep(strings.NewReader(modulesDep))
	if err != nil {
		t.Fatal(err)
	}
	order, err := loadOrder(deps, guestModules)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range order {
		if _, dup := pos[p]; dup {
			t.Errorf("%s loaded twice", p)
		}
		pos[p] = i
	}
	for mod, ds := range deps {
		i, ok := pos[mod]
		if !ok {
			continue
		}
		for _, d := range ds {
			if j, ok := pos[d]; !ok || j > i {
				t.Errorf("%s (at %d) before its dependency %s (at %d, loaded %v)", mod, i, d, j, ok)
			}
		}
	}
	for _, want := range []string{"ext4", "virtio_blk", "virtio_console", "virtio_net", "virtio_pci", "crc32c_generic"} {
		if !slices.ContainsFunc(order, func(p string) bool { return moduleName(p) == want }) {
			t.Errorf("%s not loaded: %v", want, order)
		}
	}
	delete(deps, "kernel/arch/x86/crypto/crc32c-intel.ko")
	if _, err := loadOrder(deps, guestModules); err != nil {
		t.Errorf("without the optional crc32c-intel: %v", err)
	}
	delete(deps, "kernel/fs/ext4/ext4.ko")
	if _, err := loadOrder(deps, guestModules); err == nil || !strings.Contains(err.Error(), "module ext4") {
		t.Errorf("without ext4: %v", err)
	}
	r := &initramfs{kernel: Kernel{Version: "6.1.0-56-amd64"}, order: order}
	if l := r.modulesList(); !strings.Contains(l, "?/lib/modules/6.1.0-56-amd64/kernel/arch/x86/crypto/crc32c-intel.ko\n") ||
		!strings.Contains(l, "\n/lib/modules/6.1.0-56-amd64/kernel/fs/ext4/ext4.ko\n") {
		t.Errorf("modules.list:\n%s", l)
	}
}

func TestFreeSlot(t *testing.T) {
	cases := []struct {
		desc   string
		links  []string
		addrs  []string
		guests []string // run directories' names
		want   int
	}{
		{"nothing in use", nil, nil, nil, 0},
		{"a tap of another guest", []string{"ctrperf-vm0"}, nil, nil, 1},
		{"an address in slot 0's /30 (a leftover, someone's)", nil, []string{"198.19.220.1"}, nil, 1},
		{"both", []string{"ctrperf-vm1"}, []string{"198.19.220.2"}, nil, 2},
		{"other networks do not matter", []string{"eth0"}, []string{"198.19.200.1", "10.0.0.1"}, nil, 0},
		{"a guest on the user-mode network (no tap) holds its slot's name", nil, nil, []string{"ctrperf-vm-sess-a-0", "ctrperf-vm-sess-b-1"}, 2},
	}
	for _, c := range cases {
		var as []netip.Addr
		for _, a := range c.addrs {
			as = append(as, netip.MustParseAddr(a))
		}
		if got, err := freeSlot(c.links, as, c.guests); err != nil || got != c.want {
			t.Errorf("%s: slot %d, %v; want %d", c.desc, got, err, c.want)
		}
	}
	var all []string
	for i := range guestSlots {
		all = append(all, tapName(i))
	}
	if _, err := freeSlot(all, nil, nil); err == nil {
		t.Error("every slot taken: no error")
	}
	h, g := guestSlot(3)
	if h.String() != "198.19.220.13" || g.String() != "198.19.220.14/30" {
		t.Errorf("slot 3: host %s guest %s", h, g)
	}
}

// TestMachineArgs: QEMU's command line for each knob of the vm block,
// what it must say and what it must not.
func TestMachineArgs(t *testing.T) {
	h, g := guestSlot(0)
	base := machine{Name: "ctrperf-vm-x-0", Accel: AccelTCG, VCPUs: 2, Memory: 2 << 30, Kernel: "/boot/vmlinuz", Initrd: "/c/i.cpio",
		Overlay: "/d/root.qcow2", Socket: "/r/agent.sock", Console: "/r/console.log", PIDFile: "/r/qemu.pid", Network: NetworkTap, Tap: "ctrperf-vm0",
		GuestIP: g, HostIP: h, QMP: "/r/qmp.sock"}
	common := []string{"-name ctrperf-vm-x-0", "-smp 2", "-m 2048M", "-nodefaults",
		"file=/d/root.qcow2,if=none,id=root,format=qcow2,cache=none", "socket,id=agent,path=/r/agent.sock,server=on,wait=off",
		"name=" + AgentPort, "-device virtio-net-pci,netdev=net0", "-qmp unix:/r/qmp.sock,server=on,wait=off", "-pidfile /r/qemu.pid"}
	cases := []struct {
		desc      string
		edit      func(*machine)
		want, not []string
	}{
		{"tap, virtio-blk, tcg", func(*machine) {},
			[]string{"-accel tcg", "rdinit=/ctrperf ctrperf.ip=198.19.220.2/30 ctrperf.host=198.19.220.1 -- __vminit",
				"-netdev tap,id=net0,ifname=ctrperf-vm0,script=no,downscript=no"},
			[]string{"-cpu host", "user,", "vhost-user-fs", "memory-backend", cmdlineVirtiofs, cmdlineDocker}},
		{"kvm", func(m *machine) { m.Accel = AccelKVM }, []string{"-accel kvm", "-cpu host"}, nil},
		{"user-mode network: restricted, the guest at QEMU's address", func(m *machine) {
			m.Network, m.Tap, m.GuestIP, m.HostIP = NetworkUser, "", userGuest, userHost
		}, []string{"-netdev user,id=net0,restrict=on,net=10.0.2.0/24,host=10.0.2.2,dhcpstart=10.0.2.15", "ctrperf.ip=10.0.2.15/24 ctrperf.host=10.0.2.2"},
			[]string{"tap,", "ifname="}},
		{"virtiofs: shared memory, the vhost-user device, the tag on the kernel's command line", func(m *machine) { m.Virtiofs = "/r/virtiofs.sock" },
			[]string{"-object memory-backend-memfd,id=mem,size=2048M,share=on -numa node,memdev=mem",
				"-chardev socket,id=virtiofs,path=/r/virtiofs.sock", "-device vhost-user-fs-pci,chardev=virtiofs,tag=" + VirtiofsTag,
				cmdlineVirtiofs + "=" + VirtiofsTag + " -- __vminit"}, nil},
		{"docker: the wait for dockerd on the kernel's command line", func(m *machine) { m.Docker, m.DockerTimeout = true, 90*time.Second },
			[]string{cmdlineDocker + "=90 -- __vminit"}, nil},
	}
	for _, c := range cases {
		m := base
		c.edit(&m)
		args := strings.Join(m.args(), " ")
		for _, w := range append(common, c.want...) {
			if !strings.Contains(args, w) {
				t.Errorf("%s: QEMU's command line lacks %q:\n%s", c.desc, w, args)
			}
		}
		for _, n := range c.not {
			if strings.Contains(args, n) {
				t.Errorf("%s: QEMU's command line has %q:\n%s", c.desc, n, args)
			}
		}
	}
}

// TestGuestEngineModules: a guest with Docker gets the modules of its
// dockerd (overlay, the bridge, nf_tables) in a list of their own, each
// after its dependencies and optional as they are, none of them in the
// list every guest loads; a module the kernel has built in (absent from
// modules.dep) is skipped.
func TestGuestEngineModules(t *testing.T) {
	dep := modulesDep + `kernel/fs/overlayfs/overlay.ko:
kernel/net/bridge/bridge.ko: kernel/net/802/stp.ko kernel/net/llc/llc.ko
kernel/net/802/stp.ko: kernel/net/llc/llc.ko
kernel/net/llc/llc.ko:
kernel/net/netfilter/nf_tables.ko: kernel/lib/libcrc32c.ko kernel/net/netfilter/nfnetlink.ko
kernel/lib/libcrc32c.ko:
kernel/net/netfilter/nfnetlink.ko:
`
	deps, err := parseModulesDep(strings.NewReader(dep))
	if err != nil {
		t.Fatal(err)
	}
	order, err := loadOrder(deps, guestModules)
	if err != nil {
		t.Fatal(err)
	}
	docker, err := loadOrder(deps, dockerModules)
	if err != nil {
		t.Fatalf("docker modules, some built in: %v", err)
	}
	r := &initramfs{kernel: Kernel{Version: "6.1.0-56-amd64"}, order: order, docker: docker}
	all, every := r.dockerList(), r.modulesList()
	for _, m := range []string{"overlayfs/overlay.ko", "bridge/bridge.ko", "netfilter/nf_tables.ko"} {
		if !strings.Contains(all, m) || strings.Contains(every, m) {
			t.Errorf("%s: in the docker list %v, in every guest's %v", m, strings.Contains(all, m), strings.Contains(every, m))
		}
	}
	if llc, br := strings.Index(all, "llc.ko"), strings.Index(all, "bridge.ko"); llc < 0 || llc > br {
		t.Errorf("bridge before its dependency llc:\n%s", all)
	}
	for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
		if !strings.HasPrefix(l, "?/lib/modules/6.1.0-56-amd64/") {
			t.Errorf("a docker module that the boot needs: %s", l)
		}
	}
}

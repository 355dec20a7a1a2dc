package isolate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"ctrperf/internal/kernel"
)

func TestNetworkIRQs(t *testing.T) {
	const (
		virtioInterrupts = "testdata/interrupts-virtio-2cpu"     // this VM
		pciInterrupts    = "testdata/netirq/interrupts-pci-4cpu" // a server
	)
	// The VM the fixture was taken from: one virtio-net NIC among virtio
	// devices whose queue names look like a NIC's (vsock's virtio3-rx/-tx,
	// rng's virtio4-input).
	thisVM := tree(
		virtioDevice("pci0000:00/0000:00:01.0", "virtio0", "virtio_balloon", []int{28, 29, 30, 31, 32}, 0),
		virtioDevice("pci0000:00/0000:00:02.0", "virtio1", "virtio_blk", []int{35, 36}, 0),
		virtioDevice("pci0000:00/0000:00:03.0", "virtio2", "virtio_net", []int{37, 38, 39}, 0, "eth0"),
		virtioDevice("pci0000:00/0000:00:04.0", "virtio3", "vmw_vsock_virtio_transport", []int{40, 41, 42, 43}, 0),
		virtioDevice("pci0000:00/0000:00:05.0", "virtio4", "virtio_rng", []int{33, 34}, 0),
		virtualIface("lo"), virtualIface("ifb0"), virtualIface("ifb1"),
	)
	rootPort := pciFunction("pci0000:00/0000:00:01.0", "pcieport", []int{24}, 0)
	nvme := pciFunction("pci0000:00/0000:00:1d.0/0000:06:00.0", "nvme", []int{40}, 0)

	tests := []struct {
		desc       string
		sys        sysfsTree
		interrupts string // fixture copied to PROC/interrupts; "" for none
		want       string // "num:name ..."
		wantErr    string
	}{
		{
			desc:       "virtio-net NIC beside virtio-vsock, -rng, -blk and a balloon: only the NIC's config and queues",
			sys:        thisVM,
			interrupts: virtioInterrupts,
			want:       "37:virtio2-config 38:virtio2-input.0 39:virtio2-output.0",
		},
		{
			desc: "lo, veth, bridges and docker0 have no device: nothing, whatever the IRQ names",
			sys: tree(virtualIface("lo"), virtualIface("docker0"), virtualIface("br-5f2a91c3d7e0"),
				virtualIface("veth9a1b2c3"), virtualIface("bond0")),
			interrupts: virtioInterrupts,
			want:       "",
		},
		{
			desc:       "PCI NIC with MSI-X (ixgbe); its root port's AER/PME vector and an NVMe disk are left out",
			sys:        tree(rootPort, pciNIC("pci0000:00/0000:00:01.0/0000:01:00.0", "ixgbe", []int{25, 26, 27}, 0, "ens1f0"), nvme),
			interrupts: pciInterrupts,
			want:       "25:ens1f0 26:ens1f0-TxRx-0 27:ens1f0-TxRx-1",
		},
		{
			desc:       "vectors that /proc/interrupts does not list cannot be steered and are left out",
			sys:        tree(pciNIC("pci0000:00/0000:00:01.0/0000:01:00.0", "ixgbe", []int{25, 26, 27, 31, 32}, 0, "ens1f0")),
			interrupts: pciInterrupts,
			want:       "25:ens1f0 26:ens1f0-TxRx-0 27:ens1f0-TxRx-1",
		},
		{
			desc:       "NIC on a legacy line (e1000): its irq file, not its root port's MSI",
			sys:        tree(rootPort, pciNIC("pci0000:00/0000:00:01.0/0000:05:00.0", "e1000", nil, 16, "enp5s0")),
			interrupts: pciInterrupts,
			want:       "16:enp5s0",
		},
		{
			desc:       "virtio-net without MSI-X: the legacy line of the PCI function above it",
			sys:        tree(virtioDevice("pci0000:00/0000:00:03.0", "virtio0", "virtio_net", nil, 11, "eth0")),
			interrupts: pciInterrupts,
			want:       "11:virtio0",
		},
		{
			desc:       "legacy irq 0 means no line (never the timer)",
			sys:        tree(pciNIC("pci0000:00/0000:00:19.0", "e1000e", nil, 0, "eno1")),
			interrupts: pciInterrupts,
			want:       "",
		},
		{
			desc: "two ports on one PCI function give its IRQs once",
			sys: tree(pciNIC("pci0000:00/0000:00:02.0/0000:03:00.0", "mlx4_core", []int{29, 30}, 0, "ens3", "ens3d1"),
				virtualIface("lo")),
			interrupts: pciInterrupts,
			want:       "29:mlx4-async@pci:0000:03:00.0 30:mlx4-1@0000:03:00.0",
		},
		{
			desc:       "an IRQ listed without a name is named after the interface and driver",
			sys:        tree(pciNIC("pci0000:00/0000:00:19.0", "igb", []int{28}, 0, "eno1")),
			interrupts: pciInterrupts,
			want:       "28:eno1 (igb)",
		},
		{
			desc: "an msi_irqs entry that is no number is an error naming the directory",
			sys: tree(pciNIC("pci0000:00/0000:00:19.0", "igb", []int{28}, 0, "eno1"),
				sysfsTree{"devices/pci0000:00/0000:00:19.0/msi_irqs/bogus": "msix\n"}),
			interrupts: pciInterrupts,
			wantErr:    `0000:00:19.0/msi_irqs: entry "bogus" is no IRQ number`,
		},
		{
			desc:       "an irq file that is no number is an error naming the file and value",
			sys:        tree(pciNIC("pci0000:00/0000:00:19.0", "e1000e", nil, 0, "eno1"), sysfsTree{"devices/pci0000:00/0000:00:19.0/irq": "n/a\n"}),
			interrupts: pciInterrupts,
			wantErr:    `0000:00:19.0/irq: "n/a" is no IRQ number`,
		},
		{
			desc:       "no class/net under the sys root",
			sys:        tree(nvme),
			interrupts: pciInterrupts,
			wantErr:    "list network interfaces",
		},
		{
			desc:    "no interrupts under the proc root",
			sys:     thisVM,
			wantErr: "list IRQs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			sysRoot, procRoot := filepath.Join(root, "sys"), filepath.Join(root, "proc")
			tt.sys.build(t, sysRoot)
			if err := os.MkdirAll(procRoot, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.interrupts != "" {
				b, err := os.ReadFile(tt.interrupts)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(procRoot, "interrupts"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			irqs, err := NetworkIRQs(kernel.NewFS(kernel.Roots{Sys: sysRoot, Proc: procRoot}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, irq := range irqs {
				got = append(got, fmt.Sprintf("%d:%s", irq.Num, irq.Name))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("IRQs %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

// sysfsTree is a fixture sysfs: a path relative to the root maps to a
// file's content or, for a value "-> target", to a symlink to the
// root-relative target (written as a relative link, as sysfs does).
type sysfsTree map[string]string

func tree(parts ...sysfsTree) sysfsTree {
	out := sysfsTree{}
	for _, p := range parts {
		for k, v := range p {
			out[k] = v
		}
	}
	return out
}

func (tr sysfsTree) build(t *testing.T, root string) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, rel := range paths {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		v := tr[rel]
		if target, ok := strings.CutPrefix(v, "-> "); ok {
			link, err := filepath.Rel(filepath.Dir(p), filepath.Join(root, target))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}

// pciFunction is a PCI function (a path under devices/ such as
// "pci0000:00/0000:00:1c.0/0000:05:00.0") bound to driver, with the MSI
// vectors msi and the legacy line irq.
func pciFunction(fn, driver string, msi []int, irq int) sysfsTree {
	dev := "devices/" + fn
	tr := sysfsTree{
		dev + "/irq":       strconv.Itoa(irq) + "\n",
		dev + "/subsystem": "-> bus/pci",
		dev + "/driver":    "-> bus/pci/drivers/" + driver,
	}
	for _, n := range msi {
		tr[dev+"/msi_irqs/"+strconv.Itoa(n)] = "msix\n"
	}
	return tr
}

// pciNIC is a PCI function with network interfaces ifaces.
func pciNIC(fn, driver string, msi []int, irq int, ifaces ...string) sysfsTree {
	tr := pciFunction(fn, driver, msi, irq)
	for _, name := range ifaces {
		tr = tree(tr, netIface("devices/"+fn, name))
	}
	return tr
}

// virtioDevice is virtio device vdev (e.g. virtio2) bound to driver on a
// virtio-pci function that carries the interrupts, with interfaces ifaces.
func virtioDevice(fn, vdev, driver string, msi []int, irq int, ifaces ...string) sysfsTree {
	tr := pciFunction(fn, "virtio-pci", msi, irq)
	dev := "devices/" + fn + "/" + vdev
	tr[dev+"/subsystem"] = "-> bus/virtio"
	tr[dev+"/driver"] = "-> bus/virtio/drivers/" + driver
	tr[dev+"/status"] = "0x0000000f\n"
	for _, name := range ifaces {
		tr = tree(tr, netIface(dev, name))
	}
	return tr
}

// netIface is interface name of the device directory dev.
func netIface(dev, name string) sysfsTree {
	return sysfsTree{
		dev + "/net/" + name + "/device":  "-> " + dev,
		dev + "/net/" + name + "/ifindex": "2\n",
		"class/net/" + name:               "-> " + dev + "/net/" + name,
	}
}

// virtualIface is an interface without a device (lo, veth, bridge, ...).
func virtualIface(name string) sysfsTree {
	dev := "devices/virtual/net/" + name
	return sysfsTree{dev + "/ifindex": "1\n", "class/net/" + name: "-> " + dev}
}

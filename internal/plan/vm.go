package plan

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Runtime vm runs the services in a QEMU guest of ctrperf's own (Debian's
// kernel, the debian-base root filesystem on a virtio-blk disk, ctrperf's
// agent inside), as processes of the guest. Its knobs are a `vm:` block:
//
//	runtime: vm
//	vm: {vcpus: 2, memory: 2g, accel: kvm, network: tap, disk: virtio-blk}
//
// accel: tcg emulates the CPU: it runs only when a plan asks for it, and
// its records say emulated (no performance comparison). network: user is
// QEMU's user-mode network: the load dials a port QEMU forwards, so QEMU's
// userspace relay (slirp) is in the measured path, and every record says
// so. disk: virtiofs puts the services' data on a directory of this
// machine shared into the guest (virtiofsd), the root disk stays on
// virtio-blk. docker: true runs Docker inside the guest (seed 003's
// "container in a VM"): each service is a container of the guest's
// engine, on the guest's network (--network host there).

// VM accelerators, networks and disks a plan may name.
var (
	VMAccels   = []string{"kvm", "tcg"}
	VMNetworks = []string{"tap", "user"}
	VMDisks    = []string{"virtio-blk", "virtiofs"}
	vmKeys     = []string{"vcpus", "memory", "accel", "network", "disk", "docker"}
)

// MaxVMVCPUs bounds vm.vcpus.
const MaxVMVCPUs = 64

// VMSpec is a configuration's `vm:` block; zero fields take the defaults
// of Defaulted.
type VMSpec struct {
	VCPUs   int    `json:"vcpus,omitempty" yaml:"vcpus,omitempty"`
	Memory  int64  `json:"memory,omitempty" yaml:"memory,omitempty"` // bytes
	Accel   string `json:"accel,omitempty" yaml:"accel,omitempty"`
	Network string `json:"network,omitempty" yaml:"network,omitempty"`
	Disk    string `json:"disk,omitempty" yaml:"disk,omitempty"`
	// Docker runs the services in a Docker engine inside the guest
	// (its disk then has Debian's docker.io), not as its processes.
	Docker bool `json:"docker,omitempty" yaml:"docker,omitempty"`
}

// DefaultVM is a guest a plan does not describe: 2 vCPUs, 2 GiB, KVM,
// virtio-net on a tap, the root disk on virtio-blk, no Docker inside.
var DefaultVM = VMSpec{VCPUs: 2, Memory: 2 << 30, Accel: "kvm", Network: "tap", Disk: "virtio-blk"}

// Defaulted is the block with DefaultVM's values where it names none.
func (v VMSpec) Defaulted() VMSpec {
	d := DefaultVM
	if v.VCPUs != 0 {
		d.VCPUs = v.VCPUs
	}
	if v.Memory != 0 {
		d.Memory = v.Memory
	}
	if v.Accel != "" {
		d.Accel = v.Accel
	}
	if v.Network != "" {
		d.Network = v.Network
	}
	if v.Disk != "" {
		d.Disk = v.Disk
	}
	d.Docker = v.Docker
	return d
}

// IsZero says whether the block asks for nothing.
func (v VMSpec) IsZero() bool { return v == VMSpec{} }

// Emulated says whether the guest's CPU is emulated (accel: tcg).
func (v VMSpec) Emulated() bool { return v.Defaulted().Accel == "tcg" }

// Key names the guest for engine caches: one guest per distinct block.
func (v VMSpec) Key() string {
	d := v.Defaulted()
	k := fmt.Sprintf("vm(%s|%d|%d|%s|%s)", d.Accel, d.VCPUs, d.Memory, d.Network, d.Disk)
	if d.Docker {
		k = strings.TrimSuffix(k, ")") + "|docker)"
	}
	return k
}

// Relayed says whether the load reaches the guest through a userspace
// relay (network: user, QEMU's slirp), which is then part of every figure.
func (v VMSpec) Relayed() bool { return v.Defaulted().Network == "user" }

// RelayNote is what a plan listing and every record of a relayed guest
// say of its path.
const RelayNote = "a userspace relay is in the path (QEMU's user-mode network, slirp: the load dials a port QEMU forwards to the guest)"

// ContainerInVMNote is what a listing and a report say of a guest with
// docker: true: seed 003's fourth row.
const ContainerInVMNote = "container in VM"

func (v VMSpec) describe() string {
	d := v.Defaulted()
	s := fmt.Sprintf("vm accel=%s vcpus=%d memory=%s network=%s disk=%s", d.Accel, d.VCPUs, FormatMemory(d.Memory), d.Network, d.Disk)
	if d.Docker {
		s += " docker=in-guest (" + ContainerInVMNote + ")"
	}
	if v.Relayed() {
		s += " (" + RelayNote + ")"
	}
	return s
}

func (d *decoder) setVM(k *Knobs, key string, n *yaml.Node, field string) {
	k.nodes["vm."+key] = n
	switch key {
	case "vcpus":
		if v, ok := d.integer(n, field); ok {
			if v < 1 || v > MaxVMVCPUs {
				d.errorf(n, field, "%d: expected a number of virtual CPUs between 1 and %d", v, MaxVMVCPUs)
				return
			}
			k.VM.VCPUs = int(v)
		}
	case "memory":
		if v, ok := d.memory(n, field); ok {
			if v < 512<<20 {
				d.errorf(n, field, "%s: a guest needs at least 512m (its initramfs holds ctrperf, about 100 MB, twice while it unpacks)", FormatMemory(v))
				return
			}
			k.VM.Memory = v
		}
	case "accel":
		if s, ok := d.enum(n, field, VMAccels); ok {
			k.VM.Accel = s
		}
	case "network":
		if s, ok := d.enum(n, field, VMNetworks); ok {
			k.VM.Network = s
		}
	case "disk":
		if s, ok := d.enum(n, field, VMDisks); ok {
			k.VM.Disk = s
		}
	case "docker":
		if v, ok := d.boolean(n, field); ok {
			k.VM.Docker = v
		}
	default:
		d.unknownSub(n, field, key, vmKeys)
	}
}

// checkVM refuses the vm block on other runtimes, and on runtime vm the
// knobs of Docker and the host, which a guest does not take.
func (d *decoder) checkVM(c *Configuration) {
	field := func(k string) string { return join(c.Origin, k) }
	if !c.Runtime.Traits().Guest {
		for _, k := range vmKeys {
			if n, ok := c.nodes["vm."+k]; ok {
				d.errorf(n, field("vm."+k), "the vm block needs runtime vm (remove it or set runtime: vm)")
			}
		}
		return
	}
	for _, k := range []string{"network", "data", "topology", "privileged", "instances", "filesystem", "resources"} {
		if n, ok := c.nodes[k]; ok {
			d.errorf(n, field(k), "not a knob of runtime vm: a guest's services run as its processes with its own network and disk (the vm block describes them: %s)", strings.Join(vmKeys, ", "))
		}
	}
	for _, k := range engineKeys {
		if n, ok := c.nodes["engine."+k]; ok {
			d.errorf(n, field("engine."+k), "engine knobs select a Docker engine; runtime vm has none (remove it)")
		}
	}
}

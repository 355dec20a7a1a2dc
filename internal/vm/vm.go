// Package vm is runtime vm: a QEMU guest of ctrperf's own (Debian's kernel,
// the ctrperf/debian-base root filesystem as a virtio-blk disk, ctrperf
// itself as the guest's init and agent), reached over a virtio-serial port
// with the agent protocol of a plan's hosts (internal/agent,
// internal/remote), so that deploy, exec, samplers, teardown and owner
// records work in the guest as on a remote host.
//
// The pieces, each in a file of its own: the guest kernel found on this
// machine (kernel.go), the boot probe doctor uses (probe.go), the
// initramfs holding ctrperf and the modules the guest needs to reach its
// disk and ports (initramfs.go), the base disk image cached by its recipe
// hash and each guest's copy-on-write overlay (disk.go), QEMU's command
// line and process (qemu.go), the guest's init (guestinit.go), the booted
// guest and its engine (guest.go, engine.go) and the sweep of a dead run's
// guests (clean.go).
package vm

import (
	"path/filepath"

	"ctrperf/internal/engine"
)

// Accelerators of a guest's CPU.
const (
	// AccelKVM runs the guest's instructions on the CPU (hardware
	// virtualisation): the only accelerator whose numbers compare.
	AccelKVM = "kvm"
	// AccelTCG emulates the guest's CPU in software (QEMU's tiny code
	// generator): the mechanism works, its numbers compare with nothing.
	AccelTCG = "tcg"
)

// Networks of a guest.
const (
	// NetworkTap is virtio-net on a tap device of ctrperf's own, the guest
	// at an address of 198.19.220.0/24 (a /30 per guest): the load on this
	// machine dials the guest's address through the host's network stack,
	// as a client outside a cloud VM does.
	NetworkTap = "tap"
	// NetworkUser is QEMU's user-mode network (slirp), restricted to the
	// ports forwarded to the guest: the load on this machine dials a port
	// of 127.0.0.1 that QEMU relays in userspace, a hop that is then part
	// of every figure (the records say so).
	NetworkUser = "user"
)

// Disks of a guest.
const (
	// DiskVirtioBlk is the root filesystem as a virtio-blk disk: the
	// cached base image under a qcow2 overlay of the guest's own.
	DiskVirtioBlk = "virtio-blk"
	// DiskVirtiofs is the root filesystem on virtio-blk as above, and the
	// services' data on a directory of this machine shared into the guest
	// by virtiofsd (GuestDataDir there).
	DiskVirtiofs = "virtiofs"
)

// Paths ctrperf keeps its guests' files in.
var (
	// RunDir holds each live guest's directory (pid file, state, agent
	// socket, console log): RunDir/<guest>.
	RunDir = filepath.Join(engine.DefaultRunDir, "vm")
	// DataDir holds each guest's disk overlay (DataDir/<guest>) and the
	// cache of base disks and initramfs images (DataDir/cache).
	DataDir = "/var/lib/ctrperf/vm"
)

package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// KVM ioctls (linux/kvm.h).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
)

// collectVM answers seed 003's "VM (KVM) vs Docker" question for this
// machine: whether KVM works (/dev/kvm opens and creates a VM) and whether
// QEMU is installed. ctrperf has no VM runtime, so the capability is never
// usable; the reason says what is missing besides it.
func collectVM(_ context.Context, o options, f *Facts) error {
	f.VM = Capability{Name: "vm"}
	kvm := filepath.Join(o.devRoot, "kvm")
	qemu, qerr := o.lookPath("qemu-system-x86_64")
	qemuText := "qemu-system-x86_64 " + qemu
	if qerr != nil {
		qemuText = "qemu-system-x86_64 not installed (Debian package qemu-system-x86)"
	}
	if _, err := os.Stat(kvm); errors.Is(err, os.ErrNotExist) {
		f.VM.Reason = fmt.Sprintf("/dev/kvm missing (no KVM: the kernel lacks the kvm module or the machine hides virtualisation from it; a VM would be emulated, far too slow to compare with containers); %s", qemuText)
		return nil
	}
	api, err := probeKVM(kvm)
	if err != nil {
		f.VM.Reason = fmt.Sprintf("/dev/kvm present but unusable (%v); %s", err, qemuText)
		return nil
	}
	f.VM.Reason = fmt.Sprintf("ctrperf has no VM runtime; KVM works here (/dev/kvm API %d, a VM was created); %s", api, qemuText)
	return nil
}

// probeKVM opens the KVM device and creates (and closes) an empty VM.
func probeKVM(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	api, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	if err != nil {
		return 0, fmt.Errorf("KVM_GET_API_VERSION: %w", err)
	}
	vm, err := unix.IoctlRetInt(fd, kvmCreateVM)
	if err != nil {
		return api, fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	unix.Close(vm)
	return api, nil
}

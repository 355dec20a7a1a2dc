package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// kvmProbeTimeout bounds each of the KVM probe's test guests: three
// instructions take microseconds where KVM works.
const kvmProbeTimeout = 2 * time.Second

// collectVM answers seed 003's "VM (KVM) vs Docker" question for this
// machine: whether KVM runs a guest (kernel.ProbeKVM: a vCPU executes a
// test program in real mode and in 64-bit long mode) and whether QEMU is
// installed. ctrperf has no VM runtime, so the capability is never usable;
// the reason says what KVM can do here and what is missing besides it.
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
	p, err := o.kvmProbe(kvm, kvmProbeTimeout)
	switch {
	case err != nil && !p.VMCreated:
		f.VM.Reason = fmt.Sprintf("/dev/kvm present but unusable (%v); %s", err, qemuText)
	case err != nil:
		f.VM.Reason = fmt.Sprintf("KVM creates a VM (/dev/kvm API %d) but does not run a test guest: %v; %s", p.API, err, qemuText)
	default:
		f.VM.Reason = fmt.Sprintf("ctrperf has no VM runtime; KVM runs a 64-bit test guest here (/dev/kvm API %d); %s", p.API, qemuText)
	}
	return nil
}

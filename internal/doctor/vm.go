package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"ctrperf/internal/kernel"
)

// kvmProbeTimeout bounds each of the KVM probe's test guests: three
// instructions take microseconds where KVM works.
const kvmProbeTimeout = 2 * time.Second

// VM is the vm capability alone (collectVM), for `runtime: vm`: the
// reason its configurations are recorded not_run.
func VM(ctx context.Context, opts ...Option) Capability {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	f := &Facts{}
	if err := collectVM(ctx, o, f); err != nil {
		return Capability{Name: "vm", Reason: err.Error()}
	}
	return f.VM
}

// collectVM answers seed 003's "VM (KVM) vs Docker" question for this
// machine: which module provides KVM (kernel.KVMModule), whether it runs a
// guest (kernel.ProbeKVM: a vCPU executes a test program in real mode and
// in 64-bit long mode) and whether QEMU is installed. ctrperf has no VM
// runtime, so the capability is never usable; the reason says what KVM
// can do here and what is missing besides it.
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
	module := kernel.KVMModule(o.kernel.Sys())
	p, err := o.kvmProbe(kvm, kvmProbeTimeout)
	switch {
	case err != nil && !p.VMCreated:
		f.VM.Reason = fmt.Sprintf("/dev/kvm present but unusable (%v); %s", err, qemuText)
	case module == "kvm_pvm":
		// PVM passes the probe (a few instructions, emulated) and still
		// runs no stock guest kernel: say what it is, not what the probe saw.
		probe := "runs the 64-bit test guest"
		if err != nil {
			probe = fmt.Sprintf("does not run the test guest: %v", err)
		}
		f.VM.Reason = fmt.Sprintf("KVM here is PVM (module kvm_pvm, /dev/kvm API %d: a hypervisor in software for guests nested in a cloud VM without hardware virtualisation), which %s but runs only guest kernels built for PVM; a stock kernel stops under it with \"KVM internal error ... emulation failure\" (Debian's 6.1 under QEMU 7.2, plans/README.md), and Debian packages no PVM guest kernel, so no VM runs here; %s", p.API, probe, qemuText)
	case err != nil:
		f.VM.Reason = fmt.Sprintf("KVM creates a VM (/dev/kvm API %d) but does not run a test guest: %v; %s", p.API, err, qemuText)
	default:
		via := ""
		if module != "" {
			via = ", module " + module
		}
		f.VM.Reason = fmt.Sprintf("ctrperf has no VM runtime; KVM runs a 64-bit test guest here (/dev/kvm API %d%s), but ctrperf's VM runtime was never built: no stock guest kernel boots under the KVM of the machine it is developed on (plans/README.md); %s", p.API, via, qemuText)
	}
	return nil
}

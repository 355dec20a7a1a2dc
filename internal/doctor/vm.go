package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/vm"
)

// kvmProbeTimeout bounds each of the KVM probe's test guests: three
// instructions take microseconds where KVM works.
const kvmProbeTimeout = 2 * time.Second

// bootProbeTimeout bounds the boot of a stock guest kernel under KVM: a
// few seconds where KVM works (under emulation it takes 8 s here); one
// that hangs (PVM) costs this once, then the cached answer is read.
const bootProbeTimeout = 30 * time.Second

// VMFacts is what runtime vm finds on this machine.
type VMFacts struct {
	// KVM is "hardware" (kvm_intel, kvm_amd), "pvm" (kvm_pvm), "none"
	// (no /dev/kvm) or "unusable" (a /dev/kvm that creates no VM).
	KVM       string `json:"kvm"`
	KVMModule string `json:"kvm_module,omitempty"`
	// QEMU is qemu-system-x86_64's path, "" when not installed.
	QEMU string `json:"qemu,omitempty"`
	// GuestKernel is the kernel a guest boots (linux-image-amd64's), ""
	// with none installed.
	GuestKernel string `json:"guest_kernel,omitempty"`
	// KVMBoot is whether that kernel boots under -accel kvm (the bounded
	// probe, cached per QEMU, kernel, KVM module and boot); nil when not
	// probed (no KVM, QEMU or kernel).
	KVMBoot *vm.BootProbe `json:"kvm_boot,omitempty"`
	// TCG is whether an emulated guest (accel: tcg) can run: QEMU and a
	// guest kernel are there.
	TCG Capability `json:"tcg"`
	// Virtiofsd is virtiofsd's path (a guest's disk: virtiofs), "" when
	// not installed.
	Virtiofsd string `json:"virtiofsd,omitempty"`
}

// VM is the vm capability alone (collectVM), for `runtime: vm` with
// accel: kvm: the reason its configurations are recorded not_run.
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

// defaultBootProbe boots the guest kernel under KVM once per QEMU, kernel,
// KVM module and boot of this machine, remembered in libDir.
func defaultBootProbe(ctx context.Context, o options, qemu string, k vm.Kernel, module string) vm.BootProbe {
	boot, _ := kernel.BootID(o.kernel.Proc())
	key := vm.ProbeKey(qemu, k, vm.AccelKVM, "module "+module, "boot "+boot)
	return vm.CachedProbe(filepath.Join(o.libDir, "vm", "kvm-boot-probe.json"), key, func() vm.BootProbe {
		return vm.ProbeBoot(ctx, qemu, k, vm.AccelKVM, bootProbeTimeout)
	})
}

// collectVM answers seed 003's "VM (KVM) vs Docker" question for this
// machine: which module provides KVM (kernel.KVMModule), whether it runs a
// test program (kernel.ProbeKVM: a vCPU executes it in real mode and in
// 64-bit long mode), whether QEMU and a guest kernel are installed and,
// when all are, whether that stock kernel boots under KVM (the boot probe,
// cached). f.VM is runtime vm with accel kvm; f.VMGuest.TCG with accel tcg.
func collectVM(ctx context.Context, o options, f *Facts) error {
	f.VM = Capability{Name: "vm"}
	g := &f.VMGuest
	g.TCG = Capability{Name: "vm tcg"}
	qemu, qerr := o.lookPath("qemu-system-x86_64")
	qemuText := "qemu-system-x86_64 " + qemu
	if qerr != nil {
		qemu = ""
		qemuText = "qemu-system-x86_64 not installed (Debian package qemu-system-x86)"
	}
	g.QEMU = qemu
	g.Virtiofsd, _ = vm.FindVirtiofsd(o.lookPath, func(p string) bool { _, err := os.Stat(p); return err == nil })
	k, kerr := vm.FindKernel(o.bootDir, o.modulesDir)
	if kerr == nil {
		g.GuestKernel = k.Version
	}
	switch {
	case qerr != nil:
		g.TCG.Reason = qemuText
	case kerr != nil:
		g.TCG.Reason = kerr.Error()
	default:
		g.TCG.Usable = true
	}
	kvm := filepath.Join(o.devRoot, "kvm")
	if _, err := os.Stat(kvm); errors.Is(err, os.ErrNotExist) {
		g.KVM = "none"
		f.VM.Reason = fmt.Sprintf("/dev/kvm missing (no KVM: the kernel lacks the kvm module or the machine hides virtualisation from it; a guest would be emulated: accel: tcg, no performance comparison); %s", qemuText)
		return nil
	}
	module := kernel.KVMModule(o.kernel.Sys())
	g.KVMModule = module
	g.KVM = "hardware"
	if module == "kvm_pvm" {
		g.KVM = "pvm"
	}
	p, err := o.kvmProbe(kvm, kvmProbeTimeout)
	if err != nil && !p.VMCreated {
		g.KVM = "unusable"
		f.VM.Reason = fmt.Sprintf("/dev/kvm present but unusable (%v); %s", err, qemuText)
		return nil
	}
	if g.TCG.Usable {
		bp := o.bootProbe(ctx, o, qemu, k, module)
		g.KVMBoot = &bp
	}
	pvm := ""
	if module == "kvm_pvm" {
		pvm = fmt.Sprintf("KVM here is PVM (module kvm_pvm, /dev/kvm API %d: a hypervisor in software for guests nested in a cloud VM without hardware virtualisation), which runs only guest kernels built for PVM, and Debian packages none; ", p.API)
	}
	switch {
	case g.KVMBoot != nil && g.KVMBoot.Boots:
		f.VM.Usable = true
	case g.KVMBoot != nil:
		f.VM.Reason = fmt.Sprintf("%sa stock guest kernel does not boot under KVM: %s", pvm, g.KVMBoot.Reason)
	case pvm != "":
		f.VM.Reason = fmt.Sprintf("%sa stock kernel stops under it with \"KVM internal error ... emulation failure\" (Debian's 6.1 under QEMU 7.2, plans/README.md); %s", pvm, vmMissing(qerr, kerr, qemuText))
	case err != nil:
		f.VM.Reason = fmt.Sprintf("KVM creates a VM (/dev/kvm API %d) but does not run a test guest: %v; %s", p.API, err, vmMissing(qerr, kerr, qemuText))
	default:
		f.VM.Reason = fmt.Sprintf("KVM runs a 64-bit test guest here (/dev/kvm API %d), but %s", p.API, vmMissing(qerr, kerr, qemuText))
	}
	return nil
}

// vmMissing says what a guest lacks besides KVM.
func vmMissing(qerr, kerr error, qemuText string) string {
	switch {
	case qerr != nil && kerr != nil:
		return qemuText + "; " + kerr.Error()
	case qerr != nil:
		return qemuText
	case kerr != nil:
		return kerr.Error()
	}
	return qemuText
}

// write prints the VM facts as doctor's text lines.
func (g VMFacts) write(p func(k, format string, a ...any)) {
	if g.KVM == "" {
		return
	}
	kvm := map[string]string{
		"hardware": "hardware virtualisation",
		"pvm":      "PVM (software, for guests nested in a cloud VM; boots only PVM guest kernels)",
		"none":     "none (no /dev/kvm)",
		"unusable": "/dev/kvm creates no VM",
	}[g.KVM]
	if g.KVMModule != "" {
		kvm += ", module " + g.KVMModule
	}
	p("kvm", "%s", kvm)
	p("qemu", "%s", orText(g.QEMU, "missing (apt-get install qemu-system-x86)"))
	p("guest kernel", "%s", orText(g.GuestKernel, "missing (apt-get install linux-image-amd64)"))
	p("virtiofsd", "%s", orText(g.Virtiofsd, "missing: a guest's disk: virtiofs is not_run (apt-get install virtiofsd)"))
	if b := g.KVMBoot; b != nil {
		how := "probed now"
		if b.Cached {
			how = "cached from " + b.At.Format(time.RFC3339)
		}
		if b.Boots {
			p("stock guest on kvm", "boots (%.1f s, %s)", b.Seconds, how)
		} else {
			p("stock guest on kvm", "does not boot (%s): %s", how, b.Reason)
		}
	}
}

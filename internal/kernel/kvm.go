package kernel

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KVM ioctls and constants (linux/kvm.h, x86).
const (
	kvmGetAPIVersion       = 0xAE00
	kvmCreateVM            = 0xAE01
	kvmGetVCPUMmapSize     = 0xAE04
	kvmCreateVCPU          = 0xAE41
	kvmSetUserMemoryRegion = 0x4020AE46 // _IOW(KVMIO, 0x46, struct kvm_userspace_memory_region)
	kvmRun                 = 0xAE80
	kvmSetRegs             = 0x4090AE82 // _IOW(KVMIO, 0x82, struct kvm_regs)
	kvmGetSregs            = 0x8138AE83 // _IOR(KVMIO, 0x83, struct kvm_sregs)
	kvmSetSregs            = 0x4138AE84 // _IOW(KVMIO, 0x84, struct kvm_sregs)

	kvmExitIO = 2

	kvmRegsSize  = 18 * 8 // rax … r15, rip, rflags
	kvmSregsSize = 312    // 8 segments, gdt, idt, control registers, interrupt bitmap
)

// guestProgram is what the probe's vCPU runs, in real mode at guestCodeAt:
// mov al, 0x42; out 0x10, al; hlt. The OUT is the exit the probe waits for.
var guestProgram = []byte{0xB0, 0x42, 0xE6, 0x10, 0xF4}

const (
	guestCodeAt = 0x1000
	guestPort   = 0x10
	guestByte   = 0x42
)

// KVMProbe is what ProbeKVM found.
type KVMProbe struct {
	API int // KVM_GET_API_VERSION
	// VMCreated: KVM_CREATE_VM succeeded.
	VMCreated bool
	// RealMode and LongMode: a vCPU executed the probe's three
	// instructions and exited to the probe at their OUT within the
	// timeout, in real mode (where a PC starts) and in 64-bit long mode
	// with paging (where a Linux kernel runs).
	RealMode, LongMode bool
}

// ProbeKVM asks the KVM device at path whether it can run a guest, the way
// the KVM API's own first example does: a VM with a little memory, one
// vCPU, a program of three instructions whose OUT must come back to the
// caller; first in real mode, then in long mode with page tables, each on
// a VM of its own. Opening /dev/kvm and creating a VM prove little: on a
// machine that exposes KVM nested under a hypervisor, both succeed, and a
// vCPU may run real-mode code and still never get through a Linux kernel's
// switch to long mode. So each vCPU runs on a thread of its own and is
// interrupted when it has not exited within timeout. The error says which
// step failed; nil means a 64-bit guest ran.
func ProbeKVM(path string, timeout time.Duration) (KVMProbe, error) {
	var p KVMProbe
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if p.API, err = unix.IoctlRetInt(fd, kvmGetAPIVersion); err != nil {
		return p, fmt.Errorf("KVM_GET_API_VERSION: %w", err)
	}
	if err := runGuest(fd, false, timeout, &p.VMCreated); err != nil {
		return p, fmt.Errorf("real mode: %w", err)
	}
	p.RealMode = true
	if err := runGuest(fd, true, timeout, &p.VMCreated); err != nil {
		return p, fmt.Errorf("real mode runs, 64-bit long mode does not: %w", err)
	}
	p.LongMode = true
	return p, nil
}

// Offsets in struct kvm_sregs (8 segments of 24 bytes, gdt, idt, then the
// control registers) and struct kvm_segment.
const (
	sregCS, sregDS, sregES, sregFS, sregGS, sregSS = 0, 24, 48, 72, 96, 120
	sregCR0, sregCR3, sregCR4, sregEFER            = 224, 240, 248, 264
)

// Page tables of the long-mode guest: one 2 MiB page at 0, identity mapped.
const (
	guestPML4, guestPDPT, guestPD = 0x2000, 0x3000, 0x4000
	pagePresent, pageRW, pageUser = 1, 2, 4
	pageSize2M                    = 0x80
	cr0PE, cr0MP, cr0ET, cr0NE    = 1, 2, 0x10, 0x20
	cr0WP, cr0AM, cr0PG           = 0x10000, 0x40000, 0x80000000
	cr4PAE                        = 0x20
	eferLME, eferLMA              = 0x100, 0x400
)

// runGuest creates a VM with 64 KiB of memory and one vCPU, sets it up in
// real mode or in long mode, runs guestProgram and checks its exit.
func runGuest(kvm int, long bool, timeout time.Duration, created *bool) error {
	vm, err := unix.IoctlRetInt(kvm, kvmCreateVM)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	defer unix.Close(vm)
	*created = true

	mem, err := unix.Mmap(-1, 0, 0x10000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("guest memory: %w", os.NewSyscallError("mmap", err))
	}
	defer unix.Munmap(mem)
	copy(mem[guestCodeAt:], guestProgram)
	region := struct {
		slot, flags                  uint32
		guestPhys, size, userAddress uint64
	}{size: uint64(len(mem)), userAddress: uint64(uintptr(unsafe.Pointer(&mem[0])))}
	if err := ioctlPtr(vm, kvmSetUserMemoryRegion, unsafe.Pointer(&region)); err != nil {
		return fmt.Errorf("KVM_SET_USER_MEMORY_REGION: %w", err)
	}
	vcpu, err := unix.IoctlRetInt(vm, kvmCreateVCPU)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VCPU: %w", err)
	}
	defer unix.Close(vcpu)
	runSize, err := unix.IoctlRetInt(kvm, kvmGetVCPUMmapSize)
	if err != nil {
		return fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	run, err := unix.Mmap(vcpu, 0, runSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("vCPU run area: %w", os.NewSyscallError("mmap", err))
	}
	defer unix.Munmap(run)

	var sregs [kvmSregsSize]byte
	if err := ioctlPtr(vcpu, kvmGetSregs, unsafe.Pointer(&sregs[0])); err != nil {
		return fmt.Errorf("KVM_GET_SREGS: %w", err)
	}
	if long {
		setLongMode(mem, sregs[:])
	} else {
		// Real mode with CS at 0, so CS:IP is the program's physical address.
		*(*uint64)(unsafe.Pointer(&sregs[sregCS])) = 0
		*(*uint16)(unsafe.Pointer(&sregs[sregCS+12])) = 0
	}
	if err := ioctlPtr(vcpu, kvmSetSregs, unsafe.Pointer(&sregs[0])); err != nil {
		return fmt.Errorf("KVM_SET_SREGS: %w", err)
	}
	var regs [kvmRegsSize / 8]uint64
	regs[16], regs[17] = guestCodeAt, 0x2 // rip; rflags (bit 1 is always set)
	if long {
		regs[6] = 0x10000 - 8 // rsp: the top of the memory
	}
	if err := ioctlPtr(vcpu, kvmSetRegs, unsafe.Pointer(&regs[0])); err != nil {
		return fmt.Errorf("KVM_SET_REGS: %w", err)
	}

	type result struct{ err error }
	tid := make(chan int, 1)
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the signal below must reach this thread
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		done <- result{ioctlPtr(vcpu, kvmRun, nil)}
	}()
	thread := <-tid
	var res result
	select {
	case res = <-done:
	case <-time.After(timeout):
		// immediate_exit makes a KVM_RUN that has not yet entered the
		// guest return at once; the signal interrupts one that has.
		run[1] = 1
		for i := 0; i < 20; i++ {
			_ = unix.Tgkill(unix.Getpid(), thread, unix.SIGURG) // the Go runtime ignores a stray SIGURG
			select {
			case <-done:
				return fmt.Errorf("the vCPU did not execute 3 instructions in %s", timeout)
			case <-time.After(50 * time.Millisecond):
			}
		}
		return fmt.Errorf("the vCPU did not execute 3 instructions in %s, nor return when interrupted", timeout)
	}
	if res.err != nil {
		return fmt.Errorf("KVM_RUN: %w", res.err)
	}
	exit := *(*uint32)(unsafe.Pointer(&run[8]))
	if exit != kvmExitIO {
		return fmt.Errorf("KVM_RUN: the guest exited with reason %d, not at its OUT (%d)", exit, kvmExitIO)
	}
	// kvm_run.io: direction u8, size u8, port u16, count u32, data_offset u64.
	port := *(*uint16)(unsafe.Pointer(&run[34]))
	off := *(*uint64)(unsafe.Pointer(&run[40]))
	if port != guestPort || off >= uint64(len(run)) || run[off] != guestByte {
		return errors.New("KVM_RUN: the guest's OUT carried the wrong port or byte")
	}
	return nil
}

// setLongMode writes identity page tables into the guest's memory and sets
// the special registers for 64-bit code at ring 0: paging with PAE, long
// mode enabled and active, flat code and data segments.
func setLongMode(mem, sregs []byte) {
	put64 := func(b []byte, off int, v uint64) { *(*uint64)(unsafe.Pointer(&b[off])) = v }
	put64(mem, guestPML4, pagePresent|pageRW|pageUser|guestPDPT)
	put64(mem, guestPDPT, pagePresent|pageRW|pageUser|guestPD)
	put64(mem, guestPD, pagePresent|pageRW|pageUser|pageSize2M)
	put64(sregs, sregCR3, guestPML4)
	put64(sregs, sregCR4, cr4PAE)
	put64(sregs, sregCR0, cr0PE|cr0MP|cr0ET|cr0NE|cr0WP|cr0AM|cr0PG)
	put64(sregs, sregEFER, eferLME|eferLMA)
	seg := func(off int, selector uint16, typ byte, long byte) {
		put64(sregs, off, 0)                                                      // base
		*(*uint32)(unsafe.Pointer(&sregs[off+8])) = 0xffffffff                    // limit
		*(*uint16)(unsafe.Pointer(&sregs[off+12])) = selector                     // selector
		sregs[off+14], sregs[off+15], sregs[off+16], sregs[off+17] = typ, 1, 0, 0 // type, present, dpl, db
		sregs[off+18], sregs[off+19], sregs[off+20] = 1, long, 1                  // s, l, g
	}
	seg(sregCS, 1<<3, 11, 1) // execute/read, accessed; 64-bit
	for _, off := range []int{sregDS, sregES, sregFS, sregGS, sregSS} {
		seg(off, 2<<3, 3, 0) // read/write, accessed
	}
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// KVM modules that provide /dev/kvm, in the order KVMModule reports them:
// the hardware-assisted ones, then PVM.
var kvmModules = []string{"kvm_intel", "kvm_amd", "kvm_pvm"}

// KVMModule is the loaded module that provides /dev/kvm (a directory
// sysRoot/module/<name>): "kvm_intel" or "kvm_amd" (hardware
// virtualisation, VMX or SVM), "kvm_pvm" (PVM, a hypervisor in software
// for guests nested in a cloud VM without hardware virtualisation), or ""
// when none is loaded (or KVM is built into the kernel).
func KVMModule(sysRoot string) string {
	for _, m := range kvmModules {
		if fi, err := os.Stat(sysRoot + "/module/" + m); err == nil && fi.IsDir() {
			return m
		}
	}
	return ""
}

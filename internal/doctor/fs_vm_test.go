package doctor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/kernel"
	"ctrperf/internal/vm"
)

func TestVMWithoutKVM(t *testing.T) {
	dev := t.TempDir()
	o := options{devRoot: dev, lookPath: lookIn(), kvmProbe: kernel.ProbeKVM}
	f := &Facts{}
	if err := collectVM(context.Background(), o, f); err != nil {
		t.Fatal(err)
	}
	if f.VM.Usable || !strings.HasPrefix(f.VM.Reason, "/dev/kvm missing (") || !strings.Contains(f.VM.Reason, "qemu-system-x86_64 not installed") {
		t.Errorf("vm = %+v", f.VM)
	}
	var b bytes.Buffer
	if err := f.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "vm runtime") || !strings.Contains(b.String(), "accel: kvm not available: /dev/kvm missing (") {
		t.Errorf("text:\n%s", b.String())
	}

	// A /dev/kvm that is no KVM device (a plain file) is unusable, said so.
	if err := os.WriteFile(filepath.Join(dev, "kvm"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o.lookPath = lookIn("qemu-system-x86_64")
	if err := collectVM(context.Background(), o, f); err != nil {
		t.Fatal(err)
	}
	if f.VM.Usable || !strings.Contains(f.VM.Reason, "/dev/kvm present but unusable (KVM_GET_API_VERSION") || !strings.Contains(f.VM.Reason, "/usr/bin/qemu-system-x86_64") {
		t.Errorf("vm = %+v", f.VM)
	}
}

// guestKernelRoots are a /boot and /lib/modules holding one guest kernel.
func guestKernelRoots(t *testing.T) (boot, modules string) {
	t.Helper()
	boot, modules = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(boot, "vmlinuz-6.1.0-56-amd64"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(modules, "6.1.0-56-amd64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modules, "6.1.0-56-amd64", "modules.dep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return boot, modules
}

func TestVMProbeOutcomes(t *testing.T) {
	dev := t.TempDir()
	if err := os.WriteFile(filepath.Join(dev, "kvm"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	longErr := errors.New("real mode runs, 64-bit long mode does not: the vCPU did not execute 3 instructions in 2s")
	boots := &vm.BootProbe{Accel: "kvm", Boots: true, Seconds: 1.2}
	stuck := &vm.BootProbe{Accel: "kvm", Reason: "QEMU stopped booting 6.1.0-56-amd64 under -accel kvm: KVM internal error. Suberror: 1"}
	cases := []struct {
		desc    string
		module  string // under /sys/module
		probe   kernel.KVMProbe
		err     error
		kernel  bool          // a guest kernel installed
		boot    *vm.BootProbe // the boot probe's answer; nil: must not be asked
		usable  bool
		kind    string
		want    string
		tcgWant bool
	}{
		{"a VM but no guest runs, no kernel", "kvm_amd", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true}, longErr, false, nil, false, "hardware",
			"KVM creates a VM (/dev/kvm API 12) but does not run a test guest: real mode runs, 64-bit long mode does not", false},
		{"test guests run, no guest kernel", "", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true, LongMode: true}, nil, false, nil, false, "hardware",
			"KVM runs a 64-bit test guest here (/dev/kvm API 12), but no guest kernel", false},
		{"hardware, the stock guest boots", "kvm_intel", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true, LongMode: true}, nil, true, boots, true, "hardware", "", true},
		{"hardware, the stock guest does not boot", "kvm_intel", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true, LongMode: true}, nil, true, stuck, false, "hardware",
			"a stock guest kernel does not boot under KVM: QEMU stopped booting", true},
		// PVM passes the test program and boots no stock kernel (this
		// machine, 2026-11-29): the boot probe says so.
		{"PVM, the stock guest does not boot", "kvm_pvm", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true, LongMode: true}, nil, true, stuck, false, "pvm",
			"KVM here is PVM (module kvm_pvm, /dev/kvm API 12: a hypervisor in software for guests nested in a cloud VM without hardware virtualisation), which runs only guest kernels built for PVM, and Debian packages none; a stock guest kernel does not boot under KVM", true},
		{"PVM without a guest kernel", "kvm_pvm", kernel.KVMProbe{API: 12, VMCreated: true, RealMode: true}, longErr, false, nil, false, "pvm",
			"KVM here is PVM (module kvm_pvm, /dev/kvm API 12: a hypervisor in software for guests nested in a cloud VM without hardware virtualisation), which runs only guest kernels built for PVM, and Debian packages none; a stock kernel stops", false},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			sys := t.TempDir()
			if c.module != "" {
				if err := os.MkdirAll(filepath.Join(sys, "module", c.module), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			boot, modules := t.TempDir(), t.TempDir()
			if c.kernel {
				boot, modules = guestKernelRoots(t)
			}
			var asked string
			bootAsked := 0
			o := options{devRoot: dev, kernel: kernel.NewFS(kernel.Roots{Sys: sys}), lookPath: lookIn("qemu-system-x86_64"), kvmProbe: func(path string, _ time.Duration) (kernel.KVMProbe, error) {
				asked = path
				return c.probe, c.err
			}, bootDir: boot, modulesDir: modules, bootProbe: func(_ context.Context, _ options, qemu string, k vm.Kernel, module string) vm.BootProbe {
				bootAsked++
				if c.boot == nil {
					t.Errorf("boot probe asked (%s, %s, %s) where it cannot run", qemu, k.Version, module)
					return vm.BootProbe{}
				}
				return *c.boot
			}}
			f := &Facts{}
			if err := collectVM(context.Background(), o, f); err != nil {
				t.Fatal(err)
			}
			if asked != filepath.Join(dev, "kvm") || f.VM.Usable != c.usable || !strings.HasPrefix(f.VM.Reason, c.want) {
				t.Errorf("probed %q; vm = %+v, want usable %v and a reason starting %q", asked, f.VM, c.usable, c.want)
			}
			if f.VMGuest.KVM != c.kind || f.VMGuest.KVMModule != c.module || f.VMGuest.TCG.Usable != c.tcgWant {
				t.Errorf("vm facts %+v, want kvm %q module %q tcg %v", f.VMGuest, c.kind, c.module, c.tcgWant)
			}
			if (c.boot != nil) != (bootAsked == 1) || (c.boot != nil) != (f.VMGuest.KVMBoot != nil) {
				t.Errorf("boot probe asked %d times, facts %+v", bootAsked, f.VMGuest.KVMBoot)
			}
			var b bytes.Buffer
			if err := f.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if c.boot != nil && !strings.Contains(b.String(), "stock guest on kvm") {
				t.Errorf("text without the boot probe:\n%s", b.String())
			}
		})
	}
}

// TestProbeKVMOnThisMachine runs the real probe where there is a
// /dev/kvm: it must come back (within its timeouts) with a consistent
// answer, whatever this machine's KVM can do.
func TestProbeKVMOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		t.Skip("no /dev/kvm")
	}
	start := time.Now()
	p, err := kernel.ProbeKVM("/dev/kvm", time.Second)
	t.Logf("probe: %+v, %v (%s)", p, err, time.Since(start))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the probe took %s; each guest is bounded by 1 s and its interruption", took)
	}
	if (err == nil) != p.LongMode || (p.LongMode && !p.RealMode) || (p.RealMode && !p.VMCreated) {
		t.Errorf("inconsistent probe %+v with error %v", p, err)
	}
}

func TestMountOptionsProbe(t *testing.T) {
	probe := func(_ context.Context, fs string, opts []string) (map[string]error, error) {
		out := map[string]error{}
		for _, o := range opts {
			if fs == "xfs" && o == "nobarrier" {
				out[o] = errors.New("the kernel (Linux 6.18) refuses it: invalid argument")
				continue
			}
			if fs == "ext4" && o == "nobarrier" {
				continue // not reached: the probe stopped
			}
			out[o] = nil
		}
		if fs == "ext4" {
			return out, errors.New("unmount probe: busy")
		}
		return out, nil
	}
	f := &Facts{}
	// Not asked: nothing probed.
	if err := collectMountOptions(context.Background(), options{probe: probe, geteuid: func() int { return 0 }}, f); err != nil || len(f.MountOptions) != 0 {
		t.Fatalf("probed without WithMountProbe: %+v %v", f.MountOptions, err)
	}
	if err := collectMountOptions(context.Background(), options{probeMounts: true, probe: probe, geteuid: func() int { return 0 }}, f); err != nil {
		t.Fatal(err)
	}
	got := map[string]Capability{}
	for _, c := range f.MountOptions {
		got[c.Name] = c
	}
	if c := got["xfs nobarrier"]; c.Usable || !strings.Contains(c.Reason, "refuses it") {
		t.Errorf("xfs nobarrier: %+v", c)
	}
	if c := got["ext4 data=writeback"]; !c.Usable {
		t.Errorf("ext4 data=writeback: %+v", c)
	}
	if c := got["ext4 nobarrier"]; c.Usable || !strings.Contains(c.Reason, "not probed: unmount probe: busy") {
		t.Errorf("ext4 nobarrier: %+v", c)
	}
	f = &Facts{}
	if err := collectMountOptions(context.Background(), options{probeMounts: true, probe: probe, geteuid: func() int { return 1000 }}, f); err != nil {
		t.Fatal(err)
	}
	if len(f.MountOptions) == 0 || f.MountOptions[0].Usable || !strings.Contains(f.MountOptions[0].Reason, "needs root") {
		t.Errorf("as a user: %+v", f.MountOptions)
	}
}

// TestPrivileged: --privileged needs every capability in dockerd's
// bounding set; one missing (this machine: CAP_SYS_RESOURCE) is named.
func TestPrivileged(t *testing.T) {
	cases := []struct {
		desc   string
		d      Docker
		usable bool
		want   string
	}{
		{"no engine", Docker{}, false, "no Docker engine answers"},
		{"remote dockerd", Docker{Answers: true}, false, "unknown: the engine's dockerd is not a local process"},
		{"every capability", Docker{Answers: true, DockerdPID: 9, MissingCaps: []string{}}, true, ""},
		{"one missing", Docker{Answers: true, DockerdPID: 9, MissingCaps: []string{"CAP_SYS_RESOURCE"}}, false,
			"dockerd (pid 9) lacks CAP_SYS_RESOURCE in its capability bounding set, and --privileged must grant every capability"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			got := privileged(c.d)
			if got.Name != "privileged" || got.Usable != c.usable || !strings.HasPrefix(got.Reason, c.want) {
				t.Errorf("privileged = %+v, want usable %v and a reason starting %q", got, c.usable, c.want)
			}
		})
	}
}

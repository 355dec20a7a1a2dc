package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"ctrperf/internal/kernel"
)

// DefaultIRQPattern selects network interface queue interrupts by name:
// virtio-net queues (virtioN-input.M / -output.M / -rx / -tx) and the usual
// physical NIC drivers' queue names. It is only used when a pattern is asked
// for explicitly (ListIRQs, `--irq-pattern`): names are guesses, and this
// one also matches non-network virtio devices (virtio-vsock's virtioN-rx/-tx,
// virtio-rng's virtioN-input) and misses a virtio NIC's virtioN-config. The
// default is NetworkIRQs, which asks sysfs which devices are network devices.
const DefaultIRQPattern = `virtio\d+-(input|output|rx|tx)|\b(eth|ens|enp|eno|em|mlx\d*|ixgbe|i40e|ice|bnxt|igb|e1000e?)[\w.-]*`

// IRQ is an interrupt line named in /proc/interrupts.
type IRQ struct {
	Num  int
	Name string // the last column: device / queue name
}

// ListIRQs returns the numbered IRQs of <proc>/interrupts whose name matches re
// (all of them when re is nil). It is the explicit override (a user's
// `--irq-pattern`); the default selection of network IRQs is NetworkIRQs,
// which goes by the devices' drivers rather than by names.
func ListIRQs(kfs kernel.FS, re *regexp.Regexp) ([]IRQ, error) {
	all, err := readInterruptNames(kfs)
	if err != nil {
		return nil, err
	}
	var out []IRQ
	for _, irq := range all {
		if re == nil || re.MatchString(irq.Name) {
			out = append(out, irq)
		}
	}
	return out, nil
}

// readInterruptNames returns the numbered IRQs of <proc>/interrupts.
func readInterruptNames(kfs kernel.FS) ([]IRQ, error) {
	all, err := kernel.Interrupts(kfs.Proc())
	if err != nil {
		return nil, fmt.Errorf("list IRQs: %w", err)
	}
	return interruptNames(all), nil
}

// interruptNames keeps the numbered lines of /proc/interrupts: NMI, LOC,
// ... are not steerable.
func interruptNames(all []kernel.Interrupt) []IRQ {
	var out []IRQ
	for _, irq := range all {
		if n, ok := irq.Number(); ok {
			out = append(out, IRQ{Num: n, Name: irq.Name()})
		}
	}
	return out
}

// ErrIRQNotMoved reports an IRQ whose effective affinity did not follow the
// write (the kernel or the interrupt controller keeps it elsewhere).
var ErrIRQNotMoved = errors.New("kernel did not move the IRQ")

// ProcIRQ reads and writes <proc>/irq/N/smp_affinity_list of Kernel.
type ProcIRQ struct{ Kernel kernel.FS }

// dir is the directory of an IRQ (<proc>/irq/N).
func (p ProcIRQ) dir(irq int) string { return p.Kernel.Proc("irq", strconv.Itoa(irq)) }

// Affinity returns the configured affinity of an IRQ.
func (p ProcIRQ) Affinity(irq int) (cpuset.CPUSet, error) {
	return readCPUList(filepath.Join(p.dir(irq), "smp_affinity_list"))
}

// SetAffinity writes the affinity and verifies it through
// effective_affinity_list: the effective CPUs must be within the requested
// set. It returns the effective set.
func (p ProcIRQ) SetAffinity(irq int, cpus cpuset.CPUSet) (cpuset.CPUSet, error) {
	if cpus.IsEmpty() {
		return cpuset.New(), fmt.Errorf("IRQ %d: refusing an empty affinity", irq)
	}
	if err := kernel.WriteFile(p.dir(irq), "smp_affinity_list", cpus.String()); err != nil {
		return cpuset.New(), err
	}
	eff, err := readCPUList(filepath.Join(p.dir(irq), "effective_affinity_list"))
	if err != nil {
		// Older kernels have no effective_affinity: trust the write.
		if errors.Is(err, os.ErrNotExist) {
			return cpus, nil
		}
		return cpuset.New(), err
	}
	if !eff.IsSubsetOf(cpus) {
		return eff, fmt.Errorf("IRQ %d: asked for %s, effective %s: %w", irq, cpus, eff, ErrIRQNotMoved)
	}
	return eff, nil
}

func readCPUList(path string) (cpuset.CPUSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cpuset.New(), fmt.Errorf("read %s: %w", path, err)
	}
	s, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return cpuset.New(), fmt.Errorf("parse %s %q: %w", path, strings.TrimSpace(string(b)), err)
	}
	return s, nil
}

// SysRPS reads and writes the receive packet steering masks of a network
// device's queues (<sys>/class/net/DEV/queues/rx-N/rps_cpus) of Kernel.
type SysRPS struct {
	Kernel kernel.FS
	NCPU   int // CPUs on the machine, for the mask width
}

// queues is the directory of dev's queues.
func (s SysRPS) queues(dev string) string {
	return filepath.Join(kernel.ClassNetDir(s.Kernel.Sys()), dev, "queues")
}

// Masks returns the rps_cpus of every rx queue of dev, by queue name.
func (s SysRPS) Masks(dev string) (map[string]string, error) {
	qdir := s.queues(dev)
	ents, err := os.ReadDir(qdir)
	if err != nil {
		return nil, fmt.Errorf("list queues of %s: %w", dev, err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "rx-") {
			continue
		}
		p := filepath.Join(qdir, e.Name(), "rps_cpus")
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		out[e.Name()] = strings.TrimSpace(string(b))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no rx queues under %s", dev, qdir)
	}
	return out, nil
}

// SetMask writes one hex mask to an rx queue of dev.
func (s SysRPS) SetMask(dev, queue, mask string) error {
	return kernel.WriteFile(filepath.Join(s.queues(dev), queue), "rps_cpus", mask)
}

// Set points every rx queue of dev at cpus.
func (s SysRPS) Set(dev string, cpus cpuset.CPUSet) error {
	qs, err := s.Masks(dev)
	if err != nil {
		return err
	}
	mask := HexMask(cpus, s.NCPU)
	names := make([]string, 0, len(qs))
	for q := range qs {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		if err := s.SetMask(dev, q, mask); err != nil {
			return err
		}
	}
	return nil
}

// HostVeth finds the host side of a container's eth0: the container's
// /sys/class/net/eth0/iflink (read through /proc/PID/root, where Docker
// mounts a sysfs of the container's network namespace) is the ifindex of
// the peer on the host.
func HostVeth(kfs kernel.FS, pid int) (string, error) {
	// The container's sysfs, seen through its root.
	p := filepath.Join(kernel.ClassNetDir(kfs.Proc(strconv.Itoa(pid), "root", "sys")), "eth0", "iflink")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("container pid %d has no eth0 (host or none network?): %w", pid, err)
	}
	want := strings.TrimSpace(string(b))
	netDir := kernel.ClassNetDir(kfs.Sys())
	ents, err := os.ReadDir(netDir)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", netDir, err)
	}
	for _, e := range ents {
		idx, err := os.ReadFile(filepath.Join(netDir, e.Name(), "ifindex"))
		if err == nil && strings.TrimSpace(string(idx)) == want {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("no host interface with ifindex %s (peer of pid %d's eth0)", want, pid)
}

// CPUSetter changes the cpuset of a container.
type CPUSetter interface {
	CPUs(ctx context.Context, id string) (string, error)
	SetCPUs(ctx context.Context, id string, cpus cpuset.CPUSet) error
}

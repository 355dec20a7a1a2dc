package isolate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"ctrperf/internal/kernel"
)

// NetworkIRQs returns the interrupts of the machine's network devices, the
// default set the controller steers. It asks sysfs rather than guessing from
// names: every interface under <sys>/class/net that has a device behind it
// (virtual ones — lo, veth, bridges, docker0, ifb — have none) contributes
// the interrupts that device allocated: its MSI/MSI-X vectors (msi_irqs/),
// or without any its legacy line (irq). A virtio device has no interrupts of
// its own; they belong to its transport, the PCI function above it.
//
// Only IRQs listed in <proc>/interrupts are returned, since only those can
// be steered; they come sorted by number, each once, named as listed there,
// or "<iface> (<driver>)" when the listing has no name for it.
func NetworkIRQs(kfs kernel.FS) ([]IRQ, error) {
	listed, err := readInterruptNames(kfs)
	if err != nil {
		return nil, err
	}
	names := make(map[int]string, len(listed))
	for _, irq := range listed {
		names[irq.Num] = irq.Name
	}
	netDir := kernel.ClassNetDir(kfs.Sys())
	ents, err := os.ReadDir(netDir)
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	seen := map[int]bool{}
	var out []IRQ
	for _, e := range ents {
		iface := e.Name()
		dev, ok, err := readNetDevice(filepath.Join(netDir, iface))
		if err != nil {
			return nil, fmt.Errorf("network interface %s: %w", iface, err)
		}
		if !ok {
			continue
		}
		for _, n := range dev.irqs {
			name, steerable := names[n]
			if !steerable || seen[n] {
				continue
			}
			seen[n] = true
			if name == "" {
				name = dev.label(iface)
			}
			out = append(out, IRQ{Num: n, Name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Num < out[j].Num })
	return out, nil
}

// netDevice is the hardware behind a network interface.
type netDevice struct {
	driver string // e.g. virtio_net, ixgbe; "" when none is bound
	irqs   []int
}

func (d netDevice) label(iface string) string {
	if d.driver == "" {
		return iface
	}
	return fmt.Sprintf("%s (%s)", iface, d.driver)
}

// readNetDevice resolves the device behind the interface directory ifDir
// (sysfs class/net/IFACE). ok is false for a virtual interface.
func readNetDevice(ifDir string) (dev netDevice, ok bool, err error) {
	link := filepath.Join(ifDir, "device")
	path, err := filepath.EvalSymlinks(link)
	if errors.Is(err, fs.ErrNotExist) {
		return netDevice{}, false, nil
	}
	if err != nil {
		return netDevice{}, false, fmt.Errorf("resolve %s: %w", link, err)
	}
	dev.driver = linkBase(filepath.Join(path, "driver"))
	carrier := path
	// Only a virtio device hands over to its parent: the parent of a PCI
	// NIC is a bridge or root port whose own MSI vectors (AER, PME) are
	// no network interrupts.
	if linkBase(filepath.Join(path, "subsystem")) == "virtio" {
		carrier = filepath.Dir(path)
	}
	if dev.irqs, err = deviceIRQs(carrier); err != nil {
		return netDevice{}, false, err
	}
	return dev, true, nil
}

// deviceIRQs returns the interrupts a device directory has allocated: its
// MSI/MSI-X vectors or, without any, its legacy INTx line.
func deviceIRQs(dir string) ([]int, error) {
	msiDir := filepath.Join(dir, "msi_irqs")
	ents, err := os.ReadDir(msiDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list MSI IRQs: %w", err)
	}
	if len(ents) > 0 {
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		irqs, err := parseMSIIRQs(names)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", msiDir, err)
		}
		return irqs, nil
	}
	p := filepath.Join(dir, "irq")
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read legacy IRQ: %w", err)
	}
	defer f.Close()
	n, err := parseLegacyIRQ(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	if n == 0 {
		return nil, nil
	}
	return []int{n}, nil
}

// parseMSIIRQs reads the entries of a device's msi_irqs directory, one
// file named by each vector's IRQ number.
func parseMSIIRQs(names []string) ([]int, error) {
	out := make([]int, 0, len(names))
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("entry %q is no IRQ number", name)
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out, nil
}

// parseLegacyIRQ reads a device's irq file: its INTx line, 0 for none.
func parseLegacyIRQ(r io.Reader) (int, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is no IRQ number", s)
	}
	return n, nil
}

// linkBase returns the last element of a symlink's target ("" when p is no
// symlink): the name of a device's driver or subsystem.
func linkBase(p string) string {
	target, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

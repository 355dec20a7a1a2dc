package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Interrupt is one line of /proc/interrupts.
//
// prometheus/procfs has the same reader, but only through a process
// directory under the root (Proc.Interrupts, so a fixture root needs a
// self/ link), keeps the counts as strings and panics on a numbered line
// without a chip column; this one reads <root>/interrupts directly.
type Interrupt struct {
	IRQ    string   // "38", "LOC", "ERR" (without the colon)
	Counts []uint64 // per CPU, in the order of the header's CPU columns
	// Info is the interrupt chip on a numbered line ("PCI-MSI", "IO-APIC")
	// and the description on a named one ("Local timer interrupts").
	Info string
	// Devices is the rest of a numbered line: hardware IRQ, trigger and
	// the device or queue names ("2-edge timer", "524288-edge virtio0-input.0").
	Devices string
}

// Number is the IRQ number of a numbered line; ok is false for the named
// ones (NMI, LOC, ...), which cannot be steered.
func (i Interrupt) Number() (n int, ok bool) {
	n, err := strconv.Atoi(i.IRQ)
	return n, err == nil
}

// Name is the last word of the line after the counts: the device or queue
// ("virtio0-input.0", "timer"), or the chip when the line names nothing else.
func (i Interrupt) Name() string {
	f := strings.Fields(i.Info + " " + i.Devices)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// Interrupts reads <procRoot>/interrupts.
func Interrupts(procRoot string) ([]Interrupt, error) {
	f, err := os.Open(filepath.Join(procRoot, "interrupts"))
	if err != nil {
		return nil, fmt.Errorf("read interrupts in %s: %w", procRoot, unwrapPath(err))
	}
	defer f.Close()
	irqs, err := ParseInterrupts(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(procRoot, "interrupts"), err)
	}
	return irqs, nil
}

// ParseInterrupts parses /proc/interrupts: a header of CPU columns, then
// one line per interrupt, in the file's order.
func ParseInterrupts(r io.Reader) ([]Interrupt, error) {
	sc := bufio.NewScanner(r)
	// Lines grow with the CPUs: 11 characters a column.
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("empty file")
	}
	ncpu := len(strings.Fields(sc.Text()))
	var out []Interrupt
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		irq := Interrupt{IRQ: strings.TrimSuffix(fields[0], ":")}
		rest := fields[1:]
		// Named lines such as ERR and MIS have one count, not one per CPU.
		for len(rest) > 0 && len(irq.Counts) < ncpu {
			n, err := strconv.ParseUint(rest[0], 10, 64)
			if err != nil {
				break
			}
			irq.Counts = append(irq.Counts, n)
			rest = rest[1:]
		}
		if _, numbered := irq.Number(); numbered {
			if len(irq.Counts) != ncpu {
				return nil, fmt.Errorf("IRQ %s: %d counts for %d CPUs", irq.IRQ, len(irq.Counts), ncpu)
			}
			if len(rest) > 0 {
				irq.Info, irq.Devices = rest[0], strings.Join(rest[1:], " ")
			}
		} else {
			irq.Info = strings.Join(rest, " ")
		}
		out = append(out, irq)
	}
	return out, sc.Err()
}

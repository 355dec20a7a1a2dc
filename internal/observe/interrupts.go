package observe

import (
	"strings"

	"ctrperf/internal/kernel"
	"ctrperf/internal/results"
)

// interruptSampler computes per-IRQ, per-CPU interrupt rates from
// /proc/interrupts, so a report can say which CPU took the NIC or the block
// device's interrupts.
type interruptSampler struct {
	procRoot string
	prev     map[string][]uint64
}

func newInterruptSampler(procRoot string) *interruptSampler {
	return &interruptSampler{procRoot: procRoot}
}

func (i *interruptSampler) name() string { return "interrupts" }

func (i *interruptSampler) sample(dt float64, s *results.Sample, _ func(string, error)) error {
	irqs, err := kernel.Interrupts(i.procRoot)
	if err != nil {
		return err
	}
	cur := make(map[string][]uint64, len(irqs))
	for _, irq := range irqs {
		cur[interruptKey(irq)] = irq.Counts
	}
	if dt > 0 && i.prev != nil {
		s.Interrupts = perCPURates(i.prev, cur, dt, true)
	}
	i.prev = cur
	return nil
}

// interruptKey names a numbered IRQ "N:device" (the last word of its line,
// e.g. "38:virtio2-input.0") so that a NIC queue or a disk is recognisable
// without /proc/irq; named ones (LOC, RES, ...) keep their name.
func interruptKey(irq kernel.Interrupt) string {
	if _, ok := irq.Number(); !ok {
		return irq.IRQ
	}
	f := strings.Fields(irq.Devices)
	if len(f) == 0 {
		return irq.IRQ
	}
	return irq.IRQ + ":" + f[len(f)-1]
}

// perCPURates turns two readings of per-CPU counters into rates per second.
// With skipIdle, lines that did not move are left out: most IRQs are quiet,
// and a second-by-second series would otherwise be mostly zeros.
func perCPURates(prev, cur map[string][]uint64, dt float64, skipIdle bool) map[string][]float64 {
	out := map[string][]float64{}
	for k, c := range cur {
		p, ok := prev[k]
		if !ok || len(p) != len(c) {
			continue
		}
		rates := make([]float64, len(c))
		moved := false
		for j := range c {
			if c[j] < p[j] {
				continue // counter reset: no rate for this CPU
			}
			rates[j] = float64(c[j]-p[j]) / dt
			moved = moved || c[j] != p[j]
		}
		if moved || !skipIdle {
			out[k] = rates
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

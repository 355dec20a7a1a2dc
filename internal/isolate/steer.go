package isolate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"k8s.io/utils/cpuset"
)

// irqRotation is when and where the IRQs go: one CPU of the shared pool
// each, rotated round-robin every rotate (and at once when the pool
// changes); IRQs the kernel refused are skipped until retry has passed.
type irqRotation struct {
	list          func() ([]IRQ, error)
	rotate, retry time.Duration
	skipped       map[int]string // IRQ -> why it was refused
	skippedAt     time.Time
	step          int
	last          time.Time // last rotation
	pool          string    // the pool at the last step
}

// due says whether the IRQs are to be placed now, and starts the rotation
// when they are.
func (r *irqRotation) due(now time.Time, pool cpuset.CPUSet) bool {
	if len(r.skipped) > 0 && now.Sub(r.skippedAt) >= r.retry {
		r.skipped = map[int]string{}
	}
	return r.last.IsZero() || now.Sub(r.last) >= r.rotate || pool.String() != r.pool
}

func (r *irqRotation) rotated(now time.Time) {
	if !r.last.IsZero() {
		r.step++
	}
	r.last = now
}

func (r *irqRotation) skip(irq int, why string, now time.Time) {
	if len(r.skipped) == 0 {
		r.skippedAt = now
	}
	r.skipped[irq] = why
}

// steerIRQs points the selected IRQs at the shared pool. An IRQ whose
// write the kernel refused, or whose effective affinity did not follow, is
// skipped until IRQRetry (its original stays checkpointed when the write
// landed: smp_affinity_list holds the controller's value).
func (c *Controller) steerIRQs(ctx context.Context, now time.Time, pool cpuset.CPUSet) error {
	r := &c.irqs
	if !r.due(now, pool) {
		return nil
	}
	irqs, err := r.list()
	if err != nil {
		return fmt.Errorf("list IRQs: %w", err)
	}
	r.rotated(now)
	var errs []error
	for i, irq := range irqs {
		if _, skip := r.skipped[irq.Num]; skip {
			continue
		}
		cpu, err := IRQCPU(pool, r.step+i)
		if err != nil {
			return err
		}
		key, want := strconv.Itoa(irq.Num), strconv.Itoa(cpu)
		if c.state.irqs.applied[key] == want {
			continue
		}
		cur, err := c.set.irqs.read(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = applyValue(ctx, c, c.set.irqs, c.state.irqs, change[string]{key: key, cur: cur, want: want,
			event: Event{Kind: "irq", IRQ: irq.Num, Name: irq.Name, Reason: "rotate over the shared pool"}})
		switch {
		case err == nil:
		case errors.Is(err, errStop):
			return err
		case irqRefused(err):
			r.skip(irq.Num, err.Error(), now)
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rpsSteering finds the managed containers' host veths.
type rpsSteering struct {
	veth   func(pid int) (string, error)
	vethOf map[string]string // container -> host veth, "" for none
	masked map[string]string // veth -> the mask all its queues have
}

// dev is m's host veth, "" when it has none (host network, none, or not
// known: no PID).
func (r *rpsSteering) dev(m Managed) string {
	if m.PID <= 0 {
		return ""
	}
	dev, ok := r.vethOf[m.ID]
	if !ok {
		d, err := r.veth(m.PID)
		if err != nil {
			d = "" // host network or none: nothing to steer
		}
		dev, r.vethOf[m.ID] = d, d
	}
	return dev
}

// steerRPS points the RPS mask of every rx queue of m's host veth at the
// shared pool.
func (c *Controller) steerRPS(ctx context.Context, m Managed, pool cpuset.CPUSet) error {
	r := &c.rps
	dev := r.dev(m)
	mask := HexMask(pool, c.cfg.NCPU)
	if dev == "" || r.masked[dev] == mask {
		return nil
	}
	qs, err := c.act.RPS.Masks(dev)
	if err != nil {
		if notExist(err) {
			delete(r.vethOf, m.ID) // gone with its container, or renamed on a restart: look again
			return nil
		}
		return err
	}
	for _, q := range slices.Sorted(maps.Keys(qs)) {
		key := dev + "/" + q
		cur, err := c.set.rps.read(ctx, key)
		if err == nil {
			var ok bool
			ok, err = applyValue(ctx, c, c.set.rps, c.state.rps, change[string]{key: key, cur: cur, want: mask,
				event: Event{Kind: "rps", Container: m.ID, Name: m.Name, Device: key, Reason: "packet steering to the shared pool"}})
			if err == nil && !ok {
				delete(r.vethOf, m.ID)
				return nil
			}
		}
		if err != nil {
			if notExist(err) {
				delete(r.vethOf, m.ID)
				return nil
			}
			return err
		}
	}
	r.masked[dev] = mask
	return nil
}

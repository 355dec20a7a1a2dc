package isolate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ReasonLeftAlone is the reason of a "left_alone" event: the kernel no
// longer holds what the controller wrote, so someone else (docker update,
// irqbalance, an operator) changed the value since and it is theirs.
const ReasonLeftAlone = "changed since, left alone"

// RestoreCheckpoint writes back what cp remembers, through the given
// actuators, where the kernel still holds a value the controller wrote
// (any value, for a checkpoint before version 3, which does not say). A
// value changed since is left alone, with a "left_alone" event; one that
// is already the original, or whose container, IRQ or veth is gone, needs
// nothing. CPU classes are restored before cpusets; on v1 the class's
// weight is written after cpu.idle (leaving the idle class resets it).
func RestoreCheckpoint(ctx context.Context, cp *Checkpoint, a Actuators, emit func(Event)) error {
	return restoreAll(ctx, cp, newSettings(a), emit)
}

// restoreAll is RestoreCheckpoint through the given settings (the
// controller's own: a dry run's write nothing).
func restoreAll(ctx context.Context, cp *Checkpoint, s settings, emit func(Event)) error {
	if cp == nil {
		return nil
	}
	trust := !cp.KnowsWritten()
	var errs []error
	errs = append(errs, restoreKind(ctx, s.classes, cp.classes(), trust, emit)...)
	errs = append(errs, restoreKind(ctx, s.cpusets, cp.cpusets(), trust, emit)...)
	errs = append(errs, restoreKind(ctx, s.irqs, cp.irqs(), trust, emit)...)
	errs = append(errs, restoreKind(ctx, s.rps, cp.rpsMasks(), trust, emit)...)
	return errors.Join(errs...)
}

// restoreKind is the one restore routine of every kind: for each key in
// order, read the current value; leave it alone unless it is one the
// controller wrote (trust: any value is); write the original back.
func restoreKind[V any](ctx context.Context, s setting[V], r record[V], trust bool, emit func(Event)) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(r.orig)) {
		orig := r.orig[key]
		if s.read == nil || s.write == nil {
			errs = append(errs, fmt.Errorf("cannot restore the %s of %s to %s: no writer for it", s.what, key, s.str(orig)))
			continue
		}
		cur, err := s.read(ctx, key)
		if err != nil {
			if s.gone(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("restore the %s of %s: %w", s.what, key, err))
			continue
		}
		if s.same(cur, orig) {
			continue // already its original
		}
		written := r.written[key]
		if !trust && !slices.ContainsFunc(written, func(w V) bool { return s.same(w, cur) }) {
			e := s.event(key)
			e.Kind, e.Old, e.New = "left_alone", s.str(orig), s.str(cur)
			e.Reason = fmt.Sprintf("%s: the %s is %s, not what ctrperf wrote (%s), so its original %s is not put back",
				ReasonLeftAlone, s.what, s.str(cur), joinValues(written, s.str), s.str(orig))
			emit(e)
			continue
		}
		if err := s.write(ctx, key, orig); err != nil && !s.landed(err) {
			if s.gone(err) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		e := s.event(key)
		e.Kind, e.Old, e.New = "restore", s.str(cur), s.str(orig)
		emit(e)
	}
	return errs
}

func joinValues[V any](vs []V, str func(V) string) string {
	if len(vs) == 0 {
		return "nothing"
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = str(v)
	}
	return strings.Join(out, " or ")
}

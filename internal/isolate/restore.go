package isolate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// Actuators are the writers a restore needs; a nil one is an error only if
// the checkpoint holds something for it.
type Actuators struct {
	CPUs  CPUSetter
	Class Demoter
	IRQ   IRQSetter
	RPS   RPSSetter
}

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
	if cp == nil {
		return nil
	}
	trust := !cp.KnowsWritten()
	var errs []error
	errs = append(errs, restoreKind(ctx, classSetting(cp, a.Class), trust, emit)...)
	errs = append(errs, restoreKind(ctx, cpusetSetting(cp, a.CPUs), trust, emit)...)
	errs = append(errs, restoreKind(ctx, irqSetting(cp, a.IRQ), trust, emit)...)
	errs = append(errs, restoreKind(ctx, rpsSetting(cp, a.RPS), trust, emit)...)
	return errors.Join(errs...)
}

// setting is one kind of checkpointed value as a restore sees it: its
// originals and what was written over them, by key, and how to read,
// write, compare and name one.
type setting[V any] struct {
	what    string // "cpuset", "CPU class", "IRQ affinity", "RPS mask"
	orig    map[string]V
	written map[string][]V
	// read and write are nil when there is no actuator for the kind.
	read  func(ctx context.Context, key string) (V, error)
	write func(ctx context.Context, key string, v V) error
	same  func(a, b V) bool
	// gone: the error only means the container, IRQ or veth went away.
	gone  func(err error) bool
	event func(key string) Event // the event naming key
	str   func(V) string
}

// restoreKind is the one restore routine of every kind: for each key in
// order, read the current value; leave it alone unless it is one the
// controller wrote (trust: any value is); write the original back.
func restoreKind[V any](ctx context.Context, s setting[V], trust bool, emit func(Event)) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(s.orig)) {
		orig := s.orig[key]
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
		written := s.written[key]
		if !trust && !slices.ContainsFunc(written, func(w V) bool { return s.same(w, cur) }) {
			e := s.event(key)
			e.Kind, e.Old, e.New = "left_alone", s.str(orig), s.str(cur)
			e.Reason = fmt.Sprintf("%s: the %s is %s, not what ctrperf wrote (%s), so its original %s is not put back",
				ReasonLeftAlone, s.what, s.str(cur), joinValues(written, s.str), s.str(orig))
			emit(e)
			continue
		}
		if err := s.write(ctx, key, orig); err != nil {
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

func ident(s string) string { return s }

func classSetting(cp *Checkpoint, d Demoter) setting[CPUClass] {
	s := setting[CPUClass]{what: "CPU class", orig: cp.Classes, written: cp.Written.Classes, same: CPUClass.Same, gone: gone,
		event: func(id string) Event { return Event{Container: id} }, str: CPUClass.String}
	if d != nil {
		s.read, s.write = d.Class, d.SetClass
	}
	return s
}

func cpusetSetting(cp *Checkpoint, c CPUSetter) setting[string] {
	s := setting[string]{what: "cpuset", orig: cp.CPUSets, written: cp.Written.CPUSets, same: sameCPUs, gone: gone,
		event: func(id string) Event { return Event{Container: id} }, str: ident}
	if c != nil {
		s.read = c.CPUs
		s.write = func(ctx context.Context, id, v string) error {
			set, err := cpuset.Parse(v)
			if err != nil || set.IsEmpty() {
				return fmt.Errorf("checkpoint cpuset of %s is %q: %v", short(id), v, err)
			}
			return c.SetCPUs(ctx, id, set)
		}
	}
	return s
}

func irqSetting(cp *Checkpoint, p IRQSetter) setting[string] {
	num := func(k string) int { n, _ := strconv.Atoi(k); return n }
	s := setting[string]{what: "IRQ affinity", orig: cp.IRQs, written: cp.Written.IRQs, same: sameCPUs,
		gone:  func(err error) bool { return errors.Is(err, os.ErrNotExist) }, // the IRQ went away with its device
		event: func(k string) Event { return Event{IRQ: num(k)} }, str: ident}
	if p != nil {
		s.read = func(_ context.Context, k string) (string, error) {
			set, err := p.Affinity(num(k))
			return set.String(), err
		}
		s.write = func(_ context.Context, k, v string) error {
			set, err := cpuset.Parse(v)
			if err != nil || set.IsEmpty() {
				return fmt.Errorf("checkpoint affinity of IRQ %s is %q: %v", k, v, err)
			}
			if _, err := p.SetAffinity(num(k), set); err != nil && !errors.Is(err, ErrIRQNotMoved) {
				return err
			}
			return nil
		}
	}
	return s
}

func rpsSetting(cp *Checkpoint, r RPSSetter) setting[string] {
	split := func(k string) (dev, q string) {
		dev, q = filepath.Split(k)
		return filepath.Clean(dev), q
	}
	s := setting[string]{what: "RPS mask", orig: cp.RPS, written: cp.Written.RPS, same: sameMask,
		gone:  func(err error) bool { return errors.Is(err, os.ErrNotExist) }, // the veth went away with its container
		event: func(k string) Event { return Event{Device: k} }, str: ident}
	if r != nil {
		s.read = func(_ context.Context, k string) (string, error) {
			dev, q := split(k)
			m, err := r.Masks(dev)
			if err != nil {
				return "", err
			}
			v, ok := m[q]
			if !ok {
				return "", fmt.Errorf("%s has no queue %s: %w", dev, q, os.ErrNotExist)
			}
			return v, nil
		}
		s.write = func(_ context.Context, k, v string) error {
			dev, q := split(k)
			return r.SetMask(dev, q, v)
		}
	}
	return s
}

package isolate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"
)

// place brings every container's cpuset and CPU class to its placement. A
// checkpoint that cannot be saved stops it at once (errStop).
func (c *Controller) place(ctx context.Context, start time.Time, d Decision) error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(d.Placements)) {
		pl := d.Placements[id]
		for _, apply := range []func(context.Context, time.Time, Placement) error{c.placeCPUSet, c.placeClass} {
			if err := apply(ctx, start, pl); errors.Is(err, errStop) {
				return err
			} else if err != nil {
				errs = append(errs, err)
			}
		}
		c.metrics.placement(id, pl, c.sample.usage[id], c.sample.stall[id])
	}
	return errors.Join(errs...)
}

// placeCPUSet brings a container's cpuset to its placement: the CPUs it
// was given, or its own again (the original) when it has none. It re-reads
// what is there when it has written something: a value it did not write
// is the container's new original (drifted).
func (c *Controller) placeCPUSet(ctx context.Context, start time.Time, pl Placement) error {
	id, t, s := pl.ContainerID, c.state.cpusets, c.set.cpusets
	_, known := t.applied[id]
	if s.read == nil || (pl.CPUs.IsEmpty() && !known) {
		return nil // no cpuset writer (kubelet's), or its own cpuset, never touched
	}
	ev := Event{Kind: "cpuset", Container: id, Name: pl.Name, Reason: pl.Reason}
	cur, ok, err := observe(ctx, c, s, t, ev)
	if !ok {
		return err
	}
	_, known = t.applied[id]
	ch := change[string]{key: id, cur: cur, want: pl.CPUs.String(), event: ev, start: start}
	if pl.CPUs.IsEmpty() {
		orig, recorded := t.orig[id]
		if !known || !recorded {
			delete(t.applied, id) // what it has is its own
			return nil
		}
		ch.want, ch.toOriginal = orig, true
		ch.event.Reason = "back to its own cpuset: " + pl.Reason
	}
	if cur == ch.want {
		if !ch.toOriginal {
			t.applied[id] = ch.want
		}
		return nil
	}
	_, err = applyValue(ctx, c, s, t, ch)
	return err
}

// placeClass demotes or undemotes a container's CPU class, with the same
// drift rule as placeCPUSet.
func (c *Controller) placeClass(ctx context.Context, start time.Time, pl Placement) error {
	id, t, s := pl.ContainerID, c.state.classes, c.set.classes
	_, known := t.applied[id]
	if s.read == nil || (!pl.Demote && !known) {
		return nil
	}
	ev := Event{Kind: "demote", Container: id, Name: pl.Name, Reason: pl.Reason}
	cur, ok, err := observe(ctx, c, s, t, ev)
	if !ok {
		return err
	}
	_, known = t.applied[id]
	orig, ours := t.orig[id]
	ch := change[CPUClass]{key: id, cur: cur, event: ev, start: start}
	weight := c.cfg.Params.DemoteClass == DemoteWeight
	switch {
	case pl.Demote && cur.IsDemoted(weight) && (known || !ours):
		return nil // demoted by us already, or by its owner: not ours to change or restore
	case pl.Demote && ours:
		ch.want = orig.Demoted(weight)
	case pl.Demote:
		ch.want = cur.Demoted(weight)
	case !ours:
		delete(t.applied, id)
		return nil
	default:
		ch.want, ch.toOriginal, ch.event.Kind = orig, true, "undemote"
	}
	_, err = applyValue(ctx, c, s, t, ch)
	return err
}

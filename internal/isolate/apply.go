package isolate

import (
	"context"
	"fmt"
	"time"
)

// change is one write of a checkpointed value.
type change[V any] struct {
	key       string
	cur, want V
	// toOriginal: want is key's original, which is forgotten once it is
	// written back (a container back to its own cpuset, undemoted).
	toOriginal bool
	// event reports the write: its kind, subject and reason; Old and New
	// are filled in.
	event Event
	start time.Time // the step that decided (for ApplyMs); zero: none
}

// applyValue is the one routine every checkpointed write goes through,
// whatever the kind. Unless the value goes back to its original, cur is
// remembered as the original (when none is known) and want noted as
// written, and the checkpoint saved, before the write: nothing is changed
// that could not be restored. Then it writes, and keeps want as applied
// or, back at the original, forgets the key. A write that failed changed
// nothing: an original remembered for it alone is dropped again. A failure
// is counted and reported (kind "error", or "<kind>_skipped" for a refusal
// the caller skips); one that only means the container, IRQ or veth went
// away is none, and ok is false.
func applyValue[V any](ctx context.Context, c *Controller, s setting[V], t tracked[V], ch change[V]) (ok bool, err error) {
	fresh := false
	if !ch.toOriginal {
		fresh = t.remember(ch.key, ch.cur)
		if t.noteWrite(ch.key, ch.cur, ch.want) || fresh {
			if err := c.state.save(); err != nil {
				return false, err
			}
		}
	}
	if err := s.write(ctx, ch.key, ch.want); err != nil {
		if s.gone(err) {
			return false, nil // removed while we decided: churn, not a failure
		}
		if fresh && !s.landed(err) {
			t.forget(ch.key) // nothing changed: nothing to restore
			if err := c.state.save(); err != nil {
				return false, err
			}
		}
		c.metrics.writeFailure(s.label)
		e := ch.event
		e.Kind, e.Old, e.New, e.Reason = "error", "", s.str(ch.want), err.Error()
		if s.skip != nil && s.skip(err) {
			e.Kind = ch.event.Kind + "_skipped"
		}
		c.emit(e)
		return false, err
	}
	if ch.toOriginal {
		t.forget(ch.key)
		if err := c.state.save(); err != nil {
			return false, err
		}
	} else {
		t.applied[ch.key] = ch.want
	}
	e := ch.event
	e.Old, e.New = s.str(ch.cur), s.str(ch.want)
	if !ch.start.IsZero() {
		e.ApplyMs = float64(c.clock().Sub(ch.start).Microseconds()) / 1000
	}
	c.emit(e)
	return true, nil
}

// observe reads a container's value of a kind the controller tracks. A
// value it applied that the kernel no longer holds was written by someone
// else (Docker on a restart or update, an operator): it becomes the
// container's new original, checkpointed before anything is applied again,
// and nothing of the controller's is left there. ok is false when the value
// cannot be read (err is nil when the container is gone) or the checkpoint
// not saved.
func observe[V any](ctx context.Context, c *Controller, s setting[V], t tracked[V], ev Event) (cur V, ok bool, err error) {
	key := ev.Container
	cur, err = s.read(ctx, key)
	if err != nil {
		if s.gone(err) {
			return cur, false, nil
		}
		return cur, false, fmt.Errorf("read %s of %s: %w", s.what, ev.Name, err)
	}
	applied, known := t.applied[key]
	if !known || s.same(cur, applied) {
		return cur, true, nil
	}
	ev.Kind, ev.Old, ev.New = "drift", s.str(applied), s.str(cur)
	ev.Reason = s.what + " changed by someone else (restart, docker update): taken as its original"
	c.emit(ev)
	t.rebase(key, cur)
	if err := c.state.save(); err != nil {
		return cur, false, err
	}
	return cur, true, nil
}

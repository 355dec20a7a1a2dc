package isolate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// record is one kind of checkpointed value as the checkpoint holds it: the
// original of each key and what the controller wrote over it. A kind the
// Kubernetes runtime adds is one more record of the checkpoint.
type record[V any] struct {
	orig    map[string]V
	written map[string][]V
	same    func(a, b V) bool
}

// remember records key's original unless one is known; it reports whether
// the record changed.
func (r record[V]) remember(key string, orig V) bool {
	if _, ok := r.orig[key]; ok {
		return false
	}
	r.orig[key] = orig
	return true
}

// noteWrite makes v the value last written to key, keeping cur as well
// when it is one the controller wrote: the checkpoint is saved before the
// write, and until the write lands cur is what the kernel holds. It
// reports whether the record changed.
func (r record[V]) noteWrite(key string, cur, v V) bool {
	old := r.written[key]
	next := []V{v}
	if !r.same(cur, v) && slices.ContainsFunc(old, func(w V) bool { return r.same(w, cur) }) {
		next = append(next, cur)
	}
	r.written[key] = next
	return !slices.EqualFunc(old, next, r.same)
}

// forget drops key's original and what was written; it reports whether
// there was an original.
func (r record[V]) forget(key string) bool {
	_, ok := r.orig[key]
	delete(r.orig, key)
	delete(r.written, key)
	return ok
}

// rebase takes cur, a value someone else wrote over the controller's, as
// key's original: nothing of the controller's is left there.
func (r record[V]) rebase(key string, cur V) {
	r.orig[key] = cur
	delete(r.written, key)
}

// tracked is a record with, in memory, the value the controller last
// applied to each key and expects to find there still.
type tracked[V any] struct {
	record[V]
	applied map[string]V
}

func newTracked[V any](r record[V]) tracked[V] { return tracked[V]{record: r, applied: map[string]V{}} }

func (t tracked[V]) forget(key string) bool {
	delete(t.applied, key)
	return t.record.forget(key)
}

func (t tracked[V]) rebase(key string, cur V) {
	delete(t.applied, key)
	t.record.rebase(key, cur)
}

// state is everything the controller has changed in the kernel, after
// kubelet's cpumanager state_checkpoint.go: a checkpoint of the originals
// and what was written over them, saved (save) after every change to it and
// before the write it guards, and what is applied now. Every checkpointed
// write goes through applyValue (apply.go).
type state struct {
	ckpt *Checkpoint
	path string // where the checkpoint is saved; "": in memory only (a dry run, a test)

	cpusets tracked[string]   // container id -> cpuset.cpus
	classes tracked[CPUClass] // container id -> CPU class
	irqs    tracked[string]   // IRQ number -> smp_affinity_list
	rps     tracked[string]   // "dev/rx-N" -> rps_cpus
}

// newState starts an empty checkpoint at path.
func newState(path string, now time.Time) *state {
	s := &state{path: path}
	s.reset(NewCheckpoint(now))
	return s
}

// reset starts over from cp with nothing applied.
func (s *state) reset(cp *Checkpoint) {
	s.ckpt = cp
	s.cpusets, s.classes = newTracked(cp.cpusets()), newTracked(cp.classes())
	s.irqs, s.rps = newTracked(cp.irqs()), newTracked(cp.rpsMasks())
}

// errStop wraps a failure to checkpoint: nothing may be changed that could
// not be remembered first.
var errStop = errors.New("checkpoint not saved: changing nothing")

// save writes the checkpoint; a failure wraps errStop.
func (s *state) save() error {
	if s.path == "" {
		return nil
	}
	if err := s.ckpt.Save(s.path); err != nil {
		return fmt.Errorf("%w: %w", errStop, err)
	}
	return nil
}

// remove deletes the saved checkpoint (everything in it was restored).
func (s *state) remove() error {
	if s.path == "" {
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// forgetContainer drops what is known of a container that is gone (its
// cgroup and what was written to it went with it); it reports whether the
// checkpoint changed.
func (s *state) forgetContainer(id string) bool {
	a := s.cpusets.forget(id)
	b := s.classes.forget(id)
	return a || b
}

// containers are the containers the state holds anything for.
func (s *state) containers() []string {
	var ids []string
	for _, m := range []map[string]string{s.cpusets.orig, s.cpusets.applied} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	for _, m := range []map[string]CPUClass{s.classes.orig, s.classes.applied} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	return ids
}

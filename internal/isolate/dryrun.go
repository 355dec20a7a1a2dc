package isolate

import "context"

// dryRun is the dry-run actuator of a kind: it writes nothing to the
// kernel, keeps each write in memory over the value it replaced, and reads
// it back for as long as the kernel still holds that value. A dry run so
// decides and logs as a real run would (no drift it caused itself, a
// container put back to its own once), and someone else's change (a
// restart, docker update) still shows.
func dryRun[V any](s setting[V]) setting[V] {
	if s.read == nil || s.write == nil {
		return s
	}
	type over struct{ under, v V }
	shadow := map[string]over{}
	read := s.read
	s.read = func(ctx context.Context, key string) (V, error) {
		cur, err := read(ctx, key)
		if err != nil {
			return cur, err
		}
		if o, ok := shadow[key]; ok {
			if s.same(cur, o.under) {
				return o.v, nil
			}
			delete(shadow, key) // changed by someone else since
		}
		return cur, nil
	}
	s.write = func(ctx context.Context, key string, v V) error {
		cur, err := read(ctx, key)
		if err != nil {
			return err
		}
		if s.same(cur, v) {
			delete(shadow, key)
		} else {
			shadow[key] = over{under: cur, v: v}
		}
		return nil
	}
	return s
}

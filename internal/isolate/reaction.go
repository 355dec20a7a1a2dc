package isolate

import "time"

// saturation times the controller's reaction: per container in a
// saturated streak, or hot and not yet acted on, when its streak began.
type saturation map[string]time.Time

// track notes when each container's saturated streak began (from: the
// start of its interval) and forgets streaks that broke off before the
// container turned hot, or that ended with it turning normal.
func (s saturation) track(prev, next State, from map[string]time.Time) {
	for id, st := range next {
		p := prev[id]
		switch {
		case st.HotStreak > 0 && p.HotStreak == 0 && !p.Hot:
			if t, ok := from[id]; ok {
				s[id] = t
			}
		case !st.Hot && st.HotStreak == 0:
			delete(s, id)
		}
	}
	for id := range s {
		if _, ok := next[id]; !ok {
			delete(s, id)
		}
	}
}

// reaction ends a hot container's streak at the first change applied to
// it (a cpuset or a demotion, not in a dry run) and returns how long it
// took.
func (s saturation) reaction(e Event, hot bool) (time.Duration, bool) {
	since, ok := s[e.Container]
	if !ok || e.DryRun || (e.Kind != "cpuset" && e.Kind != "demote") || !hot {
		return 0, false
	}
	delete(s, e.Container)
	return e.Time.Sub(since), true
}

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
	if !ok || !isReaction(e) || !hot {
		return 0, false
	}
	delete(s, e.Container)
	return e.Time.Sub(since), true
}

// isReaction says whether e changed what a container runs on: a cpuset
// or a demotion applied, not in a dry run.
func isReaction(e Event) bool { return (e.Kind == "cpuset" || e.Kind == "demote") && !e.DryRun }

// ReactionTime is how long the controller took to react to a hot phase:
// from hotStart to the first change applied to one of the hot containers
// at or after hotStart (a cpuset or demote event, not a dry run). ok is
// false when there was none: a reaction that did not happen is no number.
func ReactionTime(events []Event, hot map[string]bool, hotStart time.Time) (d time.Duration, ok bool) {
	for _, e := range events {
		if !isReaction(e) || !hot[e.Container] || e.Time.Before(hotStart) {
			continue
		}
		if !ok || e.Time.Sub(hotStart) < d {
			d, ok = e.Time.Sub(hotStart), true
		}
	}
	return d, ok
}

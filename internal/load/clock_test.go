package load

import (
	"testing"
	"time"
	"unsafe"

	"ctrperf/internal/results"
)

// wallStepped is t as time.Now returns it after the system clock was
// stepped by step (NTP, an administrator): the wall reading moved, the
// monotonic reading did not. Go offers no way to build such a reading, so
// this sets the seconds of the wall field (bits 30..62 when the
// monotonic bit is set); the caller checks the result.
func wallStepped(t *testing.T, now time.Time, step time.Duration) time.Time {
	t.Helper()
	if step%time.Second != 0 || now.Round(0) == now {
		t.Fatal("wallStepped needs whole seconds and a reading with a monotonic clock")
	}
	s := now
	wall := (*uint64)(unsafe.Pointer(&s))
	*wall += uint64(int64(step/time.Second)) << 30
	if s.Sub(now) != 0 || s.Round(0).Sub(now.Round(0)) != step {
		t.Fatalf("could not build a stepped reading (time.Time's layout changed?): mono %v, wall %v",
			s.Sub(now), s.Round(0).Sub(now.Round(0)))
	}
	return s
}

// TestClosedLoopEndIgnoresWallClockSteps: the closed loop's elapsed time
// (and so its throughput) is a difference of monotonic readings: a step of
// the wall clock between the window's start and the last session's end
// changes neither (the end was kept as UnixNano, a wall time).
func TestClosedLoopEndIgnoresWallClockSteps(t *testing.T) {
	tests := []struct {
		desc string
		step time.Duration
	}{
		{"no step", 0},
		{"the clock jumps an hour ahead", time.Hour},
		{"the clock is set back a day", -24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := &fakeDriver{}
			r := newRunner(d, Profile{Concurrency: 1, Duration: time.Second}.withDefaults(), d.Labels())
			c := r.startClosed()
			end := r.mStart.Add(700 * time.Millisecond)
			if tc.step != 0 {
				end = wallStepped(t, end, tc.step)
			}
			c.done(end)
			c.finish()
			m, err := r.measurement()
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Metrics[results.MetricElapsed]; got != 0.7 {
				t.Errorf("elapsed %v s, want 0.7 whatever the wall clock did", got)
			}
		})
	}
}

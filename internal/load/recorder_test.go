package load

import (
	"testing"
	"time"
)

// The timeline buckets requests by the second of the window they completed
// in; start is moved back instead of waiting, so the test has no timing.
func TestRecorderPerSecond(t *testing.T) {
	r := newRecorder([]string{"get", "set"})
	r.start = time.Now().Add(-1500 * time.Millisecond) // now is in second 1
	for i := 0; i < 99; i++ {
		r.Observe("get", 2*time.Millisecond, 10, "")
	}
	r.Observe("set", 40*time.Millisecond, 0, "timeout")
	r.Observe("get", time.Millisecond, 0, KindNotStarted) // no latency, not in the timeline
	r.start = r.start.Add(-2 * time.Second)               // now is in second 3
	r.Observe("get", 5*time.Millisecond, 0, "")

	secs := r.perSecond(10)
	if len(secs) != 4 {
		t.Fatalf("seconds = %+v, want 4 (0 to 3)", secs)
	}
	if s := secs[0]; s.Count != 0 || s.T != 1 || s.P99Ms != 0 {
		t.Errorf("second 0 = %+v, want empty", s)
	}
	s := secs[1]
	if s.Count != 100 || s.Errors != 1 || s.T != 2 {
		t.Errorf("second 1 = %+v, want 100 requests, 1 error", s)
	}
	if s.P50Ms < 1.8 || s.P50Ms > 2.2 || s.P99Ms < 1.8 || s.P99Ms > 2.2 || s.MaxMs < 37 || s.MaxMs > 43 {
		t.Errorf("second 1 latencies = %+v, want p50 ≈ p99 ≈ 2 ms, max ≈ 40 ms", s)
	}
	if s := secs[3]; s.Count != 1 || s.P50Ms < 4.5 || s.P50Ms > 5.5 {
		t.Errorf("second 3 = %+v", s)
	}
	// Seconds that start after the window (the drain) are left out.
	if got := len(r.perSecond(2.5)); got != 3 {
		t.Errorf("window 2.5 s keeps %d seconds, want 3", got)
	}
}

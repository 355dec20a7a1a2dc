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

// Shards merged give what one recorder of every observation gives.
func TestRecorderShardsMerge(t *testing.T) {
	start := time.Now().Add(-1500 * time.Millisecond)
	whole := newRecorder([]string{"get"})
	whole.start = start
	a, b := whole.shard(), whole.shard()
	whole2 := newRecorder([]string{"get"})
	whole2.start = start
	obs := []struct {
		rec     *recorder
		latency time.Duration
		kind    string
	}{{a, time.Millisecond, ""}, {b, 3 * time.Millisecond, ""}, {a, 9 * time.Millisecond, KindTimeout}, {b, 2 * time.Millisecond, kindCanceled}}
	for _, o := range obs {
		o.rec.Observe("get", o.latency, 7, o.kind)
		whole2.Observe("get", o.latency, 7, o.kind)
	}
	whole.merge(a)
	whole.merge(b)
	got, gotOK, gotTotal, err := whole.operations()
	if err != nil {
		t.Fatal(err)
	}
	want, wantOK, wantTotal, err := whole2.operations()
	if err != nil {
		t.Fatal(err)
	}
	g, w := got["get"], want["get"]
	if gotOK != wantOK || gotTotal != wantTotal || g.Count != w.Count || g.Bytes != w.Bytes || g.Histogram != w.Histogram ||
		g.Errors[KindTimeout] != 1 || whole.canceled.Load() != 1 {
		t.Errorf("merged %+v (ok %d of %d), want %+v (ok %d of %d)", g, gotOK, gotTotal, w, wantOK, wantTotal)
	}
	gs, ws := whole.perSecond(10), whole2.perSecond(10)
	if len(gs) != len(ws) || gs[1] != ws[1] {
		t.Errorf("merged timeline %+v, want %+v", gs, ws)
	}
}

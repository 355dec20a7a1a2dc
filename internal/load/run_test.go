package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeDriver hands out VUs that finish every session at once and remember
// the sessions they ran.
type fakeDriver struct {
	mu       sync.Mutex
	sessions []Session
}

func (d *fakeDriver) Labels() []string { return []string{"op"} }

func (d *fakeDriver) NewVU(int) (VU, error) { return fakeVU{d: d}, nil }

// ran counts the sessions whose intended start lies at or after from.
func (d *fakeDriver) ran(from time.Time) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for _, s := range d.sessions {
		if !s.Due.Before(from) {
			n++
		}
	}
	return n
}

type fakeVU struct{ d *fakeDriver }

func (v fakeVU) Run(_ context.Context, s Session, rec Recorder) bool {
	v.d.mu.Lock()
	v.d.sessions = append(v.d.sessions, s)
	v.d.mu.Unlock()
	rec.Observe("op", time.Since(s.Due), 0, "")
	return true
}

func (fakeVU) Close() error { return nil }

func TestGeneratorLatenessIsRecordedPerMeasuredSession(t *testing.T) {
	tests := []struct {
		desc string
		p    Profile
		// want is the number of measured sessions when the schedule fixes
		// it (fixed gaps), 0 when only the dispatched ones can be counted.
		want     int64
		lateness bool // open loop: lateness fields expected
	}{
		// 200/s for 250 ms after a 100 ms warm-up: arrivals at i/200 s,
		// so exactly 50 fall in the measured window whatever the timing.
		{"open loop, fixed gaps: warm-up sessions are not counted",
			Profile{Rate: 200, Warmup: 100 * time.Millisecond, Duration: 250 * time.Millisecond, Timeout: time.Second}, 50, true},
		{"open loop, Poisson arrivals, no warm-up",
			Profile{Rate: 200, Poisson: true, Seed: 7, Duration: 200 * time.Millisecond, Timeout: time.Second}, 0, true},
		{"closed loop has no intended start: no lateness",
			Profile{Concurrency: 2, Duration: 50 * time.Millisecond, Timeout: time.Second}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := &fakeDriver{}
			p := tc.p.withDefaults()
			r := newRunner(d, p, d.Labels())
			var err error
			if p.Rate > 0 {
				err = r.open(context.Background())
			} else {
				err = r.closed(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := r.measurement()
			if err != nil {
				t.Fatal(err)
			}
			ld := m.Load
			if !tc.lateness {
				if r.lateness.TotalCount() != 0 || ld.LatenessP50Ms != 0 || ld.LatenessP99Ms != 0 || ld.LatenessMaxMs != 0 {
					t.Errorf("closed loop recorded lateness: %d values, load %+v", r.lateness.TotalCount(), ld)
				}
				return
			}
			measured := d.ran(r.mStart)
			if tc.want > 0 && measured != tc.want {
				t.Fatalf("driver ran %d measured sessions, want %d", measured, tc.want)
			}
			if got := r.lateness.TotalCount(); got != measured || got != r.started || got == 0 {
				t.Errorf("lateness histogram has %d values; want one per measured session (%d ran, %d started)", got, measured, r.started)
			}
			if ld.LatenessMaxMs <= 0 || ld.LatenessP50Ms > ld.LatenessP99Ms || ld.LatenessP99Ms > ld.LatenessMaxMs {
				t.Errorf("lateness p50 %v p99 %v max %v ms: want 0 < p50 <= p99 <= max", ld.LatenessP50Ms, ld.LatenessP99Ms, ld.LatenessMaxMs)
			}
		})
	}
}

func TestRunReportsLatenessForOpenLoop(t *testing.T) {
	m, err := Run(context.Background(), &fakeDriver{}, Profile{Rate: 100, Duration: 100 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if m.Load.Mode != "open" || m.Load.LatenessMaxMs <= 0 || m.Load.LatenessP99Ms > m.Load.LatenessMaxMs {
		t.Errorf("load %+v: want open loop with lateness p99 <= max, max > 0", m.Load)
	}
}

// TestRunLive checks that the live counts a progress display reads add up
// to what the measurement recorded, warm-up included.
func TestRunLive(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	d, err := NewHTTP(HTTPConfig{BaseURL: srv.URL + "/missing"})
	if err != nil {
		t.Fatal(err)
	}
	var live Live
	if live.Snapshot() != (LiveSnapshot{}) {
		t.Fatal("a new Live is not empty")
	}
	m, err := Run(context.Background(), d, Profile{Concurrency: 2, Ops: 50, Warmup: 0, Live: &live})
	if err != nil {
		t.Fatal(err)
	}
	s := live.Snapshot()
	var count, errs int64
	for _, op := range m.Operations {
		count += op.Count
		errs += op.ErrorCount()
	}
	if !s.Measuring || s.Requests != count || s.Errors != errs || s.Errors == 0 || s.Sessions < 50 {
		t.Errorf("live %+v, measured %d requests with %d errors in at least 50 sessions", s, count, errs)
	}
}

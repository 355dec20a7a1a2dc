package load

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestArrivalsClampHugeGaps: a gap that overflows a time.Duration (1e-11
// sessions per second is one every 3 000 years) is "never", not a
// negative offset that puts every later arrival in the past.
func TestArrivalsClampHugeGaps(t *testing.T) {
	tests := []struct {
		desc    string
		rate    float64
		poisson bool
	}{
		{"fixed gaps", 1e-11, false},
		{"Poisson gaps", 1e-11, true},
		{"a NaN rate that slipped past validation", math.NaN(), false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			a := newArrivals(tc.rate, tc.poisson, 1)
			prev := a.next()
			for i := 0; i < 5; i++ {
				d := a.next()
				if d < 0 || d < prev {
					t.Fatalf("arrival %d at %v after %v: offsets must not go backwards", i+1, d, prev)
				}
				prev = d
			}
			if prev != never {
				t.Errorf("last offset %v, want never", prev)
			}
		})
	}
}

// TestOpenLoopEndsWithATinyRate: the generator itself (validation
// bypassed) ends a window whose second arrival is out of reach, instead of
// starting sessions without end (`ctrperf load --rate 1e-11` never
// ended).
func TestOpenLoopEndsWithATinyRate(t *testing.T) {
	d := &fakeDriver{}
	p := Profile{Rate: 1e-11, Duration: 200 * time.Millisecond, Timeout: time.Second}.withDefaults()
	r := newRunner(d, p, d.Labels())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.open(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatal("the open loop did not end within 5 s of a 200 ms window")
	}
	if n := len(d.sessions); n != 1 {
		t.Errorf("%d sessions, want only the first arrival's", n)
	}
}

// TestOpenLoopStopsPromptlyOnCancel: cancellation ends the run within a
// moment whether the schedule waits for an arrival far away or is always
// behind (no wait at all, where the loop used to look at ctx never).
func TestOpenLoopStopsPromptlyOnCancel(t *testing.T) {
	tests := []struct {
		desc string
		rate float64
	}{
		{"the next arrival is 1000 s away", MinRate},
		{"the schedule is always behind", MaxRate},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := Run(ctx, &fakeDriver{}, Profile{Rate: tc.rate, Duration: time.Hour, Timeout: time.Second})
				done <- err
			}()
			time.Sleep(50 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run = %v, want context.Canceled", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Run did not return within 2 s of the cancellation")
			}
		})
	}
}

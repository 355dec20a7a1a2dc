package load

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestArrivalsRamp: a ramp moves the constant-rate schedule's arrivals,
// in the same order, so that the rate rises linearly from 0 over the ramp
// (half a ramp's worth of arrivals during it) and is the full rate after.
func TestArrivalsRamp(t *testing.T) {
	const rate, ramp = 100.0, 2.0 // per second, seconds
	// Expected: rate·ramp/2 = 100 arrivals during the ramp, rate·ramp/32
	// ≈ 6 in its first quarter, rate per second after it; each count's
	// accepted range is [lo, hi].
	tests := []struct {
		desc                   string
		poisson                bool
		during, quarter, after [2]int
	}{
		{"fixed gaps: exactly", false, [2]int{100, 100}, [2]int{7, 7}, [2]int{1000, 1000}},
		{"Poisson gaps: about as many", true, [2]int{70, 130}, [2]int{0, 20}, [2]int{900, 1100}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			flat := newArrivals(rate, tc.poisson, 7)
			up := newArrivals(rate, tc.poisson, 7)
			up.ramp = ramp
			var during, quarter, after int
			var prev time.Duration
			for i := 0; i < 2000; i++ {
				f, u := flat.next(), up.next()
				if want := time.Duration(ramped(f.Seconds(), ramp) * float64(time.Second)); absDur(u-want) > time.Microsecond {
					t.Fatalf("arrival %d at %v, want the constant schedule's %v moved to %v", i, u, f, want)
				}
				if u < prev {
					t.Fatalf("arrival %d at %v before %v", i, u, prev)
				}
				prev = u
				switch s := u.Seconds(); {
				case s < ramp/4:
					quarter++
					during++
				case s < ramp:
					during++
				case s < ramp+10:
					after++
				}
			}
			in := func(n int, r [2]int) bool { return n >= r[0] && n <= r[1] }
			if !in(during, tc.during) || !in(quarter, tc.quarter) || !in(after, tc.after) {
				t.Errorf("%d arrivals during the ramp (%d in its first quarter), %d in the 10 s after; want %v (%v), %v",
					during, quarter, after, tc.during, tc.quarter, tc.after)
			}
		})
	}
}

// TestArrivalsWithoutRampUnchanged: no ramp leaves every offset as it
// was, to the nanosecond, so a seed's schedule is the same as before.
func TestArrivalsWithoutRampUnchanged(t *testing.T) {
	for _, poisson := range []bool{false, true} {
		a := newArrivals(333.3, poisson, 42)
		rng := newArrivals(333.3, poisson, 42).rng
		var elapsed float64
		for i := 0; i < 1000; i++ {
			var want float64
			if poisson {
				if i > 0 {
					elapsed += rng.ExpFloat64() / 333.3
				}
				want = elapsed
			} else {
				want = float64(i) / 333.3
			}
			if got := a.next(); got != time.Duration(want*float64(time.Second)) {
				t.Fatalf("poisson %v, arrival %d at %v, want %v", poisson, i, got, time.Duration(want*float64(time.Second)))
			}
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestProfileRampValidate: a ramp belongs to an open loop's warm-up.
func TestProfileRampValidate(t *testing.T) {
	base := Profile{Rate: 100, Warmup: 2 * time.Second, Duration: time.Second}
	tests := []struct {
		desc string
		edit func(*Profile)
		want string // "" for valid
	}{
		{"the whole warm-up", func(p *Profile) { p.Ramp = 2 * time.Second }, ""},
		{"part of it", func(p *Profile) { p.Ramp = 500 * time.Millisecond }, ""},
		{"longer than the warm-up", func(p *Profile) { p.Ramp = 3 * time.Second }, "ramp 3s is longer than the warm-up 2s"},
		{"negative", func(p *Profile) { p.Ramp = -time.Second }, "ramp -1s is negative"},
		{"a closed loop", func(p *Profile) { p.Rate, p.Concurrency, p.Ramp = 0, 4, time.Second }, "a closed loop has none"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := base
			tc.edit(&p)
			err := p.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want %q (\"\" for valid)", err, tc.want)
			}
		})
	}
}

// TestOpenLoopRampsDuringWarmup: with a ramp over the whole warm-up, the
// generator starts half the warm-up's sessions and every one of the
// measured window's (fixed gaps make the counts exact).
func TestOpenLoopRampsDuringWarmup(t *testing.T) {
	tests := []struct {
		desc                   string
		ramp                   time.Duration
		wantTotal, wantMeasure int64
	}{
		{"no ramp", 0, 400, 200},
		{"a ramp over the warm-up", 500 * time.Millisecond, 300, 200},
		{"a ramp over half of it", 250 * time.Millisecond, 350, 200},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := &fakeDriver{}
			m, err := Run(context.Background(), d, Profile{Rate: 400, Warmup: 500 * time.Millisecond, Ramp: tc.ramp,
				Duration: 500 * time.Millisecond, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if total := d.ran(time.Time{}); total != tc.wantTotal {
				t.Errorf("%d sessions, want %d", total, tc.wantTotal)
			}
			if got := m.Operations["op"].Count; got != tc.wantMeasure {
				t.Errorf("%d measured, want %d", got, tc.wantMeasure)
			}
			if m.Load == nil || m.Load.TargetRate != 400 {
				t.Errorf("load %+v, want a target rate of 400", m.Load)
			}
		})
	}
}

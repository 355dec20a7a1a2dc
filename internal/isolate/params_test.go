package isolate

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// The stall gate demotes a hot container only after StallAfter
// consecutive samples in which another container stalls: a single
// pressure blip no longer demotes it (StallAfter 1, the default, still
// demotes at once).
func TestStallAfter(t *testing.T) {
	cs := []Container{{ID: "hot"}, {ID: "quiet"}}
	busy := map[string]float64{"hot": 1.9, "quiet": 0.05}
	stall, calm := map[string]float64{"quiet": 0.05}, map[string]float64{"quiet": 0}
	tests := []struct {
		desc       string
		stallAfter int
		stalls     []map[string]float64 // one per sample, after the container turned hot
		demoted    []bool               // after each sample
	}{
		{"default: at the first stalled sample", 0, []map[string]float64{stall, calm}, []bool{true, true}},
		{"3: after three stalled samples in a row", 3, []map[string]float64{stall, stall, stall, calm}, []bool{false, false, true, true}},
		{"3: a calm sample in between starts the count again", 3, []map[string]float64{stall, stall, calm, stall, stall, stall}, []bool{false, false, false, false, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := Params{StallGate: true, StallAfter: tc.stallAfter, HotAfter: 1, CoolAfter: 10}
			st := Decide(flat(2), p, nil, cs, busy, calm).State // hot, not demoted
			if !st["hot"].Hot || st["hot"].Demoted {
				t.Fatalf("after one busy sample: %+v, want hot and not demoted", st["hot"])
			}
			for i, s := range tc.stalls {
				d := Decide(flat(2), p, st, cs, busy, s)
				st = d.State
				if got := d.Placements["hot"].Demote; got != tc.demoted[i] {
					t.Fatalf("sample %d: demoted %v, want %v (%s)", i+1, got, tc.demoted[i], d.Placements["hot"].Reason)
				}
			}
		})
	}
}

// Validate takes a zero field for its default; ValidateDecoded, for what
// a plan, the flags or a config file decoded onto DefaultParams, refuses
// it; every problem is a *ParamError naming its key, all at once.
func TestValidateParams(t *testing.T) {
	tests := []struct {
		desc    string
		p       Params
		decoded bool
		keys    []string // of the errors, in order; none: valid
	}{
		{"zero values are the defaults", Params{}, false, nil},
		{"the defaults decoded", DefaultParams(), true, nil},
		{"an explicit zero decoded", func() Params { p := DefaultParams(); p.HotAfter, p.StallAfter = 0, 0; return p }(), true, []string{"hot_after", "stall_after"}},
		{"cool not below hot", Params{HotThreshold: 0.5, CoolThreshold: 0.5}, false, []string{"cool_threshold"}},
		{"not a number", Params{HotThreshold: math.NaN()}, false, []string{"hot_threshold"}},
		{"every range at once", Params{Policy: "bogus", Interval: time.Millisecond, MinShared: 5000, StallThreshold: 2, IRQPattern: "(", IRQRotate: time.Millisecond}, false,
			[]string{"policy", "interval", "min_shared", "stall_threshold", "irq_pattern", "irq_rotate"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.decoded {
				err = tc.p.ValidateDecoded()
			}
			var keys []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var pe *ParamError
					if !errors.As(e, &pe) || !strings.HasPrefix(e.Error(), pe.Key+": ") {
						t.Fatalf("%v is no *ParamError naming its key", e)
					}
					keys = append(keys, pe.Key)
				}
			}
			if strings.Join(keys, ",") != strings.Join(tc.keys, ",") {
				t.Errorf("errors for %v, want %v (%v)", keys, tc.keys, err)
			}
		})
	}
}

// auto is weight on Docker and idle on Kubernetes, where kubelet owns the
// weights; an explicit class is kept.
func TestDemoteClassResolve(t *testing.T) {
	for _, tc := range []struct {
		c    DemoteClass
		kube bool
		want DemoteClass
	}{
		{DemoteAuto, false, DemoteWeight},
		{DemoteAuto, true, DemoteIdle},
		{DemoteIdle, false, DemoteIdle},
		{DemoteWeight, false, DemoteWeight},
		{DemoteIdle, true, DemoteIdle},
	} {
		if got := tc.c.resolve(tc.kube); got != tc.want {
			t.Errorf("%q.resolve(kube=%v) = %q, want %q", tc.c, tc.kube, got, tc.want)
		}
	}
	if got := DefaultParams().DemoteClass; got != DemoteAuto {
		t.Errorf("default demote_class %q, want auto", got)
	}
}

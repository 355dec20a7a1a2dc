package isolate

import (
	"math"
	"testing"
)

// FuzzParamsValidate: parameters that Validate accepts must be usable by
// the policy as they are: finite thresholds in their ranges, the cool one
// below the hot one, whatever the fields held (NaN passed every bound
// before, since NaN compares false). Seed corpus: testdata/fuzz/FuzzParamsValidate.
func FuzzParamsValidate(f *testing.F) {
	f.Add("shield", 1, 1, 0.9, 0.5, 2, 10, false, false, 0.02)
	f.Add("paper", 2, 0, math.NaN(), 0.5, 0, 0, true, true, 0.0)
	f.Add("strict", 0, 0, 1.2, math.Inf(-1), 1, 1, false, true, math.NaN())
	f.Fuzz(func(t *testing.T, policy string, cpus, shared int, hot, cool float64, hotAfter, coolAfter int, demote, gate bool, stall float64) {
		p := Params{Policy: Policy(policy), CPUsPerContainer: cpus, MinShared: shared, HotThreshold: hot, CoolThreshold: cool,
			HotAfter: hotAfter, CoolAfter: coolAfter, Demote: demote, StallGate: gate, StallThreshold: stall}
		if p.Validate() != nil {
			return
		}
		d := p.withDefaults()
		if !(d.HotThreshold > 0 && d.HotThreshold <= 1.5) || !(d.CoolThreshold > 0 && d.CoolThreshold < d.HotThreshold) ||
			!(d.StallThreshold > 0 && d.StallThreshold <= 1) {
			t.Fatalf("Validate accepted unusable thresholds: %+v", d)
		}
		if d.CPUsPerContainer < 1 || d.MinShared < 1 || d.HotAfter < 1 || d.CoolAfter < 1 {
			t.Fatalf("Validate accepted counts below 1: %+v", d)
		}
		_ = p.Demotes()
	})
}

// FuzzParseHexMask: a mask read from smp_affinity or rps_cpus that parses
// renders back to a mask that parses to the same CPUs (what the restore of
// an RPS or IRQ value relies on).
func FuzzParseHexMask(f *testing.F) {
	for _, s := range []string{"3", "00000003", "1,00000000", "ffffffff,ffffffff", "", ",", "0x3", "-1", " 3\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseHexMask(s)
		if err != nil {
			return
		}
		n := 1
		if set.Size() > 0 {
			n = set.List()[set.Size()-1] + 1
		}
		again, err := ParseHexMask(HexMask(set, n))
		if err != nil || !again.Equals(set) {
			t.Fatalf("%q parsed to %v, rendered %q, parsed back to %v (%v)", s, set, HexMask(set, n), again, err)
		}
	})
}

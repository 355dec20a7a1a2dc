package workload

import (
	"math"
	"strings"
	"testing"
)

// TestOpenLoopKnobsAgree: every workload with an open-loop rate reads it,
// and its seed, with the same rules (they were parsed three times and
// disagreed: a ceiling of 1e6 in one, 1e7 in others, NaN accepted by all).
func TestOpenLoopKnobsAgree(t *testing.T) {
	parsers := map[string]func(map[string]any) error{
		"web": func(m map[string]any) error { _, err := ParseWebLoad(m); return err },
		"app": func(m map[string]any) error { _, err := ParseAppLoad(m, t.TempDir()); return err },
		"kv": func(m map[string]any) error {
			m["mode"] = "open"
			_, err := ParseKVLoad(m)
			return err
		},
		"noisy hot_rate": func(m map[string]any) error {
			if r, ok := m["rate"]; ok {
				m["hot_rate"] = r
				delete(m, "rate")
			}
			_, err := ParseNoisyLoad(m)
			return err
		},
	}
	tests := []struct {
		desc string
		knob map[string]any
		want string // "" for accepted
	}{
		{"NaN", map[string]any{"rate": math.NaN()}, "want a finite number"},
		{"+Inf", map[string]any{"rate": math.Inf(1)}, "want a finite number"},
		{"-Inf", map[string]any{"rate": math.Inf(-1)}, "want a finite number"},
		{"below the floor", map[string]any{"rate": 1e-11}, "want between 0.001 and 1e+07"},
		{"negative", map[string]any{"rate": -5}, "want between 0.001 and 1e+07"},
		{"above the shared ceiling", map[string]any{"rate": 2e7}, "want between 0.001 and 1e+07"},
		{"the floor", map[string]any{"rate": 0.001}, ""},
		{"the shared ceiling (web used to stop at 1e6)", map[string]any{"rate": 1e7}, ""},
		{"the largest seed", map[string]any{"rate": 10, "seed": 1 << 62}, ""},
		{"a negative seed", map[string]any{"rate": 10, "seed": -1}, "load.seed = -1: out of range"},
	}
	for name, parse := range parsers {
		for _, tc := range tests {
			t.Run(name+"/"+tc.desc, func(t *testing.T) {
				m := map[string]any{}
				for k, v := range tc.knob {
					m[k] = v
				}
				err := parse(m)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("err = %v, want none", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want one containing %q", err, tc.want)
				}
			})
		}
	}
}

// TestSearchRatesAreFinite: a capacity search's rates and SLO bounds
// refuse NaN and Inf like every other float knob.
func TestSearchRatesAreFinite(t *testing.T) {
	tests := []struct {
		desc   string
		search map[string]any
	}{
		{"a NaN from", map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": math.NaN(), "to": 100}},
		{"an infinite to", map[string]any{"slo": map[string]any{"p99_ms": 50}, "from": 1, "to": math.Inf(1)}},
		{"a NaN SLO bound", map[string]any{"slo": map[string]any{"p99_ms": math.NaN()}, "from": 1, "to": 100}},
		{"a NaN error rate", map[string]any{"slo": map[string]any{"error_rate": math.NaN()}, "from": 1, "to": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseWebLoad(map[string]any{"search": tc.search})
			if err == nil || !strings.Contains(err.Error(), "finite") {
				t.Errorf("err = %v, want a refusal of the non-finite value", err)
			}
		})
	}
}

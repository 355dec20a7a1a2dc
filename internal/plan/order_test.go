package plan

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestOrderInterleaves(t *testing.T) {
	tests := []struct {
		desc  string
		names []string
		reps  int
	}{
		{"three configurations, three rounds", []string{"a", "b", "c"}, 3},
		{"two configurations, many rounds", []string{"a", "b"}, 10},
		{"one configuration", []string{"only"}, 4},
		{"six configurations, five rounds", []string{"a", "b", "c", "d", "e", "f"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			runs := Order(tt.names, tt.reps, 7)
			if len(runs) != len(tt.names)*tt.reps {
				t.Fatalf("%d runs, want %d", len(runs), len(tt.names)*tt.reps)
			}
			for i, r := range runs {
				if r.Index != i {
					t.Fatalf("run %d has index %d", i, r.Index)
				}
				// Round r occupies a contiguous block and holds every configuration once.
				if want := i / len(tt.names); r.Repetition != want {
					t.Fatalf("run %d in round %d, want %d", i, r.Repetition, want)
				}
				if i > 0 && len(tt.names) > 1 && runs[i-1].Config == r.Config {
					t.Errorf("%s runs twice back to back at %d", r.Config, i)
				}
			}
			for rd := 0; rd < tt.reps; rd++ {
				seen := map[string]int{}
				for _, r := range runs[rd*len(tt.names) : (rd+1)*len(tt.names)] {
					seen[r.Config]++
				}
				for _, n := range tt.names {
					if seen[n] != 1 {
						t.Errorf("round %d runs %s %d times", rd, n, seen[n])
					}
				}
			}
		})
	}
}

func TestOrderDeterministicAndShuffled(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	a := Order(names, 6, 42)
	b := Order(names, 6, 42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different orders")
	}
	// Rounds must not all repeat the file order, and seeds must matter.
	rounds := map[string]bool{}
	for rd := 0; rd < 6; rd++ {
		var s []string
		for _, r := range a[rd*4 : rd*4+4] {
			s = append(s, r.Config)
		}
		rounds[strings.Join(s, "")] = true
	}
	if len(rounds) < 2 {
		t.Errorf("all rounds in the same order %v: not shuffled", rounds)
	}
	differs := false
	for seed := int64(1); seed < 20 && !differs; seed++ {
		differs = !reflect.DeepEqual(a, Order(names, 6, 42+seed))
	}
	if !differs {
		t.Error("order does not depend on the seed")
	}
}

func TestDescribe(t *testing.T) {
	p := load(t, "matrix.yaml", Options{Schema: testSchema{}})
	var buf bytes.Buffer
	if err := p.Describe(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"plan net-data: workload testweb, 5 configurations × 3 repetitions = 15 runs",
		"bare (baseline)",
		"docker-container-ip-volume",
		"net=container-ip data=volume",
		"round 3:",
		"measuring time at least 3m45s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

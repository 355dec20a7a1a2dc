package clean

import (
	"slices"
	"testing"

	"ctrperf/internal/engine"
)

func TestBreaks(t *testing.T) {
	tests := []struct {
		desc  string
		found []engine.Object
		want  string
	}{
		{"nothing found breaks nothing", nil, ""},
		{"orphaned objects break no run", []engine.Object{{What: "container a", Owner: "none"}}, ""},
		{"live objects by owner, in the order found", []engine.Object{
			{What: "container a", Owner: "bench pid 7", Live: true},
			{What: "netns b", Owner: "bench pid 9", Live: true},
			{What: "container c", Owner: "none"},
			{What: "volume d", Owner: "bench pid 7", Live: true},
		}, "ctrperf clean --force: removing objects of 2 live owner(s), which breaks their runs:\n" +
			"  bench pid 7: 2 objects (container a, volume d)\n" +
			"  bench pid 9: 1 objects (netns b)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := Breaks(tc.found); got != tc.want {
				t.Errorf("Breaks =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestAppendOnce(t *testing.T) {
	tests := []struct {
		desc string
		list []string
		s    string
		want []string
	}{
		{"new: appended", []string{"a"}, "b", []string{"a", "b"}},
		{"present (a host object the first engine reported): kept once", []string{"netns x", "b"}, "netns x", []string{"netns x", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := appendOnce(tc.list, tc.s); !slices.Equal(got, tc.want) {
				t.Errorf("appendOnce = %v, want %v", got, tc.want)
			}
		})
	}
}

package report

import (
	"reflect"
	"testing"
)

func TestMergeAlike(t *testing.T) {
	few := Warning{Message: "3 successful repetitions", Advice: adviceRepetitions}
	at := func(w Warning, c string) Warning { w.Config = c; return w }
	tests := []struct {
		desc    string
		in      []Warning
		configs int
		want    []Warning
	}{
		{"the same warning for every configuration reads once",
			[]Warning{at(few, "a"), at(few, "b"), at(few, "c")}, 3,
			[]Warning{at(few, "every configuration")}},
		{"for some configurations it names them, in the first one's place",
			[]Warning{at(few, "a"), {Config: "a", Message: "noisy"}, at(few, "c")}, 3,
			[]Warning{at(few, "a, c"), {Config: "a", Message: "noisy"}}},
		{"different messages stay apart; plan-wide warnings are kept as they are",
			[]Warning{{Message: "baseline failed"}, {Config: "a", Message: "x"}, {Config: "b", Message: "y"}}, 2,
			[]Warning{{Message: "baseline failed"}, {Config: "a", Message: "x"}, {Config: "b", Message: "y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := mergeAlike(tt.in, tt.configs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

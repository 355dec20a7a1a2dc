package isolate

import (
	"testing"
	"time"
)

func TestReactionTime(t *testing.T) {
	t0 := time.Date(2016, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	hot := map[string]bool{"h": true}
	tests := []struct {
		desc   string
		events []Event
		want   time.Duration
		ok     bool
	}{
		{"first cpuset of the hot container after the start", []Event{
			{Time: at(-500), Kind: "cpuset", Container: "h", New: "1"}, // initial placement: before the hot phase
			{Time: at(900), Kind: "hot", Container: "h"},
			{Time: at(950), Kind: "cpuset", Container: "q", New: "1"}, // a quiet neighbour moves: not the reaction
			{Time: at(1000), Kind: "cpuset", Container: "h", New: "0"},
			{Time: at(3000), Kind: "cpuset", Container: "h", New: "1"},
		}, time.Second, true},
		{"out of order events", []Event{
			{Time: at(2000), Kind: "cpuset", Container: "h"},
			{Time: at(1500), Kind: "cpuset", Container: "h"},
		}, 1500 * time.Millisecond, true},
		{"a dry run changes nothing", []Event{{Time: at(100), Kind: "cpuset", Container: "h", DryRun: true}}, 0, false},
		{"turning hot is not yet a placement change", []Event{{Time: at(100), Kind: "hot", Container: "h"}}, 0, false},
		{"a failed write is no reaction", []Event{{Time: at(100), Kind: "error", Container: "h"}}, 0, false},
		{"no events", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, ok := ReactionTime(tt.events, hot, t0)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ReactionTime = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
)

func TestProgressOutput(t *testing.T) {
	p := parsePlan(t, planYAML, plan.Options{Only: []string{"published"}})
	runs := p.Runs()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := &results.RunRecord{Plan: "unit", Config: runs[0].Config, Status: results.StatusOK, Start: t0, End: t0.Add(1500 * time.Millisecond),
		Result: measurement(42.5)}
	tests := []struct {
		desc    string
		pr      func(w *bytes.Buffer) Progress
		want    []string
		notWant []string
	}{
		{"plain lines", func(w *bytes.Buffer) Progress { return &Lines{W: w} },
			[]string{"plan unit: 4 runs (2 configurations × 2 repetitions)", "run 1/4  " + runs[0].Config + " (repetition 1)", ": ok in 1.5s, 42.5/s", "warning: look out", "runs this time"}, nil},
		{"quiet lines keep warnings and the summary", func(w *bytes.Buffer) Progress { return &Lines{W: w, Quiet: true} },
			[]string{"warning: look out", "runs this time"}, []string{"run 1/4"}},
		{"bar", func(w *bytes.Buffer) Progress { return &Bar{W: w} },
			[]string{"plan unit: 4 runs", "run 1/4 " + runs[0].Config + " #1 measuring", "warning: look out", "runs this time"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var buf bytes.Buffer
			pr := tt.pr(&buf)
			pr.Begin(p, len(runs), 0)
			cfg, _ := p.Config(runs[0].Config)
			pr.RunStarted(runs[0], cfg)
			pr.Phase("measuring")
			pr.Warn("look out")
			pr.RunFinished(runs[0], rec)
			pr.End(&Summary{Out: t.TempDir(), Plan: p, Total: len(runs), OK: 1, Records: []results.RunRecord{*rec}})
			out := buf.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

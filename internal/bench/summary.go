package bench

import (
	"fmt"
	"io"

	"ctrperf/internal/report"
)

// writeSummary prints what this invocation did and the report's short
// summary of everything in the output directory (earlier invocations
// included): each configuration against the baseline, with its warnings.
func writeSummary(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "\n%d runs this time: %d ok, %d failed, %d not run", len(s.Records), s.OK, s.Failed, s.NotRun)
	if s.Skipped > 0 {
		fmt.Fprintf(w, " (%d done before)", s.Skipped)
	}
	if s.Interrupted {
		fmt.Fprint(w, "; interrupted")
	}
	fmt.Fprintln(w)
	rep, err := report.Load(s.Out)
	if err == nil {
		fmt.Fprintln(w)
		err = report.Render(w, rep, "summary")
	}
	if err != nil {
		// The records are safe on disk; only the summary is missing.
		fmt.Fprintf(w, "no summary: %v\n", err)
	}
	fmt.Fprintf(w, "\nresults: %s\nfull report: ctrperf report %s (--format html for plots)\n", s.Out, s.Out)
}

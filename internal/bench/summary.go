package bench

import (
	"errors"
	"fmt"
	"io"

	"ctrperf/internal/report"
	"ctrperf/internal/results"
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

// ErrNothingMeasured is returned (wrapped) by CheckMeasured when a plan's
// records compare nothing: a CI job must not pass on a plan whose every run
// failed (an image not built yet) or whose baseline never succeeded.
var ErrNothingMeasured = errors.New("nothing was measured")

// CheckMeasured says whether the records of a plan (every record in OUT,
// earlier invocations included) hold a comparison: at least one ok run,
// and at least one of the baseline.
func CheckMeasured(recs []results.RunRecord, baseline string) error {
	var ok, failed, notRun, baseOK, baseRuns int
	for _, r := range recs {
		switch r.Status {
		case results.StatusOK:
			ok++
		case results.StatusFailed:
			failed++
		case results.StatusNotRun:
			notRun++
		}
		if r.Config == baseline {
			baseRuns++
			if r.Status == results.StatusOK {
				baseOK++
			}
		}
	}
	switch {
	case ok == 0:
		return fmt.Errorf("%w: none of the %d runs succeeded (%d failed, %d not run); `ctrperf report` says why", ErrNothingMeasured, len(recs), failed, notRun)
	case baseOK == 0:
		return fmt.Errorf("%w against the baseline: none of its %d runs (%s) succeeded, so no configuration can be compared with it; `ctrperf report` says why", ErrNothingMeasured, baseRuns, baseline)
	}
	return nil
}

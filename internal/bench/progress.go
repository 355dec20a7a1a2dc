package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/workload"
)

// Progress hears what the runner does. Implementations must be safe for
// calls from the runner's goroutine only; they need no locking against it.
type Progress interface {
	Begin(p *plan.Plan, total, skipped int)
	RunStarted(run plan.Run, cfg *plan.Configuration)
	// Phase names what the current run is doing: "starting engine",
	// "deploying", "warming up", "measuring", "tearing down".
	Phase(phase string)
	// Step is a line about the current run's progress within its drive
	// (a capacity search's steps: rate, p99, error rate, pass or fail).
	Step(msg string)
	RunFinished(run plan.Run, rec *results.RunRecord)
	// Warn is advice the user should read (a failed run, a saturated
	// generator); it is printed even with --quiet.
	Warn(msg string)
	End(s *Summary)
}

// Discard ignores everything.
type Discard struct{}

func (Discard) Begin(*plan.Plan, int, int)               {}
func (Discard) RunStarted(plan.Run, *plan.Configuration) {}
func (Discard) Phase(string)                             {}
func (Discard) Step(string)                              {}
func (Discard) RunFinished(plan.Run, *results.RunRecord) {}
func (Discard) Warn(string)                              {}
func (Discard) End(*Summary)                             {}

var _ Progress = Discard{}

// Lines prints one plain line per event, for logs and non-terminals. With
// Quiet only warnings and the end are printed.
type Lines struct {
	W     io.Writer // progress and summary
	Warnw io.Writer // warnings; nil means W
	Quiet bool
	Now   func() time.Time

	total, skipped int
	start, runAt   time.Time
	done           int
}

var _ Progress = (*Lines)(nil)

func (l *Lines) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Lines) Begin(p *plan.Plan, total, skipped int) {
	l.total, l.skipped, l.start = total, skipped, l.now()
	if l.Quiet {
		return
	}
	fmt.Fprintf(l.W, "plan %s: %d runs (%d configurations × %d repetitions), warm-up %s + %s each%s",
		p.Name, total, len(p.Configurations), p.Repetitions, p.Warmup, p.Duration, searchText(p))
	if skipped > 0 {
		fmt.Fprintf(l.W, ", %d already done", skipped)
	}
	fmt.Fprintln(l.W)
}

func (l *Lines) RunStarted(run plan.Run, cfg *plan.Configuration) {
	l.runAt = l.now()
	if l.Quiet {
		return
	}
	fmt.Fprintf(l.W, "run %d/%d  %s (repetition %d)  elapsed %s%s\n", run.Index+1, l.total, run.Config, run.Repetition+1,
		l.now().Sub(l.start).Round(time.Second), etaText(l.start, l.now(), l.done, l.total-l.skipped))
}

func (l *Lines) Phase(string) {}

func (l *Lines) Step(msg string) {
	if !l.Quiet {
		fmt.Fprintln(l.W, "  "+msg)
	}
}

func (l *Lines) RunFinished(run plan.Run, rec *results.RunRecord) {
	l.done++
	if l.Quiet {
		return
	}
	fmt.Fprintf(l.W, "run %d/%d  %s: %s in %s%s\n", run.Index+1, l.total, run.Config, rec.Status,
		rec.End.Sub(rec.Start).Round(100*time.Millisecond), headline(rec))
}

func (l *Lines) Warn(msg string) {
	w := l.Warnw
	if w == nil {
		w = l.W
	}
	fmt.Fprintln(w, "warning: "+msg)
}

func (l *Lines) End(s *Summary) { writeSummary(l.W, s) }

// searchText says that runs search for a capacity, and how many windows
// a run may take.
func searchText(p *plan.Plan) string {
	var n, steps int
	for i := range p.Configurations {
		if s, ok := p.Configurations[i].Search(); ok {
			n++
			steps = max(steps, s.MaxSteps)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (×1 to %d: %d of %d configurations search for their capacity, one window per step)", steps, n, len(p.Configurations))
}

// headline is the primary rate of an ok run, for progress lines; a
// capacity search's result and cost.
func headline(rec *results.RunRecord) string {
	if rec.Status != results.StatusOK || rec.Result == nil {
		return ""
	}
	if c := rec.Result.Capacity; c != nil {
		return ", capacity " + workload.OutcomeText(c)
	}
	if v, ok := rec.Result.Metrics[results.MetricThroughput]; ok {
		return fmt.Sprintf(", %.1f/s", v)
	}
	return ""
}

// etaText estimates the rest from the mean time of the runs done so far.
func etaText(start, now time.Time, done, todo int) string {
	if done == 0 || todo <= done {
		return ""
	}
	per := now.Sub(start) / time.Duration(done)
	return fmt.Sprintf(", ETA %s", (per * time.Duration(todo-done)).Round(time.Second))
}

// Bar draws a progress bar (run i/N, configuration, phase, elapsed and ETA)
// on a terminal; warnings and the summary go above and below it.
type Bar struct {
	W io.Writer

	mu      sync.Mutex
	bar     *progressbar.ProgressBar
	total   int
	cur     string
	stop    chan struct{}
	stopped sync.WaitGroup
}

var _ Progress = (*Bar)(nil)

func (b *Bar) Begin(p *plan.Plan, total, skipped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total = total
	fmt.Fprintf(b.W, "plan %s: %d runs (%d configurations × %d repetitions), warm-up %s + %s each%s\n",
		p.Name, total, len(p.Configurations), p.Repetitions, p.Warmup, p.Duration, searchText(p))
	// Runs finished by an earlier invocation are left out of the bar so
	// that they do not make the ETA look faster than it will be.
	b.bar = progressbar.NewOptions(max(total-skipped, 1),
		progressbar.OptionSetWriter(b.W),
		progressbar.OptionSetWidth(20),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionFullWidth(),
	)
	// Redraw every second so that elapsed time moves during a long run.
	b.stop = make(chan struct{})
	b.stopped.Add(1)
	go func() {
		defer b.stopped.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.mu.Lock()
				_ = b.bar.RenderBlank()
				b.mu.Unlock()
			}
		}
	}()
}

func (b *Bar) RunStarted(run plan.Run, cfg *plan.Configuration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = fmt.Sprintf("run %d/%d %s #%d", run.Index+1, b.total, run.Config, run.Repetition+1)
	b.bar.Describe(b.cur)
}

func (b *Bar) Phase(phase string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Describe(b.cur + " " + phase)
}

func (b *Bar) Step(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Clear()
	fmt.Fprintln(b.W, "  "+b.cur+": "+msg)
	_ = b.bar.RenderBlank()
}

func (b *Bar) RunFinished(run plan.Run, rec *results.RunRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Add(1)
}

func (b *Bar) Warn(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Clear()
	fmt.Fprintln(b.W, "warning: "+msg)
	_ = b.bar.RenderBlank()
}

func (b *Bar) End(s *Summary) {
	close(b.stop)
	b.stopped.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Clear()
	fmt.Fprintln(b.W)
	writeSummary(b.W, s)
}

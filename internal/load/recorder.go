package load

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"ctrperf/internal/results"
)

// Recorder receives one observation per request.
type Recorder interface {
	// Observe records a request of the operation label: its latency (from
	// its intended start), the bytes received and its error kind ("" for
	// success).
	Observe(label string, latency time.Duration, bytes int64, kind string)
}

// discard is the recorder of the warm-up.
type discard struct{}

func (discard) Observe(string, time.Duration, int64, string) {}

// isWarmup reports whether rec is a warm-up's recorder (nothing is kept).
func isWarmup(rec Recorder) bool {
	switch rec.(type) {
	case discard, liveOnly:
		return true
	}
	return false
}

// opStats accumulates one label. Labels are fixed before the run starts,
// so the map of labels is read-only and each label has its own lock: the
// hot path never takes a global lock.
type opStats struct {
	mu     sync.Mutex
	count  int64
	ok     int64
	bytes  int64
	errors map[string]int64
	hist   *hdrhistogram.Histogram
	// secs are the seconds of the window, by completion time.
	secs []secStats
}

// secStats is one label's second of the window. Its histogram is coarse
// (one significant figure, about 6%: enough for a timeline, and 3.5 kB a
// second) and made when the second sees its first request.
type secStats struct {
	count, errors int64
	hist          *hdrhistogram.Histogram
}

func newSecondHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(results.HistMinUs, results.HistMaxUs, 1)
}

// recorder keeps the raw per-label histograms of the measured window.
type recorder struct {
	// start is the start of the measured window, set before any measured
	// session runs: seconds of the timeline count from it.
	start    time.Time
	ops      map[string]*opStats
	order    []string
	canceled atomic.Int64
	unknown  atomic.Int64
	live     *Live // counts for a progress display, if set
}

func newRecorder(labels []string) *recorder {
	r := &recorder{ops: make(map[string]*opStats, len(labels)), order: labels}
	for _, l := range labels {
		r.ops[l] = &opStats{errors: map[string]int64{}, hist: results.NewHistogram()}
	}
	return r
}

func (r *recorder) Observe(label string, latency time.Duration, bytes int64, kind string) {
	r.live.observe(kind)
	if kind == kindCanceled {
		r.canceled.Add(1)
		return
	}
	o := r.ops[label]
	if o == nil {
		// A driver bug, but not worth losing the run over: counted, and reported as a note.
		r.unknown.Add(1)
		return
	}
	us := results.HistValue(latency)
	sec := 0
	if !r.start.IsZero() {
		sec = max(0, int(time.Since(r.start)/time.Second))
	}
	o.mu.Lock()
	o.count++
	o.bytes += bytes
	if kind == "" {
		o.ok++
	} else {
		o.errors[kind]++
	}
	// A request that was never started has no latency to record.
	if kind != KindNotStarted {
		_ = o.hist.RecordValue(us) // cannot fail: the value is clamped to the range
	}
	if kind != KindNotStarted {
		for len(o.secs) <= sec {
			o.secs = append(o.secs, secStats{})
		}
		ss := &o.secs[sec]
		ss.count++
		if kind != "" {
			ss.errors++
		}
		if ss.hist == nil {
			ss.hist = newSecondHistogram()
		}
		_ = ss.hist.RecordValue(us)
	}
	o.mu.Unlock()
}

// shard is a recorder of the same labels and window for one event loop:
// the loop records without sharing a lock or a cache line with the
// others, and merge adds it to r when the loop ends.
func (r *recorder) shard() *recorder {
	s := newRecorder(r.order)
	s.start, s.live = r.start, r.live
	return s
}

// merge adds what shard s recorded.
func (r *recorder) merge(s *recorder) {
	r.canceled.Add(s.canceled.Load())
	r.unknown.Add(s.unknown.Load())
	for l, so := range s.ops {
		o := r.ops[l]
		so.mu.Lock()
		o.mu.Lock()
		o.count += so.count
		o.ok += so.ok
		o.bytes += so.bytes
		for k, n := range so.errors {
			o.errors[k] += n
		}
		o.hist.Merge(so.hist)
		for len(o.secs) < len(so.secs) {
			o.secs = append(o.secs, secStats{})
		}
		for i, ss := range so.secs {
			d := &o.secs[i]
			d.count += ss.count
			d.errors += ss.errors
			if ss.hist != nil {
				if d.hist == nil {
					d.hist = newSecondHistogram()
				}
				d.hist.Merge(ss.hist)
			}
		}
		o.mu.Unlock()
		so.mu.Unlock()
	}
}

// addNotStarted counts n sessions that were due but never started.
func (r *recorder) addNotStarted(label string, n int64) {
	if o := r.ops[label]; o != nil && n > 0 {
		o.mu.Lock()
		o.count += n
		o.errors[KindNotStarted] += n
		o.mu.Unlock()
	}
}

// operations encodes the per-label results; okTotal is the number of
// successful requests over all labels.
func (r *recorder) operations() (ops map[string]*results.Operation, okTotal, total int64, err error) {
	ops = make(map[string]*results.Operation, len(r.ops))
	labels := make([]string, 0, len(r.ops))
	for l := range r.ops {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		o := r.ops[l]
		o.mu.Lock()
		op := &results.Operation{Count: o.count, Bytes: o.bytes}
		if len(o.errors) > 0 {
			op.Errors = make(map[string]int64, len(o.errors))
			for k, v := range o.errors {
				op.Errors[k] = v
			}
		}
		h, encErr := results.EncodeHistogram(o.hist)
		okTotal += o.ok
		total += o.count
		o.mu.Unlock()
		if encErr != nil {
			return nil, 0, 0, encErr
		}
		op.Histogram = h
		ops[l] = op
	}
	return ops, okTotal, total, nil
}

// perSecond merges the labels' seconds into the window's timeline, keeping
// the seconds that start inside the window (requests drained after it
// count in the totals, not in a last, half-empty second).
func (r *recorder) perSecond(window float64) []results.Second {
	var n int
	for _, o := range r.ops {
		o.mu.Lock()
		n = max(n, len(o.secs))
		o.mu.Unlock()
	}
	if window > 0 {
		n = min(n, int(math.Ceil(window)))
	}
	if n == 0 {
		return nil
	}
	out := make([]results.Second, n)
	hs := make([]*hdrhistogram.Histogram, n)
	for _, l := range r.order {
		o := r.ops[l]
		o.mu.Lock()
		for i := 0; i < n && i < len(o.secs); i++ {
			ss := o.secs[i]
			out[i].Count += ss.count
			out[i].Errors += ss.errors
			if ss.hist != nil {
				if hs[i] == nil {
					hs[i] = newSecondHistogram()
				}
				hs[i].Merge(ss.hist)
			}
		}
		o.mu.Unlock()
	}
	for i := range out {
		out[i].T = float64(i + 1)
		if h := hs[i]; h != nil && h.TotalCount() > 0 {
			out[i].P50Ms = float64(h.ValueAtQuantile(50)) / 1000
			out[i].P99Ms = float64(h.ValueAtQuantile(99)) / 1000
			out[i].MaxMs = float64(h.Max()) / 1000
		}
	}
	return out
}

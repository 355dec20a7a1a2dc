package load

import (
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
}

// recorder keeps the raw per-label histograms of the measured window.
type recorder struct {
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
	o.mu.Unlock()
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

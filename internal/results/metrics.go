package results

import hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

// Metric names. A workload's Measurement.Metrics and the figures reports
// derive from operations use these names; a report or a comparison finds a
// figure by them, so a workload that reports one of these quantities must
// use the name given here.
const (
	// Throughput is the primary rate of every workload: successfully
	// completed operations (requests, transactions, spawns, ...) per second
	// of the measured window.
	MetricThroughput = "throughput_per_s"
	// Elapsed is the wall time of the measured window or of a tool's run.
	MetricElapsed = "elapsed_s"
	// ErrorRate is failed attempts / all attempts.
	MetricErrorRate = "error_rate"
	// KBPerS is the bytes received by the load generator, in KiB/s.
	MetricKBPerS = "kb_per_s"
	// Samples is the number of completed requests of a run.
	MetricSamples = "samples"

	// Latency quantiles and extremes of the operations, in milliseconds.
	MetricMeanMs = "mean_ms"
	MetricMinMs  = "min_ms"
	MetricP50Ms  = "p50_ms"
	MetricP90Ms  = "p90_ms"
	MetricP95Ms  = "p95_ms"
	MetricP99Ms  = "p99_ms"
	MetricP999Ms = "p999_ms"
	MetricMaxMs  = "max_ms"

	// Database benchmarks (sysbench oltp).
	MetricTransactions = "transactions_per_s"
	MetricQueries      = "queries_per_s"

	// Noisy neighbour: the quiet tenants' tail, the hot tenant's rate, the
	// generator's own lateness, and the isolate controller's reaction time
	// from the hot phase to its first placement change.
	MetricQuietP50Ms             = "quiet_p50_ms"
	MetricQuietP99Ms             = "quiet_p99_ms"
	MetricQuietP99SettledMs      = "quiet_p99_settled_ms" // from 1 s into the hot phase
	MetricHotP99Ms               = "hot_p99_ms"
	MetricHotThroughput          = "hot_throughput_per_s"
	MetricGeneratorLatenessP99Ms = "generator_lateness_p99_ms"
	MetricGeneratorLatenessMaxMs = "generator_lateness_max_ms"
	MetricReaction               = "reaction_s"
)

// Capacity search (a workload's load.search): the highest offered rate that
// met the SLO, what the search cost, per run. MetricCapacity is absent when
// no rate tried met the SLO (Capacity.Outcome CapacityBelow).
const (
	MetricCapacity       = "capacity_per_s"
	MetricCapacitySteps  = "capacity_steps"
	MetricCapacitySearch = "capacity_search_s"
)

// Merge says how one metric of measurements taken side by side over one
// window (a run's instances, a deployment's generator pods) becomes the
// merged measurement's figure (MergeSideBySide). Every metric's merge is
// declared, never guessed from its name: in metricMerges for the names
// above and the fixed names workloads report, in Measurement.Declared
// (MetricInfo.Merge) for names a workload makes up (a stressor's, a
// server counter's).
type Merge string

const (
	// MergeSum adds the parts: rates and counts, the parts' loads add up.
	MergeSum Merge = "sum"
	// MergeMean is the mean weighted by each part's operation count (a
	// rate per request, a figure per operation): error_rate merges into
	// the failed share of every part's requests together. Parts that
	// counted no operation weigh alike.
	MergeMean Merge = "mean"
	// MergeMax is the largest part's: the slowest part's elapsed time, the
	// worst lateness, a tool's percentile that has no histogram to merge.
	MergeMax Merge = "max"
	// MergeMin is the smallest part's.
	MergeMin Merge = "min"
	// MergeLatency is a figure of the latency distribution (HistogramFigure):
	// computed again from the merged histograms of every operation of every
	// part, never averaged; where no part had histograms, the worst part's
	// (the largest; for min_ms the smallest), with a note.
	MergeLatency Merge = "latency"
	// MergeTarget is a counter the system under test keeps itself and each
	// part read over its window: summed where each part drove a target of
	// its own (instances), the largest reading where the parts drove one
	// target (generator pods).
	MergeTarget Merge = "target"
)

// metricMerges declares the merge of every metric name that is fixed in
// the code; a workload that makes names up declares theirs in
// Measurement.Declared.
var metricMerges = map[string]Merge{
	MetricThroughput: MergeSum, MetricKBPerS: MergeSum, MetricSamples: MergeSum,
	MetricTransactions: MergeSum, MetricQueries: MergeSum,
	MetricElapsed: MergeMax, MetricErrorRate: MergeMean,
	MetricMeanMs: MergeLatency, MetricMinMs: MergeLatency, MetricP50Ms: MergeLatency, MetricP90Ms: MergeLatency,
	MetricP95Ms: MergeLatency, MetricP99Ms: MergeLatency, MetricP999Ms: MergeLatency, MetricMaxMs: MergeLatency,
	// noisy: quantiles of a subset of the operations, which no merged
	// histogram holds apart.
	MetricQuietP50Ms: MergeMax, MetricQuietP99Ms: MergeMax, MetricQuietP99SettledMs: MergeMax, MetricHotP99Ms: MergeMax, MetricHotThroughput: MergeSum,
	MetricGeneratorLatenessP99Ms: MergeMax, MetricGeneratorLatenessMaxMs: MergeMax, MetricReaction: MergeMax,
	MetricCapacity: MergeSum, MetricCapacitySteps: MergeMax, MetricCapacitySearch: MergeMax,

	// load.Run and its drivers.
	"requests_per_s": MergeSum, "sessions_per_s": MergeSum, "sessions_failed": MergeSum,
	"get_hits": MergeSum, "get_misses": MergeSum,
	// Wrapped tools: fio, sysbench.
	"iops": MergeSum, "read_iops": MergeSum, "write_iops": MergeSum,
	"read_bw_bytes_per_s": MergeSum, "write_bw_bytes_per_s": MergeSum,
	"events_per_s": MergeSum, "ignored_errors": MergeSum, "reconnects": MergeSum,
	// Workloads.
	"tps": MergeSum, "qps": MergeSum, // oltp
	"context_switches_per_s": MergeSum, "switch_us": MergeMean, // ctxsw
	"batches": MergeSum, "copies": MergeSum, "per_copy_per_s": MergeMean, // exec
	"file_cycles_per_s": MergeSum, "direct": MergeMax, // fileio, bonnie
	"wall_client_s": MergeMax,                                                                            // client
	"wall_median_s": MergeMean, "wall_mean_s": MergeMean, "wall_min_s": MergeMin, "wall_max_s": MergeMax, // command
}

// MergeOf is how metric name merges: as declared (a MetricInfo's Merge in
// declared, else metricMerges); false when nothing declares it.
func MergeOf(name string, declared map[string]MetricInfo) (Merge, bool) {
	if k := declared[name].Merge; k != "" {
		return k, true
	}
	k, ok := metricMerges[name]
	return k, ok
}

// latencyFigures are the figures of a latency distribution by metric
// name: the quantile (0 the min, 100 the max), or meanFigure. The one
// table of metric names to quantiles.
var latencyFigures = map[string]float64{MetricMinMs: 0, MetricP50Ms: 50, MetricP90Ms: 90, MetricP95Ms: 95,
	MetricP99Ms: 99, MetricP999Ms: 99.9, MetricMaxMs: 100, MetricMeanMs: meanFigure}

const meanFigure = -1

// LatencyQuantile is the quantile (percent) that metric name is of a
// latency distribution: 50 for p50_ms, 0 for min_ms, 100 for max_ms;
// false for mean_ms and any other name.
func LatencyQuantile(name string) (float64, bool) {
	q, ok := latencyFigures[name]
	if q == meanFigure {
		return 0, false
	}
	return q, ok
}

// HistogramFigure is metric name (p50_ms … max_ms, mean_ms) of a latency
// histogram in microseconds (NewHistogram), in milliseconds; false for a
// name that is no figure of a distribution.
func HistogramFigure(h *hdrhistogram.Histogram, name string) (float64, bool) {
	q, ok := latencyFigures[name]
	switch {
	case !ok:
		return 0, false
	case q == meanFigure:
		return h.Mean() / 1000, true
	case q == 0:
		return float64(h.Min()) / 1000, true
	case q == 100:
		return float64(h.Max()) / 1000, true
	}
	return float64(h.ValueAtQuantile(q)) / 1000, true
}

// DeclareMerge declares how metric name merges (see Merge), for a name
// the workload makes up; what else is declared of it stays.
func (m *Measurement) DeclareMerge(name string, k Merge) {
	if m.Declared == nil {
		m.Declared = map[string]MetricInfo{}
	}
	info := m.Declared[name]
	info.Merge = k
	m.Declared[name] = info
}

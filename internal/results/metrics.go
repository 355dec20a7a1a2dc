package results

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

package parsers

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"ctrperf/internal/results"
)

// pgbench prints its summary on stdout:
//
//	number of transactions actually processed: 47689
//	number of failed transactions: 0 (0.000%)
//	latency average = 0.248 ms
//	latency stddev = 5.835 ms                       (with --progress or a rate)
//	initial connection time = 46.337 ms
//	tps = 16144.490294 (without initial connection time)
//
// (before PostgreSQL 14: "tps = … (excluding connections establishing)");
// with --progress=N one line per interval on stderr:
//
//	progress: 1.0 s, 308.0 tps, lat 6.278 ms stddev 8.477, 0 failed
//
// and with -l (--log) a transaction log per thread in its working
// directory, pgbench_log.PID[.THREAD], one line per transaction:
//
//	client_id transaction_no time script_no time_epoch time_us [schedule_lag]
//
// whose third field is the latency in µs ("skipped" or "failed" instead
// for those transactions).
func init() {
	register(Parser{
		Name: "pgbench", Program: "pgbench", Install: "Debian package postgresql-15 (through postgresql or postgresql-contrib)",
		Files: []string{"pgbench_log.*"},
		Hint:  "its summary on stdout (tps = …); --progress=1 for per-second figures, -l for latency percentiles",
		Figures: []Figure{
			{Name: "tps", Better: results.BetterHigher, Unit: "tx/s", Doc: "transactions per second without the initial connection time"},
			{Name: "latency_avg_ms", Better: results.BetterLower, Unit: "ms", Doc: "mean transaction latency"},
			{Name: "latency_stddev_ms", Better: results.BetterLower, Unit: "ms", Doc: "its standard deviation", Needs: "--progress or --rate"},
			{Name: "connection_ms", Better: results.BetterLower, Unit: "ms", Doc: "initial connection time"},
			{Name: "transactions_failed", Better: results.BetterLower, Doc: "failed transactions (PostgreSQL 15+)"},
			{Name: "progress_tps_min, progress_tps_median", Better: results.BetterHigher, Unit: "tx/s", Doc: "lowest and median tps of the intervals", Needs: "--progress=N"},
			{Name: "progress_lat_max_ms", Better: results.BetterLower, Unit: "ms", Doc: "highest mean latency of an interval", Needs: "--progress=N"},
			{Name: "latency_p50_ms, latency_p90_ms, latency_p95_ms, latency_p99_ms, latency_p999_ms, latency_max_ms", Better: results.BetterLower, Unit: "ms",
				Doc: "transaction latency percentiles from the transaction log", Needs: "-l (written to the working directory, which ctrperf reads and removes)"},
		},
		Parse: parsePgbench,
	})
}

var (
	pgTPS      = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \((without initial connection time|excluding connections establishing|including connections establishing)\)`)
	pgLine     = regexp.MustCompile(`(?m)^(latency average|latency stddev|initial connection time) = ([0-9.]+) ms`)
	pgFailed   = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	pgDone     = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	pgProgress = regexp.MustCompile(`(?m)^progress: [0-9.]+ s, ([0-9.]+) tps, lat ([0-9.]+) ms`)
)

func parsePgbench(o Output) (Result, error) {
	var r Result
	var n numbers
	tps, found := 0.0, ""
	for _, m := range pgTPS.FindAllSubmatch(o.Stdout, -1) {
		v := n.float("tps", m[1])
		// The figure without the connection time wins; an old pgbench
		// printing only the one including it still gives a figure.
		if found == "" || !strings.HasPrefix(string(m[2]), "including") {
			tps, found = v, string(m[2])
		}
	}
	if found == "" {
		return r, fmt.Errorf("no \"tps = …\" line in pgbench's output (did it run to the end?); stdout ends: %s; stderr ends: %s", tail(o.Stdout), tail(o.Stderr))
	}
	r.add("tps", tps, results.BetterHigher, "tx/s", results.MergeSum)
	r.Throughput = tps
	op := r.op("transaction")
	for _, m := range pgLine.FindAllSubmatch(o.Stdout, -1) {
		v := n.float(string(m[1]), m[2])
		switch string(m[1]) {
		case "latency average":
			r.add("latency_avg_ms", v, results.BetterLower, "ms", results.MergeMean)
			op.MeanMs = v
		case "latency stddev":
			r.add("latency_stddev_ms", v, results.BetterLower, "ms", "") // a spread does not merge without the samples
		case "initial connection time":
			r.add("connection_ms", v, results.BetterLower, "ms", results.MergeMax)
		}
	}
	if m := pgDone.FindSubmatch(o.Stdout); m != nil {
		op.Count = n.int("number of transactions actually processed", m[1])
	}
	if m := pgFailed.FindSubmatch(o.Stdout); m != nil {
		failed := n.int("number of failed transactions", m[1])
		r.add("transactions_failed", float64(failed), results.BetterLower, "", results.MergeSum)
		if failed > 0 {
			op.Errors = map[string]int64{"failed": failed}
		}
	}
	var tpss, lats []float64
	for _, m := range pgProgress.FindAllSubmatch(o.Stderr, -1) {
		tpss = append(tpss, n.float("progress tps", m[1]))
		lats = append(lats, n.float("progress lat", m[2]))
	}
	if err := n.err(); err != nil {
		return r, fmt.Errorf("pgbench's output: %w", err)
	}
	if len(tpss) > 0 {
		r.add("progress_tps_min", slices.Min(tpss), results.BetterHigher, "tx/s", "") // the parts' intervals are not aligned
		r.add("progress_tps_median", median(tpss), results.BetterHigher, "tx/s", "")
		r.add("progress_lat_max_ms", slices.Max(lats), results.BetterLower, "ms", results.MergeMax)
	}
	lat, err := pgbenchLog(o.Files)
	if err != nil {
		return r, err
	}
	if len(lat) > 0 {
		sort.Float64s(lat)
		for _, p := range []float64{50, 90, 95, 99, 99.9} {
			v := nearestRank(lat, p)
			r.add("latency_"+percentileName(p)+"_ms", v, results.BetterLower, "ms", results.MergeMax)
			op.PercentilesMs[percentileKey(p)] = v
		}
		r.add("latency_max_ms", lat[len(lat)-1], results.BetterLower, "ms", results.MergeMax)
		op.PercentilesMs["100"] = lat[len(lat)-1]
	}
	return r, nil
}

// pgbenchLog reads the latencies (ms) of every transaction log.
func pgbenchLog(files map[string][]byte) ([]float64, error) {
	var lat []float64
	for _, name := range sortedNames(files) {
		if !strings.HasPrefix(name, "pgbench_log.") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(files[name]))
		line := 0
		for sc.Scan() {
			line++
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			if epoch, err := strconv.ParseFloat(f[min(4, len(f)-1)], 64); len(f) < 6 || err != nil || epoch < 1e9 {
				return nil, fmt.Errorf("%s:%d: %q is no transaction log line (client transaction time script epoch µs): was -l combined with --aggregate-interval? ctrperf reads the per-transaction log", name, line, sc.Text())
			}
			us, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				continue // "skipped" or "failed"
			}
			lat = append(lat, us/1000)
		}
	}
	return lat, nil
}

func sortedNames(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nearestRank is the p-th percentile of sorted xs by the nearest-rank
// method (a value that occurred).
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

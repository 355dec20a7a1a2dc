package parsers

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"ctrperf/internal/results"
)

// redis-benchmark --csv prints one line per test. Redis 6.2 and later:
//
//	"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
//	"SET","56022.41","0.535","0.048","0.367","0.719","1.263","45.055"
//
// earlier versions print only "SET","56022.41" (no header).
func init() {
	register(Parser{
		Name: "redis-benchmark", Program: "redis-benchmark", Install: "Debian package redis-tools",
		Hint: "run it with --csv (one line per test: -t set,get)",
		Figures: []Figure{
			{Name: "<op>_per_s", Better: results.BetterHigher, Unit: "req/s", Doc: "requests per second of the test (set_per_s, get_per_s)"},
			{Name: "<op>_avg_ms", Better: results.BetterLower, Unit: "ms", Doc: "mean latency (Redis 6.2+)"},
			{Name: "<op>_min_ms, <op>_p50_ms, <op>_p95_ms, <op>_p99_ms, <op>_max_ms", Better: results.BetterLower, Unit: "ms", Doc: "latency percentiles (Redis 6.2+)"},
		},
		Parse: parseRedisBenchmark,
	})
}

// redisColumns maps the CSV header's latency columns to figure suffixes
// and percentiles (0 and 100 are min and max).
var redisColumns = map[string]struct {
	suffix     string
	percentile float64
}{
	"min_latency_ms": {"min", 0}, "p50_latency_ms": {"p50", 50}, "p95_latency_ms": {"p95", 95},
	"p99_latency_ms": {"p99", 99}, "max_latency_ms": {"max", 100},
}

func parseRedisBenchmark(o Output) (Result, error) {
	var r Result
	rd := csv.NewReader(bytes.NewReader(o.Stdout))
	rd.FieldsPerRecord = -1
	var header []string
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A progress line or a warning is no CSV record; skip it.
			continue
		}
		if len(rec) < 2 {
			continue
		}
		if rec[0] == "test" {
			header = rec
			continue
		}
		rps, err := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
		if err != nil {
			continue
		}
		name := opName(rec[0])
		if _, dup := r.Operations[rec[0]]; dup {
			return r, fmt.Errorf("test %q appears twice", rec[0])
		}
		r.add(name+"_per_s", rps, results.BetterHigher, "req/s", results.MergeSum)
		op := r.op(rec[0])
		for i := 2; i < len(rec) && i < len(header); i++ {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				return r, fmt.Errorf("test %q: column %s is %q, not a number", rec[0], header[i], rec[i])
			}
			if header[i] == "avg_latency_ms" {
				r.add(name+"_avg_ms", v, results.BetterLower, "ms", results.MergeMean)
				op.MeanMs = v
				continue
			}
			if c, ok := redisColumns[header[i]]; ok {
				r.add(name+"_"+c.suffix+"_ms", v, results.BetterLower, "ms", toolLatencyMerge(c.suffix))
				op.PercentilesMs[percentileKey(c.percentile)] = v
			}
		}
	}
	// Every test runs the same -n requests: all of them over the time of
	// all is the harmonic mean of the rates.
	var inv float64
	n := 0
	for name, v := range r.Figures {
		if strings.HasSuffix(name, "_per_s") && v > 0 {
			inv += 1 / v
			n++
		}
	}
	if n > 0 {
		r.Throughput = float64(n) / inv
	}
	if len(r.Figures) == 0 {
		return r, fmt.Errorf("no test line (\"SET\",\"12345.67\",...) in redis-benchmark's output: was it run with --csv? It ends: %s", tail(o.Stdout))
	}
	return r, nil
}

package parsers

import (
	"fmt"
	"regexp"

	"ctrperf/internal/results"
)

// wrk prints (the distribution only with --latency):
//
//	  Thread Stats   Avg      Stdev     Max   +/- Stdev
//	    Latency     3.72ms    2.12ms  14.74ms   71.44%
//	  Latency Distribution
//	     50%    3.34ms
//	     99%   10.33ms
//	  2181 requests in 2.01s, 2.53MB read
//	  Socket errors: connect 0, read 2, write 0, timeout 0
//	  Non-2xx or 3xx responses: 5
//	Requests/sec:   1087.66
//	Transfer/sec:      1.26MB
func init() {
	register(Parser{
		Name: "wrk", Program: "wrk", Install: "Debian package wrk",
		Hint: "its summary on stdout; --latency for the latency distribution",
		Figures: []Figure{
			{Name: "requests_per_s", Better: results.BetterHigher, Unit: "req/s", Doc: "Requests/sec"},
			{Name: "transfer_mb_per_s", Better: results.BetterHigher, Unit: "MiB/s", Doc: "Transfer/sec"},
			{Name: "latency_avg_ms, latency_stdev_ms, latency_max_ms", Better: results.BetterLower, Unit: "ms", Doc: "the Latency line of the thread stats"},
			{Name: "latency_p50_ms, latency_p75_ms, latency_p90_ms, latency_p99_ms", Better: results.BetterLower, Unit: "ms", Doc: "the latency distribution", Needs: "--latency"},
			{Name: "requests_errors", Better: results.BetterLower, Doc: "socket errors plus non-2xx/3xx responses"},
		},
		Parse: parseWrk,
	})
}

const wrkTime = `([0-9.]+)(us|ms|s|m|h)`

var (
	wrkRate     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkTransfer = regexp.MustCompile(`(?m)^Transfer/sec:\s+([0-9.]+)(B|KB|MB|GB|TB)`)
	wrkLatency  = regexp.MustCompile(`(?m)^\s+Latency\s+` + wrkTime + `\s+` + wrkTime + `\s+` + wrkTime)
	wrkDist     = regexp.MustCompile(`(?m)^\s+([0-9.]+)%\s+` + wrkTime + `\s*$`)
	wrkCount    = regexp.MustCompile(`(?m)^\s+([0-9]+) requests in `)
	wrkSocket   = regexp.MustCompile(`(?m)^\s+Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: ([0-9]+)`)
)

// wrkMs converts a wrk time (value and unit) to milliseconds.
func (n *numbers) wrkMs(what string, v, unit []byte) float64 {
	f := n.float(what, v)
	switch string(unit) {
	case "us":
		return f / 1000
	case "s":
		return f * 1000
	case "m":
		return f * 60000
	case "h":
		return f * 3600000
	}
	return f
}

func parseWrk(o Output) (Result, error) {
	var r Result
	m := wrkRate.FindSubmatch(o.Stdout)
	if m == nil {
		return r, fmt.Errorf("no \"Requests/sec:\" line in wrk's output; it ends: %s", tail(o.Stdout))
	}
	var n numbers
	rate := n.float("Requests/sec", m[1])
	r.add("requests_per_s", rate, results.BetterHigher, "req/s", results.MergeSum)
	r.Throughput = rate
	if m := wrkTransfer.FindSubmatch(o.Stdout); m != nil {
		v := n.float("Transfer/sec", m[1])
		scale := map[string]float64{"B": 1.0 / (1 << 20), "KB": 1.0 / 1024, "MB": 1, "GB": 1024, "TB": 1 << 20}[string(m[2])]
		r.add("transfer_mb_per_s", v*scale, results.BetterHigher, "MiB/s", results.MergeSum)
	}
	op := r.op("request")
	if m := wrkCount.FindSubmatch(o.Stdout); m != nil {
		op.Count = n.int("requests", m[1])
	}
	if m := wrkLatency.FindSubmatch(o.Stdout); m != nil {
		op.MeanMs = n.wrkMs("Latency Avg", m[1], m[2])
		r.add("latency_avg_ms", op.MeanMs, results.BetterLower, "ms", results.MergeMean)
		r.add("latency_stdev_ms", n.wrkMs("Latency Stdev", m[3], m[4]), results.BetterLower, "ms", "") // a spread does not merge without the samples
		maxMs := n.wrkMs("Latency Max", m[5], m[6])
		r.add("latency_max_ms", maxMs, results.BetterLower, "ms", results.MergeMax)
		op.PercentilesMs["100"] = maxMs
	}
	for _, m := range wrkDist.FindAllSubmatch(o.Stdout, -1) {
		p := n.float("Latency Distribution percentile", m[1])
		v := n.wrkMs("Latency Distribution "+string(m[1])+"%", m[2], m[3])
		r.add("latency_"+percentileName(p)+"_ms", v, results.BetterLower, "ms", results.MergeMax)
		op.PercentilesMs[percentileKey(p)] = v
	}
	var errs int64
	if m := wrkSocket.FindSubmatch(o.Stdout); m != nil {
		for i, kind := range []string{"connect", "read", "write", "timeout"} {
			c := n.int("Socket errors "+kind, m[i+1])
			if c > 0 {
				if op.Errors == nil {
					op.Errors = map[string]int64{}
				}
				op.Errors[kind] = c
				errs += c
			}
		}
	}
	if m := wrkNon2xx.FindSubmatch(o.Stdout); m != nil {
		c := n.int("Non-2xx or 3xx responses", m[1])
		if c > 0 {
			if op.Errors == nil {
				op.Errors = map[string]int64{}
			}
			op.Errors["non_2xx_3xx"] = c
			errs += c
		}
	}
	r.add("requests_errors", float64(errs), results.BetterLower, "", results.MergeSum)
	if err := n.err(); err != nil {
		return r, fmt.Errorf("wrk's output: %w", err)
	}
	return r, nil
}

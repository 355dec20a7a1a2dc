package parsers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"ctrperf/internal/results"
)

// k6 run --summary-export=k6-summary.json writes the end-of-test summary
// as JSON (k6's legacy export, js/summary-wrapper.js oldJSONSummary): a
// metric's values directly under its name, the rate of a rate metric as
// "value":
//
//	{"root_group": {…}, "metrics": {
//	  "http_req_duration": {"avg": 1.2, "min": 0.3, "med": 1.1, "max": 9.8, "p(90)": 2.0, "p(95)": 2.5},
//	  "http_reqs": {"count": 1800, "rate": 59.9},
//	  "http_req_failed": {"passes": 0, "fails": 1800, "value": 0},
//	  "checks": {"passes": 1800, "fails": 0, "value": 1}}}
//
// Trend values are in milliseconds.
const k6SummaryFile = "k6-summary.json"

func init() {
	register(Parser{
		Name: "k6", Program: "k6", Install: "no Debian package: go install go.k6.io/k6@latest (the Go module proxy), or Grafana's k6 release binary",
		Files: []string{k6SummaryFile},
		Hint:  "run it with --summary-export=" + k6SummaryFile + " (a relative path: the working directory, which ctrperf reads and removes)",
		Figures: []Figure{
			{Name: "http_reqs_per_s, iterations_per_s", Better: results.BetterHigher, Unit: "/s", Doc: "the rate of http_reqs and iterations"},
			{Name: "http_req_duration_avg_ms, _min_ms, _med_ms, _max_ms, _p90_ms, _p95_ms (and any p(N) of --summary-trend-stats)", Better: results.BetterLower, Unit: "ms", Doc: "request duration"},
			{Name: "iteration_duration_avg_ms, …", Better: results.BetterLower, Unit: "ms", Doc: "iteration duration, the same statistics"},
			{Name: "http_req_failed_rate", Better: results.BetterLower, Doc: "share of failed requests"},
			{Name: "checks_rate", Better: results.BetterHigher, Doc: "share of passed checks"},
		},
		Parse: parseK6,
	})
}

var k6Percentile = regexp.MustCompile(`^p\(([0-9.]+)\)$`)

func parseK6(o Output) (Result, error) {
	var r Result
	data, ok := o.Files[k6SummaryFile]
	if !ok {
		return r, fmt.Errorf("k6 wrote no %s in its working directory: run it with --summary-export=%s; stdout ends: %s", k6SummaryFile, k6SummaryFile, tail(o.Stdout))
	}
	var doc struct {
		Metrics map[string]map[string]any `json:"metrics"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return r, fmt.Errorf("%s: %v", k6SummaryFile, err)
	}
	if len(doc.Metrics) == 0 {
		return r, fmt.Errorf("%s has no metrics", k6SummaryFile)
	}
	num := func(m map[string]any, key string) (float64, bool) {
		n, ok := m[key].(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil
	}
	for _, name := range []string{"http_reqs", "iterations"} {
		if v, ok := num(doc.Metrics[name], "rate"); ok {
			r.add(name+"_per_s", v, results.BetterHigher, "/s", results.MergeSum)
		}
	}
	for _, name := range []string{"http_req_duration", "iteration_duration"} {
		m := doc.Metrics[name]
		for key := range m {
			v, ok := num(m, key)
			if !ok {
				continue
			}
			stat := key
			if pm := k6Percentile.FindStringSubmatch(key); pm != nil {
				p, err := strconv.ParseFloat(pm[1], 64)
				if err != nil {
					continue
				}
				stat = percentileName(p)
			} else if !slices.Contains([]string{"avg", "min", "med", "max"}, key) {
				continue
			}
			r.add(name+"_"+stat+"_ms", v, results.BetterLower, "ms", toolLatencyMerge(key))
		}
	}
	if m, ok := doc.Metrics["http_req_duration"]; ok {
		op := r.op("http_req")
		if v, ok := num(doc.Metrics["http_reqs"], "count"); ok {
			op.Count = int64(v)
		}
		if v, ok := num(m, "avg"); ok {
			op.MeanMs = v
		}
		for key := range m {
			v, ok := num(m, key)
			switch {
			case !ok:
			case key == "med":
				op.PercentilesMs["50"] = v
			case key == "max":
				op.PercentilesMs["100"] = v
			default:
				if pm := k6Percentile.FindStringSubmatch(key); pm != nil {
					if p, err := strconv.ParseFloat(pm[1], 64); err == nil {
						op.PercentilesMs[percentileKey(p)] = v
					}
				}
			}
		}
	}
	if v, ok := r.Figures["http_reqs_per_s"]; ok {
		r.Throughput = v
	} else {
		r.Throughput = r.Figures["iterations_per_s"]
	}
	if v, ok := num(doc.Metrics["http_req_failed"], "value"); ok {
		r.add("http_req_failed_rate", v, results.BetterLower, "", results.MergeMean)
	}
	if v, ok := num(doc.Metrics["checks"], "value"); ok {
		r.add("checks_rate", v, results.BetterHigher, "", results.MergeMean)
	}
	if len(r.Figures) == 0 {
		return r, fmt.Errorf("%s has none of http_reqs, iterations, http_req_duration, iteration_duration, http_req_failed, checks", k6SummaryFile)
	}
	return r, nil
}

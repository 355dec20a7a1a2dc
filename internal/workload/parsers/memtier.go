package parsers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"ctrperf/internal/results"
)

// memtier_benchmark --json-out-file=memtier.json writes, under "ALL
// STATS", one object per command type (Sets, Gets, Waits, the --command
// names) and Totals:
//
//	"Sets": {"Count": 1000, "Ops/sec": 51234.5, "Hits/sec": 0, "Misses/sec": 0,
//	         "Latency": 0.58, "KB/sec": 3900.1,
//	         "Percentile Latencies": {"p50.00": 0.5, "p99.00": 1.2, "p99.90": 2.1}}
//
// (Count and Percentile Latencies since 2.0); 1.x versions write the
// latency histogram instead, as arrays "SET", "GET" of {"<=msec": 0.1,
// "percent": 12.5} with the cumulative percent. Latencies are in ms.
const memtierFile = "memtier.json"

func init() {
	register(Parser{
		Name: "memtier", Program: "memtier_benchmark",
		Install: "no Debian package in bookworm: build it from github.com/RedisLabs/memtier_benchmark (autoreconf -ivf && ./configure && make && make install; needs libevent-dev, libpcre3-dev, libssl-dev, zlib1g-dev)",
		Files:   []string{memtierFile},
		Hint:    "run it with --json-out-file=" + memtierFile + " (a relative path: the working directory, which ctrperf reads and removes)",
		Figures: []Figure{
			{Name: "<op>_per_s", Better: results.BetterHigher, Unit: "ops/s", Doc: "Ops/sec of each command type (sets_per_s, gets_per_s) and of all (ops_per_s)"},
			{Name: "<op>_latency_ms", Better: results.BetterLower, Unit: "ms", Doc: "mean latency"},
			{Name: "<op>_p50_ms, <op>_p99_ms, <op>_p999_ms, …", Better: results.BetterLower, Unit: "ms", Doc: "latency percentiles (--print-percentiles chooses them; 1.x: from its histogram)"},
			{Name: "hits_per_s, misses_per_s", Unit: "/s", Doc: "GET hits and misses (neither better)"},
		},
		Parse: parseMemtier,
	})
}

var memtierPercentile = regexp.MustCompile(`^p([0-9.]+)$`)

func jsonFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

func parseMemtier(o Output) (Result, error) {
	var r Result
	data, ok := o.Files[memtierFile]
	if !ok {
		return r, fmt.Errorf("memtier_benchmark wrote no %s in its working directory: run it with --json-out-file=%s; stdout ends: %s", memtierFile, memtierFile, tail(o.Stdout))
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return r, fmt.Errorf("%s: %v", memtierFile, err)
	}
	all, _ := doc["ALL STATS"].(map[string]any)
	if all == nil {
		return r, fmt.Errorf("%s has no \"ALL STATS\" object", memtierFile)
	}
	types := make([]string, 0, len(all))
	for k := range all {
		types = append(types, k)
	}
	sort.Strings(types)
	for _, typ := range types {
		st, ok := all[typ].(map[string]any)
		if !ok {
			continue
		}
		ops, ok := jsonFloat(st["Ops/sec"])
		if !ok {
			continue // Runtime, CPU
		}
		count, hasCount := jsonFloat(st["Count"])
		if typ != "Totals" && ops == 0 && (!hasCount || count == 0) {
			continue // a type the run did not use (Waits)
		}
		name := opName(typ)
		if typ == "Totals" {
			name = "ops"
			if v, ok := jsonFloat(st["Hits/sec"]); ok {
				r.add("hits_per_s", v, "", "/s", results.MergeSum)
			}
			if v, ok := jsonFloat(st["Misses/sec"]); ok {
				r.add("misses_per_s", v, "", "/s", results.MergeSum)
			}
		}
		r.add(name+"_per_s", ops, results.BetterHigher, "ops/s", results.MergeSum)
		var op *results.Operation
		if typ != "Totals" {
			op = r.op(typ)
			op.Count = int64(count)
		}
		lat, ok := jsonFloat(st["Latency"])
		if v, ok2 := jsonFloat(st["Average Latency"]); ok2 {
			lat, ok = v, true
		}
		if ok {
			r.add(name+"_latency_ms", lat, results.BetterLower, "ms", results.MergeMean)
			if op != nil {
				op.MeanMs = lat
			}
		}
		pl, _ := st["Percentile Latencies"].(map[string]any)
		for key, v := range pl {
			m := memtierPercentile.FindStringSubmatch(key)
			f, ok := jsonFloat(v)
			if m == nil || !ok {
				continue
			}
			p, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				continue
			}
			r.add(name+"_"+percentileName(p)+"_ms", f, results.BetterLower, "ms", results.MergeMax)
			if op != nil {
				op.PercentilesMs[percentileKey(p)] = f
			}
		}
	}
	// 1.x: percentiles from the cumulative histograms.
	for _, h := range []struct{ key, typ string }{{"SET", "Sets"}, {"GET", "Gets"}} {
		buckets, ok := all[h.key].([]any)
		if !ok || len(buckets) == 0 {
			continue
		}
		name := opName(h.typ)
		for _, p := range []float64{50, 99, 99.9} {
			if _, done := r.Figures[name+"_"+percentileName(p)+"_ms"]; done {
				continue
			}
			for _, b := range buckets {
				bm, _ := b.(map[string]any)
				ms, ok1 := jsonFloat(bm["<=msec"])
				pct, ok2 := jsonFloat(bm["percent"])
				if ok1 && ok2 && pct >= p {
					r.add(name+"_"+percentileName(p)+"_ms", ms, results.BetterLower, "ms", results.MergeMax)
					if op := r.Operations[h.typ]; op != nil {
						op.PercentilesMs[percentileKey(p)] = ms
					}
					break
				}
			}
		}
	}
	r.Throughput = r.Figures["ops_per_s"]
	if _, ok := r.Figures["ops_per_s"]; !ok {
		return r, fmt.Errorf("%s: \"ALL STATS\" has no Totals with Ops/sec", memtierFile)
	}
	return r, nil
}

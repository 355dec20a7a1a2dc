package parsers

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParsersOnFixtures runs every parser on outputs of the real tools
// (redis-benchmark 7.0.15, pgbench 15.18, wrk 4.1.0, captured on this
// machine) or written in their documented formats (memtier_benchmark 1.x
// and 2.x --json-out-file, k6's --summary-export).
func TestParsersOnFixtures(t *testing.T) {
	type want map[string]float64
	tests := []struct {
		desc, parser string
		out          func(t *testing.T) Output
		want         want
		better       map[string]string
		ops          map[string]map[string]float64 // operation -> percentile -> ms
		opCount      map[string]int64
		throughput   float64
	}{
		{desc: "redis-benchmark --csv, SET and GET", parser: "redis-benchmark",
			out: func(t *testing.T) Output { return Output{Stdout: fixture(t, "redis-setget.csv")} },
			want: want{"set_per_s": 56022.41, "get_per_s": 84388.19, "set_avg_ms": 0.535, "set_p50_ms": 0.367, "set_p95_ms": 0.719,
				"set_p99_ms": 1.263, "set_min_ms": 0.048, "set_max_ms": 45.055, "get_p99_ms": 0.695},
			better: map[string]string{"set_per_s": results.BetterHigher, "get_p99_ms": results.BetterLower},
			ops:    map[string]map[string]float64{"SET": {"50": 0.367, "99": 1.263, "100": 45.055, "0": 0.048}, "GET": {"95": 0.455}}},
		{desc: "redis-benchmark, tests with spaces in their names", parser: "redis-benchmark",
			out:  func(t *testing.T) Output { return Output{Stdout: fixture(t, "redis-mixed.csv")} },
			want: want{"set_per_s": 90909.09, "lpush_per_s": 105263.16, "mset_10_keys_per_s": 90909.09, "mset_10_keys_p99_ms": 4.367}},
		{desc: "redis-benchmark: the throughput of all tests is the harmonic mean of their rates", parser: "redis-benchmark",
			out:  func(t *testing.T) Output { return Output{Stdout: []byte("\"SET\",\"100\"\n\"GET\",\"300\"\n")} },
			want: want{"set_per_s": 100}, throughput: 150},
		{desc: "redis-benchmark before 6.2: no header, only rps", parser: "redis-benchmark",
			out: func(t *testing.T) Output {
				return Output{Stdout: []byte("\"SET\",\"83333.33\"\n\"GET\",\"90909.09\"\n")}
			},
			want: want{"set_per_s": 83333.33, "get_per_s": 90909.09}},
		{desc: "pgbench select-only summary", parser: "pgbench",
			out:     func(t *testing.T) Output { return Output{Stdout: fixture(t, "pgbench-select.txt")} },
			want:    want{"tps": 16144.490294, "latency_avg_ms": 0.248, "connection_ms": 46.337, "transactions_failed": 0},
			better:  map[string]string{"tps": results.BetterHigher, "latency_avg_ms": results.BetterLower, "transactions_failed": results.BetterLower},
			opCount: map[string]int64{"transaction": 47689}},
		{desc: "pgbench TPC-B with --progress=1 on stderr", parser: "pgbench",
			out: func(t *testing.T) Output {
				return Output{Stdout: fixture(t, "pgbench-tpcb-progress.txt"), Stderr: fixture(t, "pgbench-tpcb-progress.err")}
			},
			want: want{"tps": 390.908715, "latency_stddev_ms": 5.835, "progress_tps_min": 308, "progress_tps_median": 404, "progress_lat_max_ms": 6.278}},
		{desc: "pgbench -l: percentiles from the transaction logs of both threads", parser: "pgbench",
			out: func(t *testing.T) Output {
				return Output{Stdout: fixture(t, "pgbench-select.txt"), Files: map[string][]byte{
					"pgbench_log.15166": fixture(t, "pgbench_log.15166"), "pgbench_log.15166.1": fixture(t, "pgbench_log.15166.1")}}
			},
			// 250 transactions, the slowest 4832 µs.
			want: want{"tps": 16144.490294, "latency_max_ms": 4.832},
			ops:  map[string]map[string]float64{"transaction": {"100": 4.832}}},
		{desc: "pgbench before 14: the tps excluding connections", parser: "pgbench",
			out: func(t *testing.T) Output {
				return Output{Stdout: []byte("tps = 100.5 (including connections establishing)\ntps = 101.5 (excluding connections establishing)\n")}
			},
			want: want{"tps": 101.5}},
		{desc: "wrk --latency", parser: "wrk",
			out: func(t *testing.T) Output { return Output{Stdout: fixture(t, "wrk-latency.txt")} },
			want: want{"requests_per_s": 1087.66, "transfer_mb_per_s": 1.26, "latency_avg_ms": 3.72, "latency_stdev_ms": 2.12, "latency_max_ms": 14.74,
				"latency_p50_ms": 3.34, "latency_p75_ms": 4.96, "latency_p90_ms": 6.55, "latency_p99_ms": 10.33, "requests_errors": 0},
			opCount: map[string]int64{"request": 2181}},
		{desc: "wrk with socket errors and non-2xx responses", parser: "wrk",
			out:  func(t *testing.T) Output { return Output{Stdout: fixture(t, "wrk-errors.txt")} },
			want: want{"requests_errors": 10}},
		{desc: "wrk without --latency, microseconds and seconds", parser: "wrk",
			out: func(t *testing.T) Output {
				return Output{Stdout: []byte("  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   635.91us    1.03ms    1.20s   93.97%\n  210185 requests in 10.01s, 25.05MB read\nRequests/sec:  20997.01\nTransfer/sec:    512.00KB\n")}
			},
			want: want{"latency_avg_ms": 0.63591, "latency_max_ms": 1200, "transfer_mb_per_s": 0.5}},
		{desc: "memtier 2.x --json-out-file", parser: "memtier",
			out: func(t *testing.T) Output {
				return Output{Files: map[string][]byte{"memtier.json": fixture(t, "memtier-2x.json")}}
			},
			want: want{"ops_per_s": 487804.14, "sets_per_s": 44345.12, "gets_per_s": 443459.02, "sets_latency_ms": 0.40812,
				"gets_p99_ms": 1.015, "gets_p999_ms": 3.007, "ops_p50_ms": 0.367, "hits_per_s": 39000.10},
			better:  map[string]string{"hits_per_s": "", "sets_per_s": results.BetterHigher},
			opCount: map[string]int64{"Sets": 181818, "Gets": 1818182}},
		{desc: "memtier 1.x: percentiles from the histogram", parser: "memtier",
			out: func(t *testing.T) Output {
				return Output{Files: map[string][]byte{"memtier.json": fixture(t, "memtier-1x.json")}}
			},
			want: want{"ops_per_s": 220000, "sets_p50_ms": 1, "sets_p99_ms": 2, "gets_p99_ms": 1, "gets_p999_ms": 3}},
		{desc: "k6 --summary-export", parser: "k6",
			out: func(t *testing.T) Output {
				return Output{Files: map[string][]byte{"k6-summary.json": fixture(t, "k6-summary.json")}}
			},
			want: want{"http_reqs_per_s": 59.93, "iterations_per_s": 59.93, "http_req_duration_avg_ms": 1.2345, "http_req_duration_med_ms": 1.102,
				"http_req_duration_p95_ms": 2.544, "iteration_duration_p90_ms": 21, "http_req_failed_rate": 0.005, "checks_rate": 0.995},
			better:  map[string]string{"http_req_failed_rate": results.BetterLower, "checks_rate": results.BetterHigher},
			ops:     map[string]map[string]float64{"http_req": {"50": 1.102, "90": 2.031, "95": 2.544, "100": 9.876}},
			opCount: map[string]int64{"http_req": 1800}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, ok := Get(tc.parser)
			if !ok {
				t.Fatalf("no parser %q (have %v)", tc.parser, Names())
			}
			r, err := p.Parse(tc.out(t))
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range tc.want {
				got, ok := r.Figures[name]
				if !ok {
					t.Errorf("no figure %s (have %v)", name, r.Figures)
					continue
				}
				if math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
					t.Errorf("%s = %v, want %v", name, got, v)
				}
				if _, ok := r.Declared[name]; !ok {
					t.Errorf("%s has no declaration", name)
				}
			}
			if r.Throughput <= 0 || tc.throughput > 0 && math.Abs(r.Throughput-tc.throughput) > 1e-9 {
				t.Errorf("throughput %v, want %v", r.Throughput, tc.throughput)
			}
			for name, b := range tc.better {
				if r.Declared[name].Better != b {
					t.Errorf("%s better = %q, want %q", name, r.Declared[name].Better, b)
				}
			}
			for op, ps := range tc.ops {
				o := r.Operations[op]
				if o == nil {
					t.Fatalf("no operation %s (have %v)", op, r.Operations)
				}
				for k, v := range ps {
					if math.Abs(o.PercentilesMs[k]-v) > 1e-9 {
						t.Errorf("%s p%s = %v, want %v", op, k, o.PercentilesMs[k], v)
					}
				}
			}
			for op, n := range tc.opCount {
				if o := r.Operations[op]; o == nil || o.Count != n {
					t.Errorf("operation %s count: %+v, want %d", op, o, n)
				}
			}
		})
	}
}

// TestParsersRefuseOutputWithoutFigures: a parser given what its tool
// prints when it was not asked for its format (or failed) says what to
// ask for and quotes the end of the output.
func TestParsersRefuseOutputWithoutFigures(t *testing.T) {
	tests := []struct {
		desc, parser string
		out          Output
		want         []string
	}{
		{"redis-benchmark without --csv", "redis-benchmark", Output{Stdout: []byte("====== SET ======\n  100000 requests completed in 1.2 seconds\nSummary:\n  throughput summary: 83333.33 requests per second\n")}, []string{"--csv", "throughput summary"}},
		{"pgbench that stopped early", "pgbench", Output{Stdout: []byte("pgbench (15.18)\n"), Stderr: []byte("pgbench: error: connection to server failed\n")}, []string{"tps = ", "connection to server failed"}},
		{"pgbench -l with --aggregate-interval", "pgbench", Output{Stdout: fixture(t, "pgbench-select.txt"), Files: map[string][]byte{"pgbench_log.1": []byte("1764100000 10 2480 620000 100 900\n")}}, []string{"aggregate-interval"}},
		{"wrk that could not connect", "wrk", Output{Stdout: []byte("unable to connect to 127.0.0.1:1 Connection refused\n")}, []string{"Requests/sec", "unable to connect"}},
		{"memtier without the JSON file", "memtier", Output{Stdout: []byte("ALL STATS\n")}, []string{"--json-out-file=memtier.json"}},
		{"memtier with a broken JSON file", "memtier", Output{Files: map[string][]byte{"memtier.json": []byte("{\"ALL STATS\": {")}}, []string{"memtier.json"}},
		{"k6 without --summary-export", "k6", Output{Stdout: []byte("http_reqs......: 180 4.36/s\n")}, []string{"--summary-export=k6-summary.json"}},
		{"k6 summary without known metrics", "k6", Output{Files: map[string][]byte{"k6-summary.json": []byte(`{"metrics": {"vus": {"value": 1}}}`)}}, []string{"none of"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, _ := Get(tc.parser)
			_, err := p.Parse(tc.out)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestParsersDeclareThemselves: every parser says which program it reads,
// where that comes from and what it reports, each figure with a direction
// or a reason to have none.
func TestParsersDeclareThemselves(t *testing.T) {
	want := []string{"k6", "memtier", "pgbench", "redis-benchmark", "wrk"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("parsers %v, want %v", got, want)
	}
	for _, n := range Names() {
		p, _ := Get(n)
		if p.Program == "" || p.Install == "" || p.Hint == "" || len(p.Figures) == 0 || p.Parse == nil {
			t.Errorf("%s: incomplete declaration %+v", n, p)
		}
		if q, ok := ByProgram(p.Program); !ok || q.Name != n {
			t.Errorf("ByProgram(%s) = %v, %v", p.Program, q.Name, ok)
		}
	}
	if p, _ := Get("redis-benchmark"); !strings.Contains(p.Install, "redis-tools") {
		t.Errorf("redis-benchmark's install advice %q names no Debian package", p.Install)
	}
}

func TestOpName(t *testing.T) {
	for in, want := range map[string]string{"SET": "set", "MSET (10 keys)": "mset_10_keys", "LRANGE_100 (first 100 elements)": "lrange_100_first_100_elements",
		"Gets": "gets", "100": "op_100"} {
		if got := opName(in); got != want {
			t.Errorf("opName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParsersRefuseFiguresThatDoNotParse: a figure that matches a tool's
// pattern but is no number ("1.2.3") is an error quoting it, never 0
// (issue 37 item 8).
func TestParsersRefuseFiguresThatDoNotParse(t *testing.T) {
	wrk := "Running 2s test @ http://127.0.0.1:8080/\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     3.72ms    2.12ms  14.74ms   71.44%%\n  Latency Distribution\n     50%%    %s\n  %s requests in 2.01s, 2.53MB read\nRequests/sec:   %s\nTransfer/sec:      1.26MB\n"
	pg := "number of transactions actually processed: %s\nnumber of failed transactions: 0 (0.000%%)\nlatency average = %s ms\ntps = %s (without initial connection time)\n"
	tests := []struct {
		desc, parser string
		out          string
		want         string // "": parses
	}{
		{"wrk, all numbers", "wrk", fmt.Sprintf(wrk, "3.34ms", "2181", "1087.66"), ""},
		{"wrk rate", "wrk", fmt.Sprintf(wrk, "3.34ms", "2181", "1.0.87"), `Requests/sec "1.0.87"`},
		{"wrk percentile", "wrk", fmt.Sprintf(wrk, "3.3.4ms", "2181", "1087.66"), `"3.3.4"`},
		{"wrk count", "wrk", fmt.Sprintf(wrk, "3.34ms", "99999999999999999999", "1087.66"), `requests "99999999999999999999"`},
		{"pgbench, all numbers", "pgbench", fmt.Sprintf(pg, "47689", "0.248", "16144.49"), ""},
		{"pgbench tps", "pgbench", fmt.Sprintf(pg, "47689", "0.248", "16.144.49"), `tps "16.144.49"`},
		{"pgbench latency", "pgbench", fmt.Sprintf(pg, "47689", "0..248", "16144.49"), `latency average "0..248"`},
		{"pgbench count", "pgbench", fmt.Sprintf(pg, "99999999999999999999", "0.248", "16144.49"), `processed "99999999999999999999"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, _ := Get(tc.parser)
			_, err := p.Parse(Output{Stdout: []byte(tc.out)})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("good output refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("no error; want one naming %s", tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// TestParsersDeclareMerges: the figures a parser reports say how they
// merge over generators side by side (issue 37 item 2): rates add up, a
// mean is weighted, a tool's percentile without histogram is the worst,
// a spread declares none (it is kept per generator).
func TestParsersDeclareMerges(t *testing.T) {
	tests := []struct {
		parser string
		out    Output
		want   map[string]results.Merge
	}{
		{"wrk", Output{Stdout: fixture(t, "wrk-latency.txt")}, map[string]results.Merge{"requests_per_s": results.MergeSum,
			"latency_avg_ms": results.MergeMean, "latency_p99_ms": results.MergeMax, "latency_stdev_ms": ""}},
		{"redis-benchmark", Output{Stdout: fixture(t, "redis-setget.csv")}, map[string]results.Merge{"set_per_s": results.MergeSum,
			"set_min_ms": results.MergeMin, "set_p99_ms": results.MergeMax, "set_avg_ms": results.MergeMean}},
	}
	for _, tc := range tests {
		t.Run(tc.parser, func(t *testing.T) {
			p, _ := Get(tc.parser)
			r, err := p.Parse(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				info, ok := r.Declared[name]
				if !ok || info.Merge != want {
					t.Errorf("%s: merge %q (declared %v), want %q", name, info.Merge, ok, want)
				}
			}
		})
	}
}

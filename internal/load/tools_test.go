package load

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestParseFio(t *testing.T) {
	tests := []struct {
		desc     string
		file     string
		ops      map[string]int64 // label → count
		iops     float64
		duration float64
		p50Ms    map[string]float64
	}{
		{desc: "4k random read/write job, json+ with bins", file: "testdata/fio-randrw.json",
			ops: map[string]int64{"randrw/read": 23521, "randrw/write": 23500}, duration: 2.001},
		{desc: "two jobs: sequential writes with fsync, random reads", file: "testdata/fio-two-jobs.json",
			ops: map[string]int64{"seqw/write": 8, "seqw/sync": 1, "randr/read": 15290}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := ParseFio(f)
			if err != nil {
				t.Fatal(err)
			}
			if m.Tools["fio"] != "fio-3.33" {
				t.Errorf("tool version %q", m.Tools["fio"])
			}
			for label, want := range tc.ops {
				op := m.Operations[label]
				if op == nil {
					t.Fatalf("no operation %q in %v", label, keys(m.Operations))
				}
				if label == "randrw/write" {
					want = op.Count // fio picks the split; only check read exactly
				}
				if op.Count != want {
					t.Errorf("%s count = %d, want %d", label, op.Count, want)
				}
				if op.Histogram == "" {
					t.Errorf("%s has no histogram from the json+ bins", label)
					continue
				}
				h, err := results.DecodeHistogram(op.Histogram)
				if err != nil {
					t.Fatal(err)
				}
				// json+ bins hold every completion: the histogram must count them all.
				if h.TotalCount() != op.Count {
					t.Errorf("%s histogram holds %d values, want %d", label, h.TotalCount(), op.Count)
				}
				// fio's own median (ns) and the histogram's must agree within bin precision.
				p50 := op.PercentilesMs["50"]
				if got := float64(h.ValueAtQuantile(50)) / 1000; math.Abs(got-p50) > 0.02*p50+0.002 {
					t.Errorf("%s median from bins %.4f ms, fio says %.4f ms", label, got, p50)
				}
			}
			var sum float64
			for _, k := range []string{"read_iops", "write_iops"} {
				sum += m.Metrics[k]
			}
			if !near(m.Metrics["throughput_per_s"], sum) || sum == 0 {
				t.Errorf("throughput_per_s %v, read+write iops %v", m.Metrics["throughput_per_s"], sum)
			}
			if tc.duration != 0 && !near(m.DurationS, tc.duration) {
				t.Errorf("duration %v, want %v", m.DurationS, tc.duration)
			}
		})
	}
}

func TestParseFioRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "fio: no job file\n", `{"jobs": []}`} {
		if _, err := ParseFio(strings.NewReader(in)); err == nil {
			t.Errorf("ParseFio(%q) succeeded", in)
		}
	}
}

func TestParseSysbench(t *testing.T) {
	tests := []struct {
		desc       string
		file       string
		label      string
		throughput float64
		count      int64
		errors     int64
		pct        string
		pctMs      float64
		metrics    map[string]float64
	}{
		{desc: "cpu: events per second", file: "testdata/sysbench-cpu.txt", label: "cpu",
			throughput: 4185.52, count: 8375, pct: "95", pctMs: 0.28, metrics: map[string]float64{"elapsed_s": 2.0001}},
		{desc: "oltp_read_write: tps, qps and ignored errors", file: "testdata/sysbench-oltp-rw.txt", label: "oltp_read_write",
			throughput: 759.66, count: 2281, errors: 7, pct: "95", pctMs: 5.37,
			metrics: map[string]float64{"queries_per_s": 15232.21, "ignored_errors": 7}},
		{desc: "oltp_read_only with the 99th percentile", file: "testdata/sysbench-oltp-ro.txt", label: "oltp_read_only",
			throughput: 730.93, count: 1464, pct: "99", pctMs: 4.33},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := ParseSysbench(f, tc.label)
			if err != nil {
				t.Fatal(err)
			}
			if m.Tools["sysbench"] != "sysbench 1.0.20" {
				t.Errorf("version %q", m.Tools["sysbench"])
			}
			if !near(m.Metrics["throughput_per_s"], tc.throughput) {
				t.Errorf("throughput %v, want %v", m.Metrics["throughput_per_s"], tc.throughput)
			}
			op := m.Operations[tc.label]
			if op == nil || op.Count != tc.count {
				t.Fatalf("operation %s = %+v, want count %d", tc.label, op, tc.count)
			}
			if op.ErrorCount() != tc.errors {
				t.Errorf("errors %d, want %d", op.ErrorCount(), tc.errors)
			}
			if !near(op.PercentilesMs[tc.pct], tc.pctMs) {
				t.Errorf("p%s = %v, want %v", tc.pct, op.PercentilesMs[tc.pct], tc.pctMs)
			}
			if op.MeanMs == 0 || op.PercentilesMs["max"] == 0 {
				t.Errorf("latency block not parsed: %+v", op)
			}
			for k, v := range tc.metrics {
				if !near(m.Metrics[k], v) {
					t.Errorf("metric %s = %v, want %v", k, m.Metrics[k], v)
				}
			}
		})
	}
	if _, err := ParseSysbench(strings.NewReader("FATAL: unable to connect\n"), "oltp"); err == nil {
		t.Error("a failed sysbench run parsed as a report")
	}
}

func TestParseStressNG(t *testing.T) {
	tests := []struct {
		desc  string
		parse func(string) (*results.Measurement, error)
		file  string
		ops   map[string]int64
		total float64
	}{
		{"yaml: fork and cpu", yamlFile, "testdata/stress-fork-cpu.yaml", map[string]int64{"fork": 4691, "cpu": 3325}, 2345.236362 + 1662.159983},
		{"yaml: exec as an unprivileged user", yamlFile, "testdata/stress-exec.yaml", map[string]int64{"exec": 1141}, 505.574595},
		{"log: metrics-brief table", logFile, "testdata/stress-fork-cpu.stderr", map[string]int64{"fork": 4691, "cpu": 3325}, 2345.24 + 1662.16},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := tc.parse(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.ops {
				if op := m.Operations[k]; op == nil || op.Count != want {
					t.Errorf("%s = %+v, want %d bogo ops", k, op, want)
				}
			}
			if !near(m.Metrics["throughput_per_s"], tc.total) {
				t.Errorf("throughput %v, want %v", m.Metrics["throughput_per_s"], tc.total)
			}
		})
	}
	if _, err := ParseStressNGLog(strings.NewReader("stress-ng: info:  [1] exec stressor must not run as root, skipping the stressor\n")); err == nil {
		t.Error("a run where every stressor was skipped parsed as metrics")
	}
}

func yamlFile(p string) (*results.Measurement, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseStressNGYAML(f)
}

func logFile(p string) (*results.Measurement, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseStressNGLog(f)
}

// fakeExec answers argv by its first two words from canned files.
type fakeExec struct {
	out   map[string]string // "fio --version" → file or literal "=text"
	code  int
	err   error
	calls [][]string
}

func (f *fakeExec) exec(_ context.Context, argv []string) ([]byte, []byte, int, error) {
	f.calls = append(f.calls, argv)
	if f.err != nil {
		return nil, nil, -1, f.err
	}
	key := argv[0]
	if len(argv) > 1 {
		key += " " + argv[1]
	}
	src, ok := f.out[key]
	if !ok {
		return nil, []byte("no such command"), 127, nil
	}
	if strings.HasPrefix(src, "=") {
		return []byte(src[1:]), nil, 0, nil
	}
	b, err := os.ReadFile(src)
	return b, nil, f.code, err
}

func TestRunWrappers(t *testing.T) {
	ctx := context.Background()
	t.Run("fio runs with json+ and records its version", func(t *testing.T) {
		fe := &fakeExec{out: map[string]string{"fio --version": "=fio-3.33\n", "fio --output-format=json+": "testdata/fio-randrw.json"}}
		m, err := RunFio(ctx, fe.exec, "--name=x", "--rw=randrw")
		if err != nil {
			t.Fatal(err)
		}
		if m.Tools["fio"] != "fio-3.33" || m.Operations["randrw/read"] == nil {
			t.Errorf("tools %v, ops %v", m.Tools, keys(m.Operations))
		}
		if got := strings.Join(fe.calls[1], " "); got != "fio --output-format=json+ --name=x --rw=randrw" {
			t.Errorf("argv %q", got)
		}
	})
	t.Run("sysbench labels the operation by its test", func(t *testing.T) {
		fe := &fakeExec{out: map[string]string{"sysbench --version": "=sysbench 1.0.20\n", "sysbench --threads=1": "testdata/sysbench-cpu.txt"}}
		m, err := RunSysbench(ctx, fe.exec, "--threads=1", "cpu", "run")
		if err != nil {
			t.Fatal(err)
		}
		if m.Operations["cpu"] == nil || m.Tools["sysbench"] != "sysbench 1.0.20" {
			t.Errorf("ops %v tools %v", keys(m.Operations), m.Tools)
		}
	})
	t.Run("stress-ng asks for yaml on stdout", func(t *testing.T) {
		fe := &fakeExec{out: map[string]string{"stress-ng --version": "=stress-ng, version 0.15.06\n", "stress-ng --fork": "testdata/stress-fork-cpu.yaml"}}
		m, err := RunStressNG(ctx, fe.exec, "--fork", "1", "--timeout", "2s")
		if err != nil {
			t.Fatal(err)
		}
		if m.Tools["stress-ng"] != "stress-ng, version 0.15.06" || m.Operations["fork"] == nil {
			t.Errorf("tools %v ops %v", m.Tools, keys(m.Operations))
		}
		if got := strings.Join(fe.calls[1], " "); !strings.HasSuffix(got, "--metrics-brief --yaml /dev/stdout") {
			t.Errorf("argv %q", got)
		}
	})
	t.Run("a missing version is a note, not a failure", func(t *testing.T) {
		fe := &fakeExec{out: map[string]string{"fio --output-format=json+": "testdata/fio-randrw.json"}}
		m, err := RunFio(ctx, fe.exec)
		if err != nil {
			t.Fatal(err)
		}
		if m.Tools["fio"] != "fio-3.33" || len(m.Notes) == 0 {
			t.Errorf("want version from the report and a note, got %v %v", m.Tools, m.Notes)
		}
	})
	t.Run("an exec failure is an error naming the tool", func(t *testing.T) {
		fe := &fakeExec{err: errors.New("container gone")}
		_, err := RunSysbench(ctx, fe.exec, "cpu", "run")
		if err == nil || !strings.Contains(err.Error(), "sysbench") || !strings.Contains(err.Error(), "container gone") {
			t.Errorf("err = %v", err)
		}
	})
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// TestToolParsersRefuseFiguresThatDoNotParse: sysbench's and stress-ng's
// figures that match their patterns but are no numbers are errors quoting
// them, never 0 (issue 37 item 8).
func TestToolParsersRefuseFiguresThatDoNotParse(t *testing.T) {
	tests := []struct {
		desc  string
		parse func(string) (*results.Measurement, error)
		in    string
		want  string // "": parses
	}{
		{"sysbench, all numbers", sysbench, "    transactions:                        2281   (759.66 per sec.)\n", ""},
		{"sysbench rate", sysbench, "    transactions:                        2281   (759.6.6 per sec.)\n", `"759.6.6"`},
		{"sysbench count", sysbench, "    transactions:                        99999999999999999999   (759.66 per sec.)\n", `"99999999999999999999"`},
		{"sysbench key value", sysbench, "    events per second:  1.2.3\n", `events per second: "1.2.3"`},
		{"stress-ng, all numbers", stressLog, "stress-ng: metrc: [17304] fork   4691   2.00   0.94   0.94   2345.24   2488.88\n", ""},
		{"stress-ng bogo ops/s", stressLog, "stress-ng: metrc: [17304] fork   4691   2.00   0.94   0.94   2345.2.4   2488.88\n", `bogo ops/s "2345.2.4"`},
		{"stress-ng real time", stressLog, "stress-ng: metrc: [17304] fork   4691   2..00   0.94   0.94   2345.24   2488.88\n", `real time "2..00"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := tc.parse(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("good output refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("no error; want one quoting %s", tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not quote %s", err, tc.want)
			}
		})
	}
}

func sysbench(s string) (*results.Measurement, error) {
	return ParseSysbench(strings.NewReader(s), "event")
}
func stressLog(s string) (*results.Measurement, error) { return ParseStressNGLog(strings.NewReader(s)) }

package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"ctrperf/internal/results"
)

// ---- bonnie++ ----

// BonniePhase is one of bonnie++'s figures: a CSV column pair (rate, %CPU)
// and its latency column, and the metric names ctrperf records it under.
type BonniePhase struct {
	Name   string // ctrperf's name, the stem of the metrics ("seq_out_block")
	Column string // bonnie++'s CSV name of the rate ("put_block")
	Unit   string // "kib" (K/s of data), "seeks" or "files" (per second)
	rate   int    // index of the rate in the CSV line of format 1.98
}

// Metric is the name of the phase's rate: bonnie_<name>_kib_per_s,
// bonnie_random_seeks_per_s or bonnie_<name>_files_per_s.
func (p BonniePhase) Metric() string {
	switch p.Unit {
	case "kib":
		return "bonnie_" + p.Name + "_kib_per_s"
	case "files":
		return "bonnie_" + p.Name + "_files_per_s"
	}
	return "bonnie_" + p.Name + "_per_s"
}

// CPUMetric is the name of the phase's %CPU (of one CPU, as bonnie++ prints it).
func (p BonniePhase) CPUMetric() string { return "bonnie_" + p.Name + "_cpu_pct" }

// LatencyMetric is the name of the phase's latency: bonnie++'s maximum time
// of a single operation, in ms.
func (p BonniePhase) LatencyMetric() string { return "bonnie_" + p.Name + "_latency_max_ms" }

// BonniePhases are bonnie++'s figures in the order of its CSV line.
//
// The CSV line of bonnie++ 1.98 and 2.00 (format_version 1.98) has 50
// fields: 0 format_version, 1 bonnie_version, 2 name, 3 concurrency, 4 seed,
// 5 file_size, 6 io_chunk_size (empty for the default), 7 seeks, 8
// seek_proc_count, 9–20 putc, put_block, rewrite, getc, get_block, seeks
// (each rate then %CPU), 21 num_files, 22 max_size, 23 min_size, 24
// num_dirs, 25 file_chunk_size, 26–37 seq_create, seq_stat, seq_del,
// ran_create, ran_stat, ran_del (rate, %CPU), 38–49 the twelve latencies in
// the same order. The header bonnie++ 2.00a prints (-q prints none) still
// lacks seeks and seek_proc_count; bon_csv2txt reads the 50-field layout.
var BonniePhases = []BonniePhase{
	{"seq_out_char", "putc", "kib", 9},
	{"seq_out_block", "put_block", "kib", 11},
	{"seq_out_rewrite", "rewrite", "kib", 13},
	{"seq_in_char", "getc", "kib", 15},
	{"seq_in_block", "get_block", "kib", 17},
	{"random_seeks", "seeks", "seeks", 19},
	{"seq_create", "seq_create", "files", 26},
	{"seq_read", "seq_stat", "files", 28},
	{"seq_delete", "seq_del", "files", 30},
	{"rand_create", "ran_create", "files", 32},
	{"rand_read", "ran_stat", "files", 34},
	{"rand_delete", "ran_del", "files", 36},
}

const (
	bonnieFields        = 50
	bonnieLatencyColumn = 38
)

// BonniePhaseByColumn finds a phase by bonnie++'s column name or ctrperf's name.
func BonniePhaseByColumn(name string) (BonniePhase, bool) {
	for _, p := range BonniePhases {
		if p.Column == name || p.Name == name {
			return p, true
		}
	}
	return BonniePhase{}, false
}

// RunBonnie runs bonnie++ with args inside the target (args should hold -q,
// so that stdout is the CSV line and the text table goes to stderr) and
// parses the CSV line. primary names the phase whose rate becomes
// throughput_per_s.
func RunBonnie(ctx context.Context, exec ExecFunc, primary string, args ...string) (*results.Measurement, error) {
	argv := append([]string{"bonnie++"}, args...)
	// bonnie++ has no --version: its usage text (on an unknown option)
	// ends with "Version: 2.00a", and so does the CSV line.
	out, stderr, code, err := exec(ctx, argv)
	if err != nil {
		return nil, fmt.Errorf("run bonnie++ in target: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("bonnie++ exited with status %d: %s", code, tail(stderr))
	}
	m, perr := ParseBonnieCSV(bytes.NewReader(out), primary)
	if perr != nil {
		return nil, fmt.Errorf("bonnie++: %w (stderr: %s)", perr, tail(stderr))
	}
	return m, nil
}

// ParseBonnieCSV parses the last CSV line of bonnie++ 1.98/2.00 (format
// version 1.98) into a measurement: for each phase that ran and was timed,
// its rate, its %CPU and its maximum latency. A phase bonnie++ printed as
// "+++++" (it took under 500 ms, too short to time) or left empty (skipped)
// has no figure; the notes say which. throughput_per_s is the rate of the
// primary phase, which must have one.
func ParseBonnieCSV(r io.Reader, primary string) (*results.Measurement, error) {
	pp, ok := BonniePhaseByColumn(primary)
	if !ok {
		return nil, fmt.Errorf("unknown bonnie++ phase %q", primary)
	}
	var line string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		// The CSV line starts with the format version; a header (when
		// bonnie++ is run without -q) starts with "format_version".
		if t != "" && t[0] >= '0' && t[0] <= '9' && strings.Count(t, ",") > 10 {
			line = t
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read bonnie++ output: %w", err)
	}
	if line == "" {
		return nil, errors.New("no CSV line in bonnie++'s output")
	}
	rec, err := csv.NewReader(strings.NewReader(line)).Read()
	if err != nil {
		return nil, fmt.Errorf("parse bonnie++ CSV line: %w", err)
	}
	if rec[0] != "1.98" {
		return nil, fmt.Errorf("bonnie++ CSV format %s: ctrperf reads format 1.98 (bonnie++ 1.98 to 2.00a)", rec[0])
	}
	if len(rec) != bonnieFields {
		return nil, fmt.Errorf("bonnie++ CSV line has %d fields, format 1.98 has %d", len(rec), bonnieFields)
	}
	m := &results.Measurement{
		Operations: map[string]*results.Operation{},
		Metrics:    map[string]float64{},
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{"bonnie++": "bonnie++ " + rec[1]},
	}
	var tooFast, skipped []string
	for i, p := range BonniePhases {
		rate, cpu, lat := rec[p.rate], rec[p.rate+1], rec[bonnieLatencyColumn+i]
		switch {
		case rate == "":
			skipped = append(skipped, p.Column)
			continue
		case strings.HasPrefix(rate, "+"):
			tooFast = append(tooFast, p.Column)
			continue
		}
		v, err := strconv.ParseFloat(rate, 64)
		if err != nil {
			return nil, fmt.Errorf("bonnie++ %s = %q: not a number", p.Column, rate)
		}
		m.Metrics[p.Metric()] = v
		m.DeclareMerge(p.Metric(), results.MergeSum)
		if c, err := strconv.ParseFloat(cpu, 64); err == nil {
			m.Metrics[p.CPUMetric()] = c
			m.DeclareMerge(p.CPUMetric(), results.MergeMean)
		}
		if lat != "" {
			ms, err := bonnieLatencyMs(lat)
			if err != nil {
				return nil, fmt.Errorf("bonnie++ %s_latency: %w", p.Column, err)
			}
			m.Metrics[p.LatencyMetric()] = ms
			m.DeclareMerge(p.LatencyMetric(), results.MergeMax)
		}
	}
	if len(tooFast) > 0 {
		m.Notes = append(m.Notes, "bonnie++ could not time "+strings.Join(tooFast, ", ")+
			" (+++++: the phase took under 500 ms); raise load.size or load.files for a figure")
	}
	if len(skipped) > 0 {
		m.Notes = append(m.Notes, "bonnie++ skipped "+strings.Join(skipped, ", "))
	}
	if v, ok := m.Metrics[pp.Metric()]; ok {
		m.Metrics[results.MetricThroughput] = v
	} else {
		return m, fmt.Errorf("bonnie++ has no figure for the primary phase %s (%s)", pp.Column, strings.Join(m.Notes, "; "))
	}
	return m, nil
}

// bonnieLatencyMs reads a latency as bonnie++ prints it: "11631us", "213ms"
// or "12s" (it switches to the larger unit when the figure gets long).
func bonnieLatencyMs(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1000}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: not a duration", s)
			}
			return v * u.ms, nil
		}
	}
	return 0, fmt.Errorf("%q: not a duration (want us, ms or s)", s)
}

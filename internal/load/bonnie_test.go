package load

import (
	"os"
	"strings"
	"testing"

	"ctrperf/internal/results"
)

// The fixtures are bonnie++ 2.00a's stdout with -q (Debian bookworm's
// 2.00a+nmu1), captured on the development machine:
//
//	bonnie-2.00a-tiny.csv:        bonnie++ -d DIR -s 64 -r 32 -n 1 -u root -q -m ctrperf
//	bonnie-2.00a-direct-fast.csv: bonnie++ -d DIR -s 64 -r 0 -n 0 -u root -q -D -f
//
// 64 MiB is too small for the block phases to take 500 ms in the first
// (+++++), and the second skips the per-char and file phases (empty fields).
func TestParseBonnieCSV(t *testing.T) {
	f, err := os.Open("testdata/bonnie-2.00a-tiny.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParseBonnieCSV(f, "putc")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"bonnie_seq_out_char_kib_per_s":      312,
		"bonnie_seq_out_char_cpu_pct":        33,
		"bonnie_seq_out_char_latency_max_ms": 213,
		"bonnie_seq_in_char_kib_per_s":       494,
		"bonnie_seq_in_char_cpu_pct":         28,
		"bonnie_seq_in_char_latency_max_ms":  150,
		"bonnie_seq_create_files_per_s":      1097,
		"bonnie_seq_create_cpu_pct":          48,
		"bonnie_seq_create_latency_max_ms":   12.696,
		"bonnie_rand_create_files_per_s":     1683,
		"bonnie_rand_create_cpu_pct":         67,
		"bonnie_rand_create_latency_max_ms":  9.356,
		results.MetricThroughput:             312,
	}
	for k, v := range want {
		if got, ok := m.Metrics[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// +++++ phases have no figure, not a zero.
	for _, k := range []string{"bonnie_seq_out_block_kib_per_s", "bonnie_random_seeks_per_s", "bonnie_seq_read_files_per_s",
		"bonnie_seq_out_block_latency_max_ms"} {
		if v, ok := m.Metrics[k]; ok {
			t.Errorf("%s = %v: an untimed phase must have no figure", k, v)
		}
	}
	if len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "put_block") || !strings.Contains(m.Notes[0], "+++++") {
		t.Errorf("notes = %q", m.Notes)
	}
	if m.Tools["bonnie++"] != "bonnie++ 2.00a" {
		t.Errorf("tools = %v", m.Tools)
	}

	// The primary phase must have been timed.
	f2, _ := os.Open("testdata/bonnie-2.00a-tiny.csv")
	defer f2.Close()
	if _, err := ParseBonnieCSV(f2, "get_block"); err == nil || !strings.Contains(err.Error(), "no figure for the primary phase get_block") {
		t.Errorf("untimed primary: err = %v", err)
	}
}

func TestParseBonnieCSVSkippedPhases(t *testing.T) {
	f, err := os.Open("testdata/bonnie-2.00a-direct-fast.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParseBonnieCSV(f, "put_block")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Metrics[results.MetricThroughput]; got != 98504 {
		t.Errorf("throughput = %v, want put_block's 98504 K/s", got)
	}
	if got := m.Metrics["bonnie_seq_out_block_latency_max_ms"]; got != 11.528 {
		t.Errorf("put_block latency = %v", got)
	}
	if _, ok := m.Metrics["bonnie_seq_out_char_kib_per_s"]; ok {
		t.Error("skipped per-char phase has a figure")
	}
	if !strings.Contains(strings.Join(m.Notes, ";"), "skipped putc") {
		t.Errorf("notes = %q", m.Notes)
	}
}

func TestParseBonnieCSVRejects(t *testing.T) {
	line := "1.98,2.00a,x,1,1,64M,,8192,5,312,33,+++++,+++,+++++,+++,494,28,+++++,+++,+++++,+++,1,,,,,1097,48,+++++,+++,+++++,+++,1683,67,+++++,+++,+++++,+++,213ms,11631us,25030us,150ms,28100us,40730us,12696us,97us,5198us,9356us,58us,4724us"
	for _, tc := range []struct{ desc, in, primary, want string }{
		{"nothing", "", "putc", "no CSV line"},
		{"text table only", "Version 2.00a  ---Sequential Output---\n", "putc", "no CSV line"},
		{"old format", strings.Replace(line, "1.98,", "1.97,", 1), "putc", "format 1.97"},
		{"short line", strings.TrimSuffix(line, ",4724us"), "putc", "49 fields"},
		{"garbage rate", strings.Replace(line, ",312,", ",fast,", 1), "putc", `putc = "fast"`},
		{"garbage latency", strings.Replace(line, ",213ms,", ",213xs,", 1), "putc", "not a duration"},
		{"unknown primary", line, "seekz", "unknown bonnie++ phase"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseBonnieCSV(strings.NewReader(tc.in), tc.primary)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A header line (bonnie++ without -q) before the data is skipped.
	m, err := ParseBonnieCSV(strings.NewReader("format_version,bonnie_version,name\n"+line+"\n"), "getc")
	if err != nil || m.Metrics[results.MetricThroughput] != 494 {
		t.Fatalf("with header: %v, %v", m, err)
	}
}

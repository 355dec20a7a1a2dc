package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:9: boom\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":0.5}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (2.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":2}
{"Action":"output","Package":"p","Test":"TestB","Output":"quiet output of a passing test\n"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":7.5}
{"Action":"output","Package":"p","Test":"TestCDocker","Output":"    c_test.go:3: no engine\n"}
{"Action":"skip","Package":"p","Test":"TestCDocker","Elapsed":0}
{"Action":"output","Package":"p","Output":"FAIL\tp\t9.600s\n"}
{"Action":"fail","Package":"p","Elapsed":9.6}
{"Action":"output","Package":"q","Output":"ok  \tq\t0.100s\n"}
{"Action":"pass","Package":"q","Elapsed":0.1}
# ctrperf/broken
`
	var out strings.Builder
	s := newSummary(&out)
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		s.line(sc.Bytes())
	}
	s.finish(2)
	got := out.String()
	for _, want := range []string{
		"=== RUN   TestA\n    a_test.go:9: boom\n--- FAIL: TestA (2.00s)\n", // a failure in full, subtest included
		"FAIL\tp\t9.600s\n",
		"ok  \tq\t0.100s\n",
		"# ctrperf/broken\n", // not JSON: passed through
		"1 test(s) skipped:\n  p TestCDocker\n",
		"the 2 slowest tests:\n      7.5s  p TestB\n      2.0s  p TestA\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet output") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	if !s.failed {
		t.Error("a failed test did not fail the summary")
	}
}

func TestPhases(t *testing.T) {
	file := filepath.Join(t.TempDir(), "phases.tsv")
	if err := os.WriteFile(file, []byte("vet\t12\t\nintegration-kube\t250\tbeside vet, unit\ntotal\t700\t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := phases(&out, file); err != nil {
		t.Fatal(err)
	}
	want := "\nwall time of each phase:\n" +
		"               vet      12s (12 s)\n" +
		"  integration-kube    4m10s (250 s)  (beside vet, unit)\n" +
		"             total   11m40s (700 s)\n"
	if out.String() != want {
		t.Errorf("phases:\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	if err := phases(&out, filepath.Join(t.TempDir(), "none")); err != nil || out.Len() != 0 {
		t.Errorf("a missing file: %q, %v", out.String(), err)
	}
}

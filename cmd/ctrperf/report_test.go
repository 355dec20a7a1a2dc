package main

import (
	"bytes"
	"ctrperf/internal/exitcode"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureOut is the report package's generated results directory.
const fixtureOut = "../../internal/report/testdata/smoke"

func TestRunReport(t *testing.T) {
	tests := []struct {
		desc     string
		flags    reportFlags
		wantCode int    // exit code of an exitError, 0 for success
		contains string // in stdout
	}{
		{"table by default", reportFlags{format: "table", resamples: 200, seed: 1}, 0, "Versus baseline host"},
		{"json has vs_baseline", reportFlags{format: "json", resamples: 200, seed: 1}, 0, `"vs_baseline"`},
		{"another baseline", reportFlags{format: "md", baseline: "docker-published", resamples: 200, seed: 1}, 0, "## Versus baseline docker-published"},
		{"unknown format", reportFlags{format: "pdf", resamples: 200}, 2, ""},
		{"too few resamples", reportFlags{format: "table", resamples: 10}, 2, ""},
		{"unknown baseline", reportFlags{format: "table", baseline: "nope", resamples: 200}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var out bytes.Buffer
			err := runReport(&out, fixtureOut, tt.flags)
			if got := exitcode.Of(err); got != tt.wantCode {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.wantCode)
			}
			if !strings.Contains(out.String(), tt.contains) {
				t.Errorf("output lacks %q:\n%s", tt.contains, out.String())
			}
		})
	}
}

func TestRunReportWritesFiles(t *testing.T) {
	dir := t.TempDir()
	// html without -o lands in OUT/report.html: copy the fixture so the
	// repository's testdata stays untouched.
	b, err := os.ReadFile(filepath.Join(fixtureOut, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runReport(&out, dir, reportFlags{format: "html", resamples: 200, seed: 1}); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !bytes.Contains(html, []byte("<svg")) {
		t.Fatalf("OUT/report.html missing or without plots: %v", err)
	}
	jsonPath := filepath.Join(dir, "r.json")
	if err := runReport(&out, dir, reportFlags{format: "json", output: jsonPath, resamples: 200, seed: 1}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	b, _ = os.ReadFile(jsonPath)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Errorf("-o json is not JSON: %v", err)
	}
	if !strings.Contains(out.String(), "report written to "+jsonPath) {
		t.Errorf("stdout does not say where the report went: %q", out.String())
	}
}

func TestRunCompare(t *testing.T) {
	var out bytes.Buffer
	after := "../../internal/report/testdata/smoke-after"
	if err := runCompare(&out, fixtureOut, after, compareFlags{format: "table", resamples: 200, seed: 1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "docker-published") || !strings.Contains(out.String(), "faster") {
		t.Errorf("comparison lacks the expected verdict:\n%s", out.String())
	}
	if err := runCompare(&out, fixtureOut, after, compareFlags{format: "csv", resamples: 200}); exitcode.Of(err) != exitcode.Usage {
		t.Errorf("csv comparison: want a usage error, got %v", err)
	}
	if err := runCompare(&out, fixtureOut, "/nonexistent", compareFlags{format: "table", resamples: 200}); err == nil {
		t.Error("missing second directory accepted")
	}
}

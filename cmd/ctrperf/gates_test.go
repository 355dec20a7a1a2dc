package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compare --fail-on through the real command line: a rule whose whole
// interval is beyond the change exits 3 and names configuration, metric,
// ratio, interval and rule; one the interval only straddles passes.
func TestCompareFailOnExitCodes(t *testing.T) {
	after := "../../internal/report/testdata/smoke-after"
	for _, tt := range []struct {
		desc  string
		args  []string
		code  int
		inErr []string
	}{
		// smoke-after → smoke: docker-published's p99 rises by 1.32× [1.19, 1.45].
		{"whole interval beyond +10%", []string{after, fixtureOut, "--fail-on", "p99_ms>+10%"}, 3,
			[]string{"docker-published p99_ms ratio 1.32× [1.18, 1.44] breaks \"p99_ms>+10%\""}},
		{"interval straddles +30%: not broken", []string{after, fixtureOut, "--fail-on", "p99_ms>+30%"}, 0, nil},
		{"several rules, one broken", []string{after, fixtureOut, "--fail-on", "p99_ms>+50%", "--fail-on", "throughput_per_s<-5%"}, 3,
			[]string{"1 threshold broken", "docker-published throughput_per_s"}},
		{"one configuration only", []string{after, fixtureOut, "--fail-on", "host:p99_ms>+10%"}, 0, nil},
		{"the improvement direction does not fail", []string{fixtureOut, after, "--fail-on", "p99_ms>+10%"}, 0, nil},
		{"a rule without a sign is a usage error", []string{after, fixtureOut, "--fail-on", "p99_ms>10%"}, 2, []string{"written with its sign"}},
		{"a metric nobody measured is an error", []string{after, fixtureOut, "--fail-on", "p99_mss>+10%"}, 1, []string{"no configuration measured p99_mss"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			cmd := newRootCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"compare", "--resamples", "400"}, tt.args...))
			err := cmd.Execute()
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d (%v), want %d\n%s", got, err, tt.code, out.String())
			}
			for _, w := range tt.inErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
			if tt.code == 3 && !strings.Contains(out.String(), "BROKEN") {
				t.Errorf("output lacks the gates table:\n%s", out.String())
			}
		})
	}
}

// report exits 3 when the plan's thresholds are broken, after writing the
// report, which names the broken rule in its first lines.
func TestReportThresholdExit(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"results.jsonl", "env.json"} {
		b, err := os.ReadFile(filepath.Join(fixtureOut, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writePlan := func(thresholds string) {
		p := "name: fixture\nworkload: web\nbaseline: host\nconfigurations:\n" +
			"  - {name: host, runtime: host}\n  - {name: docker-published, runtime: docker}\n  - {name: docker-host-net, runtime: docker, network: host}\n" +
			"  - {name: docker-volume-2reps, runtime: docker, data: volume}\n  - {name: docker-btrfs, runtime: docker}\n" + thresholds
		if err := os.WriteFile(filepath.Join(dir, "plan.yaml"), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writePlan("thresholds:\n  p99_ms: \"< 1.10 x baseline\"\n")
	var out bytes.Buffer
	err := runReport(&out, dir, reportFlags{format: "table", resamples: 400, seed: 1})
	if exitCode(err) != 3 || !strings.Contains(err.Error(), `docker-published p99_ms ratio`) {
		t.Fatalf("err = %v (exit %d), want 3 naming docker-published p99_ms", err, exitCode(err))
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if !strings.HasPrefix(first, "docker-published: median latency ") {
		t.Errorf("first line %q does not answer", first)
	}
	if !strings.Contains(out.String(), "THRESHOLD BROKEN: docker-published p99_ms") {
		t.Errorf("report does not say which threshold broke:\n%s", out.String())
	}
	writePlan("thresholds:\n  p99_ms: \"< 2 x baseline\"\n")
	out.Reset()
	if err := runReport(&out, dir, reportFlags{format: "table", resamples: 400, seed: 1}); err != nil {
		t.Fatalf("thresholds met: %v", err)
	}
}

// Another --baseline than the plan's: its thresholds, written against the
// plan's baseline, are not checked (and the report says so).
func TestReportThresholdsOtherBaseline(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(fixtureOut, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := "name: fixture\nworkload: web\nbaseline: host\nconfigurations:\n  - {name: host, runtime: host}\n  - {name: docker-published, runtime: docker}\n" +
		"thresholds:\n  p99_ms: \"< 1.01 x baseline\"\n"
	if err := os.WriteFile(filepath.Join(dir, "plan.yaml"), []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runReport(&out, dir, reportFlags{format: "table", baseline: "docker-host-net", resamples: 400, seed: 1}); err != nil {
		t.Fatalf("thresholds checked against another baseline: %v", err)
	}
	if !strings.Contains(out.String(), "the plan's thresholds are not checked") {
		t.Errorf("report does not say the thresholds were skipped:\n%s", out.String())
	}
}

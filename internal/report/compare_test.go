package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

const afterDir = "testdata/smoke-after"

func loadComparison(t *testing.T) *Comparison {
	t.Helper()
	if *update {
		writeFixture(t, fixtureDir, genRecords(t), "host")
		writeFixture(t, afterDir, genRecordsFrom(t, afterConfigs(), 2016), "host")
	}
	c, err := CompareDirs(fixtureDir, afterDir, testStats)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompareGolden(t *testing.T) {
	c := loadComparison(t)
	for _, format := range []string{"table", "md", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := RenderComparison(&buf, c, format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", "compare."+format)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s comparison differs from %s (run go test -update and review):\n%s", format, golden, buf.String())
			}
		})
	}
	if err := RenderComparison(&bytes.Buffer{}, c, "html"); err == nil {
		t.Error("html comparison accepted but not implemented")
	}
}

func TestCompareSemantics(t *testing.T) {
	c := loadComparison(t)
	get := func(name string) *ConfigComparison {
		for _, cc := range c.Configs {
			if cc.Name == name {
				return cc
			}
		}
		t.Fatalf("no configuration %s in the comparison", name)
		return nil
	}
	tests := []struct {
		desc, config, metric, verdict string
	}{
		{"dropping the proxy wins throughput back", "docker-published", results.MetricThroughput, "faster"},
		{"and latency", "docker-published", "p90_ms", "faster"},
		{"and the errors", "docker-published", results.MetricErrorRate, "fewer errors"},
		{"no errors in either set", "docker-host-net", results.MetricErrorRate, stats.BothZero},
		{"an unchanged host is unchanged", "host", results.MetricThroughput, stats.NoDifference},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			mc, ok := get(tt.config).Metrics[tt.metric]
			if !ok {
				t.Fatalf("no %s", tt.metric)
			}
			if mc.Ratio.Verdict != tt.verdict {
				t.Errorf("verdict %q, want %q (ratio %s [%s])", mc.Ratio.Verdict, tt.verdict, fmtRatio(mc.Ratio.Ratio), fmtRatioCI(mc.Ratio))
			}
		})
	}
	if len(c.OnlyFirst) != 1 || c.OnlyFirst[0] != "docker-volume-2reps" {
		t.Errorf("only_first %v, want [docker-volume-2reps]", c.OnlyFirst)
	}
	if btrfs := get("docker-btrfs"); len(btrfs.Metrics) != 0 || !strings.HasPrefix(btrfs.StatusFirst, "NOT RUN") {
		t.Errorf("not-run configuration compared with numbers: %+v", btrfs)
	}
	var buf bytes.Buffer
	if err := RenderComparison(&buf, c, "json"); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("comparison json: %v", err)
	}
}

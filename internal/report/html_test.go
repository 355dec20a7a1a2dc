package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestHTMLSelfContained(t *testing.T) {
	rep := loadFixture(t)
	var buf bytes.Buffer
	if err := Render(&buf, rep, "html"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if dir := os.Getenv("CTRPERF_HTML_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "report.html"), buf.Bytes(), 0o644)
	}
	// No network fetches: no external src/href, no @import, no url(http…).
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:`).FindString(out); m != "" {
		t.Errorf("HTML references something external: %q", m)
	}
	for _, want := range []string{
		"<svg", "Throughput per configuration", "Latency by percentile", "99.99%",
		"docker-published", "NOT RUN: storage driver btrfs unavailable", "no measurable difference",
		"CPU utilisation per CPU", "Disk writes per second", "docker-proxy", "add repetitions",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The not-run configuration must not get a dot.
	if strings.Contains(out, "docker-btrfs: 0 ") {
		t.Error("not-run configuration plotted as a number")
	}
}

// Knobs every configuration shares are shown once under the table, each
// configuration only with what sets it apart.
func TestCommonKnobsShownOnce(t *testing.T) {
	cs := []*ConfigResult{
		{Name: "a", Knobs: map[string]any{"runtime": "host", "app": map[string]any{"port": 8080, "build": "."}}},
		{Name: "b", Knobs: map[string]any{"runtime": "docker", "app": map[string]any{"port": 8080, "build": "."}}},
	}
	common := commonKnobs(cs)
	if strings.Join(common, " ") != "app.build=. app.port=8080" {
		t.Errorf("common = %q", common)
	}
	if got := knobText(cs[1].Knobs, common...); got != "runtime=docker" {
		t.Errorf("b's own knobs = %q, want runtime=docker", got)
	}
	if got := knobText(cs[0].Knobs); got != "app.build=. app.port=8080 runtime=host" {
		t.Errorf("all of a's knobs = %q", got)
	}
	if commonKnobs(cs[:1]) != nil {
		t.Error("one configuration has nothing to share")
	}
}

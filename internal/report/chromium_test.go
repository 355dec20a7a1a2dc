package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"ctrperf/internal/testenv"
)

// chromiumPath finds a headless browser or skips (fails when
// CTRPERF_REQUIRE_DOCKER=1, which CI sets to run every integration test).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.SkipOrFail(t, "no chromium in PATH")
	return ""
}

// runChromium runs one headless invocation on file and returns its stderr
// (with logging on, console messages and uncaught errors land there) and
// stdout.
func runChromium(t *testing.T, bin, file string, extra ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1280,2000"}, extra...)
	args = append(args, "file://"+file)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
	}
	return out.String(), errb.String()
}

// consoleLine matches what Chromium logs for console output, uncaught
// exceptions and failed loads. The report has no script, so any console
// output at all is a problem.
var consoleLine = regexp.MustCompile(`(?i)uncaught|:CONSOLE[:(]|Failed to load resource|net::ERR_`)

func browserProblems(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if consoleLine.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func TestBrowserProblems(t *testing.T) {
	tests := []struct {
		desc string
		line string
		bad  bool
	}{
		{"console error", `[27245:27245:1121/144849.024274:INFO:CONSOLE:1] "boom", source: file:///tmp/bad.html (1)`, true},
		{"uncaught exception", `[1:1:1121/1.0:INFO:CONSOLE(3)] "Uncaught ReferenceError: f is not defined"`, true},
		{"network fetch", `Failed to load resource: net::ERR_NAME_NOT_RESOLVED`, true},
		{"dbus noise is fine", `[1:1:1121/1.0:ERROR:dbus/bus.cc:405] Failed to connect to the bus`, false},
		{"screenshot line is fine", `323986 bytes written to file /tmp/shot.png`, false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := len(browserProblems(tt.line)) > 0; got != tt.bad {
				t.Errorf("browserProblems(%q) = %v, want %v", tt.line, got, tt.bad)
			}
		})
	}
}

// TestHTMLRendersChromium renders the fixture report in headless Chromium:
// the screenshot must be a real picture, the console must be free of errors,
// and the DOM must hold the report's content.
func TestHTMLRendersChromium(t *testing.T) {
	bin := chromiumPath(t)
	rep := loadFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := Render(&buf, rep, "html"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	_, stderr := runChromium(t, bin, file, "--screenshot="+shot)
	for _, l := range browserProblems(stderr) {
		t.Errorf("browser reported: %s", l)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot %v, want 1280x2000", b)
	}
	// A blank page is one colour: count distinct colours in a sample.
	colours := map[uint32]bool{}
	for y := 0; y < 2000; y += 7 {
		for x := 0; x < 1280; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("screenshot looks blank: %d distinct colours", len(colours))
	}

	dom, _ := runChromium(t, bin, file, "--dump-dom")
	for _, want := range []string{"Versus the baseline", "<svg", "<polyline", "docker-published", "no measurable difference", "Warnings"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
}

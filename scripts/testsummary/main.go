// Command testsummary reads `go test -json` on stdin and writes what a
// person reads in a CI log: each package's result as `go test` prints it,
// the whole output of every test that failed, the tests that skipped, and
// at the end the slowest tests, so that the next slow test is visible the
// day it lands. It exits 1 when a test, a package or a build failed.
//
//	go test -json ./... | go run ./scripts/testsummary -slowest 10
//	cat unit.json integration.json | go run ./scripts/testsummary -only-slowest
//	… | go run ./scripts/testsummary -only-slowest -phases out/test/phases.tsv
//
// -phases names a file of phase wall times, one phase a line: name, TAB,
// seconds, TAB, what ran beside it (may be empty); they are listed after the
// slowest tests (`make test` writes it).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type testKey struct{ pkg, test string }

// summary is what has been read so far.
type summary struct {
	out     io.Writer
	output  map[testKey]*strings.Builder
	timings []timing
	skipped []testKey
	failed  bool
}

type timing struct {
	key     testKey
	elapsed float64
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, output: map[testKey]*strings.Builder{}}
}

// line handles one line of input; what is not a JSON event (a build error
// printed by an older go) is passed through.
func (s *summary) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		fmt.Fprintf(s.out, "%s\n", b)
		return
	}
	k := testKey{e.Package, e.Test}
	// A subtest's output goes with its top-level test's, in the order
	// it came, so a failure reads as `go test -v` printed it.
	buf := testKey{e.Package, topLevel(e.Test)}
	switch e.Action {
	case "output", "build-output":
		if e.Action == "build-output" {
			fmt.Fprint(s.out, e.Output)
			return
		}
		if s.output[buf] == nil {
			s.output[buf] = &strings.Builder{}
		}
		s.output[buf].WriteString(e.Output)
	case "build-fail":
		s.failed = true
	case "pass", "fail", "skip":
		s.done(e, k)
	}
}

func (s *summary) done(e event, k testKey) {
	if e.Action == "fail" {
		s.failed = true
	}
	if e.Test == "" {
		// The package: print its own lines (ok, FAIL, a panic outside a test).
		if b := s.output[k]; b != nil {
			for _, l := range strings.SplitAfter(b.String(), "\n") {
				if e.Action == "fail" || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") {
					fmt.Fprint(s.out, l)
				}
			}
		}
		delete(s.output, k)
		return
	}
	if strings.Contains(e.Test, "/") {
		return // its output and result go with its top-level test's
	}
	if b := s.output[k]; b != nil && e.Action == "fail" {
		fmt.Fprint(s.out, b.String())
	}
	if e.Action == "skip" {
		s.skipped = append(s.skipped, k)
	}
	s.timings = append(s.timings, timing{k, e.Elapsed})
	delete(s.output, k)
}

// topLevel is the name of the top-level test of a (sub)test.
func topLevel(test string) string {
	name, _, _ := strings.Cut(test, "/")
	return name
}

// finish writes the skipped and the slowest tests.
func (s *summary) finish(slowest int) {
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "\n%d test(s) skipped:\n", len(s.skipped))
		for _, k := range s.skipped {
			fmt.Fprintf(s.out, "  %s %s\n", k.pkg, k.test)
		}
	}
	sort.SliceStable(s.timings, func(i, j int) bool { return s.timings[i].elapsed > s.timings[j].elapsed })
	n := min(slowest, len(s.timings))
	if n == 0 {
		return
	}
	fmt.Fprintf(s.out, "\nthe %d slowest tests:\n", n)
	for _, t := range s.timings[:n] {
		fmt.Fprintf(s.out, "  %7.1fs  %s %s\n", t.elapsed, t.key.pkg, t.key.test)
	}
}

// phases writes the phase times of file (name TAB seconds TAB beside), if
// it exists.
func phases(out io.Writer, file string) error {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 2 || l == "" {
			continue
		}
		line := fmt.Sprintf("  %16s  %s", f[0], fmtSeconds(f[1]))
		if len(f) > 2 && f[2] != "" {
			line += "  (" + f[2] + ")"
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nwall time of each phase:\n%s\n", strings.Join(lines, "\n"))
	return nil
}

// fmtSeconds prints a count of seconds as 1m23s (83 s), or as it came.
func fmtSeconds(v string) string {
	d, err := time.ParseDuration(strings.TrimSpace(v) + "s")
	if err != nil {
		return v
	}
	return fmt.Sprintf("%7s (%s s)", d.String(), strings.TrimSpace(v))
}

func main() {
	slowest := flag.Int("slowest", 10, "list this many of the slowest top-level tests at the end")
	only := flag.Bool("only-slowest", false, "print only the list of the slowest tests (of several saved streams, say)")
	phaseFile := flag.String("phases", "", "a file of phase times (name TAB seconds TAB beside) to list after the slowest tests")
	flag.Parse()
	s := newSummary(os.Stdout)
	if *only {
		s.out = io.Discard
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		s.line(sc.Bytes())
	}
	s.out = os.Stdout
	s.finish(*slowest)
	if *phaseFile != "" {
		if err := phases(os.Stdout, *phaseFile); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if s.failed {
		os.Exit(1)
	}
}

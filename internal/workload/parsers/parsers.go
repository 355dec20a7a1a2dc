// Package parsers reads the figures of the load tools people use
// (redis-benchmark, pgbench, memtier_benchmark, wrk, k6) from what they
// print or write, so a plan names a parser (`parser: redis-benchmark`)
// instead of writing regular expressions. Each parser declares the program
// it reads, where that program comes from, the files it reads from the
// tool's working directory and its figures with their direction; Parse
// turns one invocation's output into named figures and, where the tool
// reports per operation (redis-benchmark's tests, memtier's commands),
// operations with their latency percentiles.
//
// Parsers are pure functions of bytes: tests feed them the outputs in
// testdata/, captured from the real tools or written in their documented
// formats.
package parsers

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"ctrperf/internal/results"
)

// Output is what one invocation of a tool left: its standard streams and
// the files it wrote in its working directory that match Parser.Files.
type Output struct {
	Stdout, Stderr []byte
	Files          map[string][]byte // base name -> content
}

// Figure is a figure a parser reports. Name may hold <op>, standing for
// each operation the tool ran (set_per_s, get_per_s).
type Figure struct {
	Name   string
	Better string // results.BetterHigher or BetterLower; "" for neither
	Unit   string
	Doc    string
	// Needs says what the command line must ask for to get it ("--latency"),
	// "" when the tool always prints it.
	Needs string
}

// Result is one invocation's figures.
type Result struct {
	// Throughput is the tool's primary rate (operations per second over
	// its whole run), the report's throughput; 0 when it has none.
	Throughput float64
	Figures    map[string]float64
	Declared   map[string]results.MetricInfo
	Operations map[string]*results.Operation
}

// add records a figure with its direction, unit and how it merges over
// generators side by side (results.Merge; "" where it does not: a spread);
// a NaN or infinite value is an error of the parser's input, not a figure.
func (r *Result) add(name string, v float64, better, unit string, merge results.Merge) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if r.Figures == nil {
		r.Figures = map[string]float64{}
		r.Declared = map[string]results.MetricInfo{}
	}
	r.Figures[name] = v
	r.Declared[name] = results.MetricInfo{Better: better, Unit: unit, Merge: merge}
}

// toolLatencyMerge is how a tool's latency statistic (avg, min, a
// percentile, max) of one generator merges with another's when the tool
// gives no histogram: the mean weighted by requests, the smallest, else
// the worst.
func toolLatencyMerge(stat string) results.Merge {
	switch stat {
	case "avg":
		return results.MergeMean
	case "min":
		return results.MergeMin
	}
	return results.MergeMax
}

// op returns the operation named name, made on first use.
func (r *Result) op(name string) *results.Operation {
	if r.Operations == nil {
		r.Operations = map[string]*results.Operation{}
	}
	o := r.Operations[name]
	if o == nil {
		o = &results.Operation{PercentilesMs: map[string]float64{}}
		r.Operations[name] = o
	}
	return o
}

// Parser reads one tool's output.
type Parser struct {
	Name    string // as a plan names it
	Program string // the executable a command of this tool starts
	// Install says where the program comes from: a Debian package, or how
	// to build it where Debian has none.
	Install string
	// Files are glob patterns of files the tool writes in its working
	// directory that Parse reads (k6's summary, memtier's JSON, pgbench's
	// transaction log).
	Files []string
	// Hint is what the command line needs for this parser (--csv, a file
	// name), shown when nothing parses.
	Hint    string
	Figures []Figure
	Parse   func(Output) (Result, error)
}

var registry = map[string]Parser{}

func register(p Parser) {
	if _, dup := registry[p.Name]; dup {
		panic("parser registered twice: " + p.Name)
	}
	registry[p.Name] = p
}

// Get returns the parser of a name.
func Get(name string) (Parser, bool) {
	p, ok := registry[name]
	return p, ok
}

// Names lists the parsers, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ByProgram returns the parser whose tool is program, for the advice of
// a missing program.
func ByProgram(program string) (Parser, bool) {
	for _, p := range registry {
		if p.Program == program {
			return p, true
		}
	}
	return Parser{}, false
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// opName makes a tool's operation name a metric-name prefix: "MSET (10
// keys)" is mset_10_keys, "Gets" gets.
func opName(s string) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "_"), "_")
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "_")
	}
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "op_" + n
	}
	return n
}

// percentileKey writes a percentile as the records key it ("50", "99.9").
func percentileKey(p float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", p), "0"), ".")
}

// percentileName writes a percentile as part of a metric name: p50, p999.
func percentileName(p float64) string {
	return "p" + strings.ReplaceAll(percentileKey(p), ".", "")
}

// tail is the end of an output for an error message.
func tail(b []byte) string {
	const maxLines, maxBytes = 8, 800
	s := strings.TrimRight(string(b), "\n\r\t ")
	if s == "" {
		return "(empty)"
	}
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s, cut = strings.Join(lines[len(lines)-maxLines:], "\n"), true
	}
	if len(s) > maxBytes {
		s, cut = s[len(s)-maxBytes:], true
	}
	if cut {
		s = "…" + s
	}
	return s
}

// numbers reads a tool's figures from the text its patterns matched: a
// figure that does not parse is an error naming it and its text, never 0
// (`[0-9.]+` matches "1.2.3").
type numbers struct{ errs []error }

func (n *numbers) float(what string, b []byte) float64 {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("%s %q is not a number", what, b))
	}
	return v
}

func (n *numbers) int(what string, b []byte) int64 {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("%s %q is not a whole number", what, b))
	}
	return v
}

// err is every figure that did not parse, nil when all did.
func (n *numbers) err() error { return errors.Join(n.errs...) }

package workload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

func init() { Register(Exec{}) }

// Exec measures process start-up (seed 003's UnixBench execl and shell
// scripts, which AUFS made slower): every new process reads its binary and
// shared libraries through the image's layers, so the storage driver shows.
//
// Tests (load.test):
//
//	spawn  the shell forks and execs /bin/true in a loop (fork+exec of a
//	       small dynamic binary; the execl analogue)
//	shell  sh -c running a small pipeline script (sort, od, grep, tee, wc on
//	       a file in the data directory), UnixBench's "shell scripts"
//	fork   stress-ng --fork (fork and exit, no exec: the control that reads
//	       nothing through the layers)
//
// spawn and shell are timed inside the target by the shell itself (date
// +%s%N around batches), so docker exec's own start-up is not in the rate.
// stress-ng's exec stressor is not used: it refuses to run as root.
type Exec struct{}

var _ Workload = Exec{}

// Name implements Workload.
func (Exec) Name() string { return "exec" }

// ExecLoad are the exec knobs.
type ExecLoad struct {
	Test  string // spawn, shell, fork
	Batch int64  // spawn/shell: processes between two clock readings
}

// DefaultExecLoad is the execl analogue.
var DefaultExecLoad = ExecLoad{Test: "spawn"}

// ParseExecLoad reads and checks the knobs.
func ParseExecLoad(m map[string]any) (ExecLoad, error) {
	l := DefaultExecLoad
	k := newKnobs("load", m)
	k.enum("test", &l.Test, "spawn", "shell", "fork")
	whole(k, "batch", &l.Batch, 1, 100000)
	if err := k.err(); err != nil {
		return l, err
	}
	if l.Batch == 0 {
		// A clock reading (one more exec of date) per batch: 1% of spawn's
		// work, 1/70 of shell's.
		l.Batch = 100
		if l.Test == "shell" {
			l.Batch = 10
		}
	}
	return l, nil
}

// Decode implements Workload.
func (Exec) Decode(k Knobs) (any, any, error) {
	return decodeTool("exec", k, ParseExecLoad, "the test is chosen under load")
}

// Services implements Workload.
func (Exec) Services(c Config) ([]engine.Service, error) {
	tools := []string{"sh", "date", "sort", "od", "grep", "tee", "wc"}
	if c.Load.(ExecLoad).Test == "fork" {
		tools = []string{"stress-ng"}
	}
	return toolServices("exec", "exec", c, tools...)
}

// execScript runs the test for a warm-up then a measured window (both in
// ns) and prints "batch N NS" per batch and "total N NS" of the window.
//
//	sh -c execScript ctrperf-exec TEST WARMUP_NS DURATION_NS BATCH
const execScript = `set -u
test=$1; warm=$2; dur=$3; batch=$4
src=ctrperf-shell.src
if [ "$test" = shell ]; then
  i=0; : >"$src"
  while [ $i -lt 300 ]; do echo "line $i the quick brown fox $((i * 7919 % 1000))" >>"$src"; i=$((i + 1)); done
fi
one() {
  case $test in
  spawn) /bin/true ;;
  shell) /bin/sh -c 'sort <"$1" >s.$$; od s.$$ | sort -n -k 1 >o.$$; grep the s.$$ | tee g.$$ | wc >w.$$; rm -f s.$$ o.$$ g.$$ w.$$' ctrperf-shell "$src" ;;
  esac
}
phase() {
  s=$(date +%s%N); n=0
  while :; do
    j=0; b=$(date +%s%N)
    while [ $j -lt $batch ]; do one || { echo "ctrperf-exec: $test failed with status $?" >&2; exit 3; }; j=$((j + 1)); done
    e=$(date +%s%N); n=$((n + batch))
    [ "$2" = 1 ] && echo "batch $batch $((e - b))"
    [ $((e - s)) -ge "$1" ] && break
  done
  [ "$2" = 1 ] && echo "total $n $((e - s))"
  return 0
}
[ "$warm" -gt 0 ] && phase "$warm" 0
phase "$dur" 1
`

// execArgv is the command for spawn and shell.
func execArgv(l ExecLoad, w Window) []string {
	return []string{"/bin/sh", "-c", execScript, "ctrperf-exec", l.Test,
		strconv.FormatInt(w.Warmup.Nanoseconds(), 10), strconv.FormatInt(w.Duration.Nanoseconds(), 10),
		strconv.FormatInt(l.Batch, 10)}
}

// ParseExecOutput reads the script's batches into a measurement: Count is
// processes (spawn) or scripts (shell) run in the window, throughput_per_s
// their rate, and the histogram holds the per-process time of each batch
// (a batch's mean, not single processes: the shell has no finer clock).
func ParseExecOutput(r io.Reader, label string) (*results.Measurement, error) {
	h := results.NewHistogram()
	var n, ns, batches int64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || (f[0] != "batch" && f[0] != "total") {
			continue
		}
		a, err1 := strconv.ParseInt(f[1], 10, 64)
		b, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || a <= 0 || b < 0 {
			return nil, fmt.Errorf("exec output: bad line %q", sc.Text())
		}
		if f[0] == "total" {
			n, ns = a, b
			continue
		}
		batches++
		us := b / a / 1000
		if us < results.HistMinUs {
			us = results.HistMinUs
		}
		if us > results.HistMaxUs {
			us = results.HistMaxUs
		}
		if err := h.RecordValues(us, a); err != nil {
			return nil, fmt.Errorf("exec output: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read exec output: %w", err)
	}
	if n == 0 || ns == 0 {
		return nil, errors.New("exec output: no total line (the script did not finish its window)")
	}
	enc, err := results.EncodeHistogram(h)
	if err != nil {
		return nil, err
	}
	sec := float64(ns) / 1e9
	return &results.Measurement{
		DurationS:  sec,
		Operations: map[string]*results.Operation{label: {Count: n, Histogram: enc, MeanMs: float64(ns) / float64(n) / 1e6}},
		Metrics:    map[string]float64{results.MetricThroughput: float64(n) / sec, results.MetricElapsed: sec, "batches": float64(batches)},
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{"sh": "POSIX sh loop timed with date +%s%N"},
	}, nil
}

// Drive implements Workload.
func (Exec) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(ExecLoad)
	ex := inData(load.EngineExec(env.Engine, env.Target, "exec"))
	w := env.Window
	if l.Test == "fork" {
		if w.Warmup > 0 {
			if _, err := load.RunStressNG(ctx, ex, "--fork", "1", "--timeout", wholeSeconds(w.Warmup)); err != nil {
				return nil, fmt.Errorf("exec fork: warm-up: %w", err)
			}
		}
		if env.Started != nil {
			env.Started()
		}
		m, err := load.RunStressNG(ctx, ex, "--fork", "1", "--timeout", wholeSeconds(w.Duration))
		if err != nil {
			return nil, fmt.Errorf("exec fork: %w", err)
		}
		if m.Metrics[results.MetricThroughput] <= 0 {
			return m, fmt.Errorf("exec fork: stress-ng reported no forks")
		}
		return m, nil
	}
	stop := startedAfter(w.Warmup, env.Started)
	defer stop()
	out, errOut, code, err := ex(ctx, execArgv(l, w))
	if err != nil {
		return nil, fmt.Errorf("exec %s: run the loop in the target: %w", l.Test, err)
	}
	if code != 0 {
		return nil, fmt.Errorf("exec %s: loop exited with status %d: %s", l.Test, code, strings.TrimSpace(string(errOut)))
	}
	m, err := ParseExecOutput(bytes.NewReader(out), l.Test)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", l.Test, err)
	}
	return m, nil
}

// wholeSeconds writes a duration for stress-ng's --timeout, which takes
// whole seconds: rounded, at least 1.
func wholeSeconds(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10) + "s"
}

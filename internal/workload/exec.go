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
//
// load.copies runs that many copies of the loop at once (UnixBench's
// parallel runs: the seed compared 1 copy with 16); "cpus" is one copy per
// CPU the target may use (nproc inside it, so a cpuset counts). The rate is
// the sum of the copies' rates, as UnixBench adds them up.
// stress-ng's exec stressor is not used: it refuses to run as root.
type Exec struct{}

var _ Workload = Exec{}

// Name implements Workload.
func (Exec) Name() string { return "exec" }

// ExecLoad are the exec knobs.
type ExecLoad struct {
	Test  string // spawn, shell, fork
	Batch int64  // spawn/shell: processes between two clock readings
	// Copies of the loop run at once; 0 means one per CPU of the target
	// ("copies: cpus").
	Copies int64
}

// DefaultExecLoad is the execl analogue, one copy.
var DefaultExecLoad = ExecLoad{Test: "spawn", Copies: 1}

// maxExecCopies bounds load.copies: each copy is a shell loop forking as
// fast as it can.
const maxExecCopies = 1024

// ParseExecLoad reads and checks the knobs.
func ParseExecLoad(m map[string]any) (ExecLoad, error) {
	l := DefaultExecLoad
	k := newKnobs("load", m)
	k.enum("test", &l.Test, "spawn", "shell", "fork")
	whole(k, "batch", &l.Batch, 1, 100000)
	if v, ok := k.get("copies"); ok {
		if v == "cpus" {
			l.Copies = 0
		} else if _, isStr := v.(string); isStr {
			k.fail("copies", v, "want a whole number or cpus")
		} else {
			whole(k, "copies", &l.Copies, 1, maxExecCopies)
		}
	}
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
	tools := []string{"sh", "date", "sort", "od", "grep", "tee", "wc", "nproc"}
	if c.Load.(ExecLoad).Test == "fork" {
		tools = []string{"stress-ng", "nproc"}
	}
	return toolServices("exec", "exec", c, tools...)
}

// execScript runs the test for a warm-up then a measured window (both in
// ns) and prints "batch N NS" per batch and "total N NS" of the window.
//
//	sh -c execScript ctrperf-exec TEST WARMUP_NS DURATION_NS BATCH COPY
const execScript = `set -u
test=$1; warm=$2; dur=$3; batch=$4; copy=$5
src=ctrperf-shell.src.$copy
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

// execCopiesScript starts COPIES copies of execScript at once (each with
// its own output file in the data directory), waits for all of them and
// prints "copies N" then every copy's lines; a copy that failed makes the
// whole exit with its status.
//
//	sh -c execCopiesScript ctrperf-exec-copies COPIES SCRIPT TEST WARMUP_NS DURATION_NS BATCH
const execCopiesScript = `set -u
copies=$1; script=$2; shift 2
echo "copies $copies"
i=0; pids=
while [ $i -lt "$copies" ]; do
  /bin/sh -c "$script" ctrperf-exec "$@" "$i" >"ctrperf-exec.$i.out" 2>"ctrperf-exec.$i.err" &
  pids="$pids $!"; i=$((i + 1))
done
st=0
for p in $pids; do wait "$p" || st=$?; done
i=0
while [ $i -lt "$copies" ]; do
  cat "ctrperf-exec.$i.out"; cat "ctrperf-exec.$i.err" >&2
  rm -f "ctrperf-exec.$i.out" "ctrperf-exec.$i.err" "ctrperf-shell.src.$i"; i=$((i + 1))
done
exit $st
`

// execArgv is the command for spawn and shell, with copies resolved.
func execArgv(l ExecLoad, copies int64, w Window) []string {
	return []string{"/bin/sh", "-c", execCopiesScript, "ctrperf-exec-copies", strconv.FormatInt(copies, 10), execScript, l.Test,
		strconv.FormatInt(w.Warmup.Nanoseconds(), 10), strconv.FormatInt(w.Duration.Nanoseconds(), 10),
		strconv.FormatInt(l.Batch, 10)}
}

// targetCPUs is the number of CPUs the target may run on (nproc inside it:
// its affinity, so a cpuset counts).
func targetCPUs(ctx context.Context, ex load.ExecFunc) (int64, error) {
	out, errOut, code, err := ex(ctx, []string{"nproc"})
	if err != nil {
		return 0, fmt.Errorf("nproc in the target: %w", err)
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if code != 0 || perr != nil || n < 1 {
		return 0, fmt.Errorf("nproc in the target: exit status %d, output %q %s", code, strings.TrimSpace(string(out)), strings.TrimSpace(string(errOut)))
	}
	return n, nil
}

// ParseExecOutput reads the copies' batches into a measurement: Count is
// processes (spawn) or scripts (shell) run in the window by all copies,
// throughput_per_s the sum of the copies' rates (UnixBench's aggregate of
// parallel copies), and the histogram holds the per-process time of each
// batch (a batch's mean, not single processes: the shell has no finer
// clock). Every copy must have printed its total.
func ParseExecOutput(r io.Reader, label string) (*results.Measurement, error) {
	h := results.NewHistogram()
	var n, ns, batches, copies, totals int64
	var rate, longest float64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "copies" {
			c, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || c < 1 {
				return nil, fmt.Errorf("exec output: bad line %q", sc.Text())
			}
			copies = c
			continue
		}
		if len(f) != 3 || (f[0] != "batch" && f[0] != "total") {
			continue
		}
		a, err1 := strconv.ParseInt(f[1], 10, 64)
		b, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || a <= 0 || b < 0 {
			return nil, fmt.Errorf("exec output: bad line %q", sc.Text())
		}
		if f[0] == "total" {
			if b == 0 {
				return nil, fmt.Errorf("exec output: bad line %q", sc.Text())
			}
			totals++
			n += a
			ns += b
			sec := float64(b) / 1e9
			rate += float64(a) / sec
			longest = max(longest, sec)
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
	if copies == 0 {
		copies = 1 // a single loop's output, without the copies wrapper
	}
	if totals == 0 {
		return nil, errors.New("exec output: no total line (the script did not finish its window)")
	}
	if totals != copies {
		return nil, fmt.Errorf("exec output: %d of %d copies printed a total (the others did not finish their window)", totals, copies)
	}
	enc, err := results.EncodeHistogram(h)
	if err != nil {
		return nil, err
	}
	return &results.Measurement{
		DurationS:  longest,
		Operations: map[string]*results.Operation{label: {Count: n, Histogram: enc, MeanMs: float64(ns) / float64(n) / 1e6}},
		Metrics: map[string]float64{results.MetricThroughput: rate, results.MetricElapsed: longest, "batches": float64(batches),
			"copies": float64(copies), "per_copy_per_s": rate / float64(copies)},
		Load:  &results.LoadStats{Mode: "tool"},
		Tools: map[string]string{"sh": "POSIX sh loop timed with date +%s%N"},
	}, nil
}

// Drive implements Workload.
func (Exec) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	l := env.Config.Load.(ExecLoad)
	ex := inData(load.EngineExec(env.Engine, env.Target, "exec"))
	w := env.Window
	copies := l.Copies
	if copies == 0 {
		n, err := targetCPUs(ctx, ex)
		if err != nil {
			return nil, fmt.Errorf("exec copies: cpus: %w", err)
		}
		copies = n
	}
	if l.Test == "fork" {
		workers := strconv.FormatInt(copies, 10)
		if w.Warmup > 0 {
			if _, err := load.RunStressNG(ctx, ex, "--fork", workers, "--timeout", wholeSeconds(w.Warmup)); err != nil {
				return nil, fmt.Errorf("exec fork: warm-up: %w", err)
			}
		}
		if env.Started != nil {
			env.Started()
		}
		m, err := load.RunStressNG(ctx, ex, "--fork", workers, "--timeout", wholeSeconds(w.Duration))
		if err != nil {
			return nil, fmt.Errorf("exec fork: %w", err)
		}
		m.Metrics["copies"] = float64(copies)
		m.Metrics["per_copy_per_s"] = m.Metrics[results.MetricThroughput] / float64(copies)
		if m.Metrics[results.MetricThroughput] <= 0 {
			return m, fmt.Errorf("exec fork: stress-ng reported no forks")
		}
		return m, nil
	}
	stop := startedAfter(w.Warmup, env.Started)
	defer stop()
	out, errOut, code, err := ex(ctx, execArgv(l, copies, w))
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

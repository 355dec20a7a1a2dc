package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

func init() { Register(Command{}) }

// Command is the user's own benchmark: a command (pgbench, redis-benchmark,
// sysbench, a build, a test suite) run in a container of a given image and
// on the host, hyperfine's way: warm-up executions, then a number of timed
// executions, each after an untimed prepare command, summarised as median,
// mean ± σ, min and max of the wall time. Optionally one figure the command
// prints about itself (a JSON path or a regular expression over its output)
// is taken from every execution, its median being the run's value.
//
// The command runs through engine.Exec in a sleeper service of the image,
// like the other tool workloads, with the service's data directory as its
// working directory, so the data placement, resources, storage driver and
// engine knobs of the configuration apply to it. Its wall time is taken
// inside the target by the shell (date +%s%N around the command, checked
// against /proc/uptime, see commandScript), so docker exec's own start-up is
// not in it.
type Command struct{}

var _ Workload = Command{}

// Name implements Workload.
func (Command) Name() string { return "command" }

// commandService is the sleeper the command runs in.
const commandService = "command"

// CommandApp is what runs.
type CommandApp struct {
	// Image to run in on the docker runtime; "" is the Debian base
	// (ctrperf/debian-base, or its override). It must be on the engine
	// (never pulled) and have /bin/sh and sleep, which keep the container
	// alive between executions.
	Image       string
	Command     CommandLine
	HostCommand CommandLine // on the host runtime; zero: Command
	// Prepare runs before every execution, warm-ups included, untimed
	// (hyperfine's --prepare): drop a cache, reset a database.
	Prepare CommandLine
	Env     map[string]string // added to the command's (and prepare's) environment
}

// commandFor is the command of a runtime.
func (a CommandApp) commandFor(rt engine.Runtime) CommandLine {
	if rt.Traits().Processes && !a.HostCommand.IsZero() {
		return a.HostCommand
	}
	return a.Command
}

// image is the image to deploy.
func (a CommandApp) image() string {
	if a.Image == "" {
		return baseImage()
	}
	return image.Resolve(a.Image)
}

// ParseCommandApp reads and checks the app knobs.
func ParseCommandApp(m map[string]any) (CommandApp, error) {
	var a CommandApp
	k := newKnobs("app", m)
	k.str("image", &a.Image, func(s string) error {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\n") {
			return errors.New("want an image reference such as ctrperf/debian-base or postgres:16")
		}
		return nil
	})
	k.command("command", &a.Command)
	k.command("host_command", &a.HostCommand)
	k.command("prepare", &a.Prepare)
	k.env("env", &a.Env, dataEnv)
	err := k.err()
	if !given(m, "command") {
		err = errors.Join(err, knobError("app.command", "app.command is required: the command to benchmark, a string run with sh -c or a list (an argv)"))
	}
	return a, err
}

// CommandLoad is how it is run and what is taken from its output.
type CommandLoad struct {
	Runs       int64         // timed executions per ctrperf run
	WarmupRuns int64         // untimed executions before them
	Timeout    time.Duration // per execution (and per prepare)

	// Figure names the number taken from the output ("" for none); one of
	// FigureJSON and FigureRegex says where it is.
	Figure      string
	FigureJSON  string // a JSON path, .results[0].tps
	FigureRegex string // a pattern whose (?P<value>…) group is the number
	FigureFrom  string // stdout, stderr or both
	FigureUnit  string // shown beside it in reports
	// Better is "higher" or "lower": which way the figure is better. ""
	// when its name says so already (_per_s, _ms, ...).
	Better string

	path  jsonPath
	re    *regexp.Regexp
	group int
}

// DefaultCommandLoad runs ten timed executions after one warm-up, as
// hyperfine runs at least ten.
var DefaultCommandLoad = CommandLoad{Runs: 10, WarmupRuns: 1, Timeout: 10 * time.Minute, FigureFrom: "stdout"}

// figureName is what a figure may be called: a metric name of its own.
var figureName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// reservedMetrics are names the command workload or the report compute.
var reservedMetrics = []string{results.MetricThroughput, results.MetricElapsed, results.MetricErrorRate,
	results.MetricKBPerS, results.MetricSamples, results.MetricMeanMs, results.MetricMinMs, results.MetricP50Ms,
	results.MetricP90Ms, results.MetricP95Ms, results.MetricP99Ms, results.MetricP999Ms, results.MetricMaxMs}

// ParseCommandLoad reads and checks the load knobs.
func ParseCommandLoad(m map[string]any) (CommandLoad, error) {
	l := DefaultCommandLoad
	k := newKnobs("load", m)
	whole(k, "runs", &l.Runs, 1, 100000)
	whole(k, "warmup_runs", &l.WarmupRuns, 0, 10000)
	k.duration("timeout", &l.Timeout, 100*time.Millisecond, 24*time.Hour)
	f := ClientFigure{From: l.FigureFrom}
	decodeFigure(k, commandFigureKeys, &f)
	l.Figure, l.FigureRegex, l.FigureJSON, l.FigureFrom, l.FigureUnit, l.Better = f.Name, f.Regex, f.JSON, f.From, f.Unit, f.Better
	l.re, l.group, l.path = f.re, f.group, f.path
	errs := []error{k.err()}
	jsonGiven, reGiven, nameGiven := given(m, "figure_json"), given(m, "figure_regex"), given(m, "figure")
	for _, key := range []string{"figure_from", "figure_unit", "better"} {
		if given(m, key) && !nameGiven {
			errs = append(errs, knobError("load."+key, "load.%s: there is no figure; name one with load.figure and say where it is with load.figure_json or load.figure_regex", key))
		}
	}
	switch {
	case jsonGiven && reGiven:
		errs = append(errs, knobError("load.figure_regex", "load.figure_regex: give either load.figure_json or load.figure_regex, not both"))
	case (jsonGiven || reGiven) && !nameGiven:
		which := "load.figure_json"
		if reGiven {
			which = "load.figure_regex"
		}
		errs = append(errs, knobError(which, "%s: name the figure with load.figure (e.g. events_per_s); reports show it under that name", which))
	case nameGiven && !jsonGiven && !reGiven:
		errs = append(errs, knobError("load.figure", "load.figure = %v: say where it is in the output with load.figure_json (a JSON path, .results[0].tps) or load.figure_regex (a pattern with (?P<value>…))", m["figure"]))
	}
	if l.Figure != "" && figureName.MatchString(l.Figure) {
		switch figureSense(l.Figure, l.Better) {
		case senseUnsaid:
			errs = append(errs, knobError("load.figure", "load.figure = %s: its name does not say which way is better; add load.better: higher or lower (or end the name in _per_s for a rate, _ms for a time)", l.Figure))
		case senseContradicted:
			errs = append(errs, knobError("load.better", "load.better = %s: the figure's name %s says the opposite to every report; rename it or drop load.better", l.Better, l.Figure))
		}
	}
	return l, errors.Join(errs...)
}

// given reports whether a knob is set: an empty value (key: null, or key:
// with nothing) unsets a plan-level one in a configuration.
func given(m map[string]any, key string) bool {
	v, ok := m[key]
	return ok && v != nil
}

// better is the figure's direction, declared or by its name.
func (l CommandLoad) better() string {
	if l.Better != "" {
		return l.Better
	}
	if s := stats.SenseOf(l.Figure); !s.Neutral && s.HigherIsBetter {
		return results.BetterHigher
	}
	return results.BetterLower
}

// Decode implements Workload.
func (Command) Decode(k Knobs) (any, any, error) {
	a, errA := ParseCommandApp(k.App)
	l, errL := ParseCommandLoad(k.Load)
	return a, l, errors.Join(errA, errL, noNetwork("command", k.Network))
}

// Services implements Workload: a sleeper of the image, once the host
// runtime is known to have the programs the commands start.
func (Command) Services(c Config) ([]engine.Service, error) {
	a := c.App.(CommandApp)
	var tools []string
	for _, cl := range []CommandLine{a.commandFor(c.Runtime), a.Prepare} {
		if p := programOf(cl); p != "" && !slices.Contains(tools, p) {
			tools = append(tools, p)
		}
	}
	if err := hostTools("command", c, tools...); err != nil {
		return nil, err
	}
	s := sleeperService(commandService, c)
	s.Image = a.image()
	return []engine.Service{s}, nil
}

// shellWords are words a shell command line may start with that are no
// program to look for.
var shellWords = []string{"!", ".", ":", "[", "[[", "{", "(", "alias", "break", "case", "cd", "command", "continue",
	"eval", "exec", "exit", "export", "false", "for", "function", "if", "local", "read", "return", "set", "shift",
	"test", "time", "trap", "true", "type", "ulimit", "umask", "unset", "until", "wait", "while"}

// programOf is the program a command starts, when it can be told without
// running it: an argv's first element, a shell line's first word when it
// is a plain word. "" when it cannot (a relative path, which is resolved in
// the data directory; a builtin, a variable, an assignment).
func programOf(c CommandLine) string {
	var p string
	switch {
	case len(c.Argv) > 0:
		p = c.Argv[0]
	case c.Shell != "":
		f := strings.Fields(c.Shell)
		if len(f) == 0 || strings.ContainsAny(f[0], "=$`'\"\\*?[]<>|&;(){}~#") || slices.Contains(shellWords, f[0]) {
			return ""
		}
		p = f[0]
	}
	if strings.Contains(p, "/") && !strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}

// commandScript runs one execution in the target. With mode "time" it
// reads two clocks before and after the command and prints, on stderr
// after everything the command wrote, a line
// "MARK STATUS START_NS END_NS START_UPTIME END_UPTIME" (the mark is unique
// to the run, so the command's own output cannot fake it); its own exit
// status is then 0 unless it could not start. With mode "plain" it execs
// the command (prepare; timing around the exec).
//
// Why two clocks: a POSIX sh (dash, busybox) can read no monotonic clock
// with nanoseconds. date +%s%N is the wall clock, which NTP, chrony or an
// administrator may step during an execution (an hour ahead, a day back);
// /proc/uptime is CLOCK_BOOTTIME, which no step moves, but it has 10 ms
// resolution. The shell's builtin read takes it without a fork, inside the
// date readings so that both intervals hold the same command; wallOf keeps
// date's nanoseconds while the two agree and takes uptime's interval when
// they do not. The same wrapper times the host baseline (rather than Go's
// monotonic clock around the host exec), so that the host and the
// containers are timed alike and their figures compare.
//
//	sh -c commandScript ctrperf-command MODE MARK NAME=VALUE... -- ARGV...
const commandScript = `mode=$1; mark=$2; shift 2
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do export "$1"; shift; done
[ "$#" -gt 0 ] && shift
if [ -n "${` + dataEnv + `:-}" ]; then cd "$` + dataEnv + `" || { echo "ctrperf-command: cannot enter the data directory $` + dataEnv + `" >&2; exit 125; }; fi
[ "$mode" = plain ] && exec "$@"
s=$(date +%s%N)
{ read -r u0 _ </proc/uptime; } 2>/dev/null || u0=-
"$@"
rc=$?
{ read -r u1 _ </proc/uptime; } 2>/dev/null || u1=-
e=$(date +%s%N)
printf '\n%s %s %s %s %s %s\n' "$mark" "$rc" "$s" "$e" "${u0:--}" "${u1:--}" >&2
`

// clockProbe prints what date +%s%N gives in the target and, on a second
// line when it can be read, the first field of /proc/uptime.
const clockProbe = `date +%s%N || exit
{ read -r u _ </proc/uptime; } 2>/dev/null && echo "$u"
exit 0`

// clockAgreement is how far date's interval and uptime's may differ
// before date's is taken for stepped. Uptime's interval is off by up to
// 10 ms (it is printed in hundredths, truncated); date's also holds the
// fork of the second date (about 1 ms). A step by ntpd (over 128 ms),
// chrony (makestep, usually 1 s) or timesyncd (400 ms) is far beyond it.
const clockAgreement = 20 * time.Millisecond

// commandArgv wraps argv in commandScript.
func commandArgv(mode, mark string, env map[string]string, argv []string) []string {
	w := []string{"/bin/sh", "-c", commandScript, "ctrperf-command", mode, mark}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		w = append(w, k+"="+env[k])
	}
	return append(append(w, "--"), argv...)
}

// wallTime is one execution's wall time and where it came from.
type wallTime struct {
	time.Duration
	// Stepped is set when date's interval and uptime's disagreed by more
	// than clockAgreement, by Skew (date's minus uptime's): the time is
	// then uptime's.
	Stepped bool
	Skew    time.Duration
}

// wallOf is the wall time of an execution from the wrapper's readings:
// date's interval (nanoseconds) unless it disagrees with the monotonic
// uptime's, which then wins.
func wallOf(dateStart, dateEnd int64, upStart, upEnd time.Duration) wallTime {
	date, up := time.Duration(dateEnd-dateStart), upEnd-upStart
	if skew := date - up; skew > clockAgreement || skew < -clockAgreement {
		return wallTime{Duration: up, Stepped: true, Skew: skew}
	}
	return wallTime{Duration: date}
}

// parseUptime reads the first field of /proc/uptime, seconds with a
// fraction ("12345.67"), exactly.
func parseUptime(s string) (time.Duration, error) {
	if s == "" || strings.Trim(s, "0123456789.") != "" {
		return 0, fmt.Errorf("uptime %q is not seconds", s)
	}
	return time.ParseDuration(s + "s")
}

// splitTiming removes the timing line from stderr and returns the
// command's own stderr, its exit status and its wall time.
func splitTiming(stderr []byte, mark string) (own []byte, status int, wall wallTime, err error) {
	i := bytes.LastIndex(stderr, []byte("\n"+mark+" "))
	if i < 0 {
		return stderr, 0, wallTime{}, errors.New("no timing line: the wrapper shell did not finish (killed, or no /bin/sh in the image?)")
	}
	line := strings.TrimSpace(string(stderr[i:]))
	f := strings.Fields(string(stderr[i+1+len(mark):]))
	if len(f) != 5 {
		return stderr[:i], 0, wallTime{}, fmt.Errorf("bad timing line %q", line)
	}
	status, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseInt(f[1], 10, 64)
	end, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return stderr[:i], 0, wallTime{}, fmt.Errorf("bad timing line %q (does date support +%%s%%N?)", line)
	}
	up0, err4 := parseUptime(f[3])
	up1, err5 := parseUptime(f[4])
	if err4 != nil || err5 != nil || up1 < up0 {
		return stderr[:i], 0, wallTime{}, fmt.Errorf("bad timing line %q (could the wrapper not read /proc/uptime?)", line)
	}
	return stderr[:i], status, wallOf(start, end, up0, up1), nil
}

// Drive implements Workload.
func (Command) Drive(ctx context.Context, env Env) (*results.Measurement, error) {
	a := env.Config.App.(CommandApp)
	r := commandRunner{
		exec: load.EngineExec(env.Engine, env.Target, commandService), now: time.Now,
		app: a, load: env.Config.Load.(CommandLoad), command: a.commandFor(env.Config.Runtime),
		started: env.Started,
		mark:    fmt.Sprintf("ctrperf-command-timing-%x", time.Now().UnixNano()),
	}
	return r.run(ctx)
}

// commandRunner runs one ctrperf run of the command workload.
type commandRunner struct {
	exec    load.ExecFunc
	now     func() time.Time // the clock around an exec, when the target's shell has none
	app     CommandApp
	load    CommandLoad
	command CommandLine
	started func()
	mark    string
}

// errExecTimeout is the cause of an execution's context when load.timeout
// ran out (not the run's budget, nor Ctrl-C).
var errExecTimeout = errors.New("load.timeout")

// timing says how wall times are taken, for the record.
const (
	timingInTarget = "timed inside the target: sh reads date +%s%N around the command, checked against the monotonic /proc/uptime (the exec's start-up is not in the wall time; the wrapper's fork of date, about 1 ms, is)"
	timingAround   = "timed by ctrperf around each exec on the monotonic clock, the exec's start-up included (docker exec: tens of ms): "
	noNanoseconds  = "date +%s%N in the target gives no nanoseconds"
	noUptime       = "the target has no readable /proc/uptime to check date +%s%N against steps of the wall clock"
)

func (r *commandRunner) run(ctx context.Context) (*results.Measurement, error) {
	inTarget, why, err := r.probeClock(ctx)
	if err != nil {
		return nil, err
	}
	l := r.load
	for i := int64(1); i <= l.WarmupRuns; i++ {
		if _, _, err := r.once(ctx, inTarget, fmt.Sprintf("warm-up %d of %d", i, l.WarmupRuns)); err != nil {
			return nil, err
		}
	}
	if r.started != nil {
		r.started()
	}
	execs := make([]results.Execution, 0, l.Runs)
	var stepped []string
	for i := int64(1); i <= l.Runs; i++ {
		what := fmt.Sprintf("run %d of %d", i, l.Runs)
		wall, fig, err := r.once(ctx, inTarget, what)
		if err != nil {
			return nil, err
		}
		if wall.Stepped {
			stepped = append(stepped, fmt.Sprintf("command: %s: date in the target counted %.3f s where the monotonic /proc/uptime counted %.3f s (the wall clock was stepped, or the wrapper was held up): its wall time is uptime's, to 10 ms",
				what, (wall.Duration+wall.Skew).Seconds(), wall.Seconds()))
		}
		e := results.Execution{WallS: wall.Seconds()}
		if l.Figure != "" {
			e.Figures = map[string]float64{l.Figure: fig}
		}
		execs = append(execs, e)
	}
	timing := timingInTarget
	if !inTarget {
		timing = timingAround + why
	}
	m := summarizeExecutions(execs, l, r.command, timing)
	m.Notes = append(m.Notes, stepped...)
	return m, nil
}

// probeClock tells whether the wall time can be taken in the target:
// date gives nanoseconds and /proc/uptime is there to check them. When
// not, why says which is missing.
func (r *commandRunner) probeClock(ctx context.Context) (inTarget bool, why string, err error) {
	out, errOut, code, err := r.exec(ctx, []string{"/bin/sh", "-c", clockProbe})
	if err != nil {
		return false, "", fmt.Errorf("command: run /bin/sh in the target: %w", err)
	}
	if code != 0 {
		return false, "", fmt.Errorf("command: /bin/sh -c 'date +%%s%%N' in the target exited with status %d (the image needs /bin/sh, date and sleep): %s",
			code, outputTail(append(append(slices.Clone(out), '\n'), errOut...)))
	}
	date, up, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	date = strings.TrimSpace(date)
	if _, perr := strconv.ParseInt(date, 10, 64); perr != nil || len(date) < 16 {
		return false, noNanoseconds, nil
	}
	if _, perr := parseUptime(strings.TrimSpace(up)); perr != nil {
		return false, noUptime, nil
	}
	return true, "", nil
}

// once runs prepare (if any) and one execution; it returns the wall time
// and the figure (0 without one).
func (r *commandRunner) once(ctx context.Context, inTarget bool, what string) (wallTime, float64, error) {
	l, a := r.load, r.app
	if !a.Prepare.IsZero() {
		_, errOut, code, _, err := r.execOne(ctx, commandArgv("plain", r.mark, a.Env, a.Prepare.argv()), false)
		if err != nil {
			return wallTime{}, 0, fmt.Errorf("command: prepare before %s: %w", what, err)
		}
		if code != 0 {
			return wallTime{}, 0, fmt.Errorf("command: prepare before %s (%s) exited with status %d: %s", what, a.Prepare, code, outputTail(errOut))
		}
	}
	mode := "time"
	if !inTarget {
		mode = "plain"
	}
	out, errOut, code, wall, err := r.execOne(ctx, commandArgv(mode, r.mark, a.Env, r.command.argv()), inTarget)
	if err != nil {
		return wallTime{}, 0, fmt.Errorf("command: %s: %w", what, err)
	}
	if code != 0 {
		msg := outputTail(errOut)
		if len(bytes.TrimSpace(errOut)) == 0 {
			msg = "no stderr; stdout ends: " + outputTail(out)
		}
		hint := ""
		if code == 127 {
			hint = " (command not found in the target)"
		}
		return wallTime{}, 0, fmt.Errorf("command: %s (%s) exited with status %d%s: %s", what, r.command, code, hint, msg)
	}
	if l.Figure == "" {
		return wall, 0, nil
	}
	f, err := r.figure(out, errOut)
	if err != nil {
		return wallTime{}, 0, fmt.Errorf("command: %s: figure %s: %w", what, l.Figure, err)
	}
	return wall, f, nil
}

// execOne runs a wrapped argv under load.timeout. With inTarget the wall
// time comes from the timing line, which is removed from stderr; else it
// is the clock around the exec (time.Now's monotonic reading).
func (r *commandRunner) execOne(ctx context.Context, argv []string, inTarget bool) (stdout, stderr []byte, code int, wall wallTime, err error) {
	ectx, cancel := context.WithTimeoutCause(ctx, r.load.Timeout, errExecTimeout)
	defer cancel()
	t0 := r.now()
	stdout, stderr, code, err = r.exec(ectx, argv)
	wall = wallTime{Duration: r.now().Sub(t0)}
	if err != nil {
		switch {
		case ctx.Err() == nil && errors.Is(context.Cause(ectx), errExecTimeout):
			return nil, nil, 0, wallTime{}, fmt.Errorf("timed out after %s (load.timeout)", r.load.Timeout)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, nil, 0, wallTime{}, fmt.Errorf("the run's budget ran out (plan warmup + duration + slack; raise duration: for long commands): %w", err)
		}
		return nil, nil, 0, wallTime{}, err
	}
	if !inTarget || code != 0 && !bytes.Contains(stderr, []byte(r.mark)) {
		// Not started by the wrapper's timed path (plain mode, or the
		// shell failed before it: a missing data directory).
		return stdout, stderr, code, wall, nil
	}
	own, status, w, terr := splitTiming(stderr, r.mark)
	if terr != nil {
		return stdout, own, code, wallTime{}, terr
	}
	return stdout, own, status, w, nil
}

// figure takes the number from an execution's output.
func (r *commandRunner) figure(stdout, stderr []byte) (float64, error) {
	l := r.load
	var out []byte
	var from string
	switch l.FigureFrom {
	case "stderr":
		out, from = stderr, "stderr"
	case "both":
		out, from = append(append(slices.Clone(stdout), '\n'), stderr...), "stdout and stderr"
	default:
		out, from = stdout, "stdout"
	}
	var v float64
	var err error
	if l.re != nil {
		v, err = matchFigure(l.re, l.group, out)
		if err != nil {
			err = fmt.Errorf("load.figure_regex %s: %v in %s, which ends: %s", l.FigureRegex, err, from, outputTail(out))
		}
	} else {
		var doc any
		if doc, err = decodeJSONOutput(out); err != nil {
			err = fmt.Errorf("%s: %v; it ends: %s", from, err, outputTail(out))
		} else if v, err = l.path.lookup(doc); err != nil {
			err = fmt.Errorf("load.figure_json %s: %v", l.FigureJSON, err)
		}
	}
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("the value is %v", v)
	}
	return v, err
}

// summarizeExecutions is the run's measurement: every execution, the wall
// time's median, mean, σ, min and max, the figure's median, and one
// operation so that the report's tables show executions per second and
// the median time.
func summarizeExecutions(execs []results.Execution, l CommandLoad, cmd CommandLine, timing string) *results.Measurement {
	walls := make([]float64, len(execs))
	var sum float64
	for i, e := range execs {
		walls[i] = e.WallS
		sum += e.WallS
	}
	mean := sum / float64(len(walls))
	median := stats.Median(walls)
	m := &results.Measurement{
		DurationS: sum,
		Operations: map[string]*results.Operation{"command": {Count: int64(len(execs)), MeanMs: mean * 1000,
			PercentilesMs: map[string]float64{"50": median * 1000}}},
		Metrics: map[string]float64{
			results.MetricElapsed: sum,
			"wall_median_s":       median,
			"wall_mean_s":         mean,
			"wall_min_s":          slices.Min(walls),
			"wall_max_s":          slices.Max(walls),
		},
		Declared: map[string]results.MetricInfo{
			"wall_median_s": {Better: results.BetterLower, Unit: "s"},
			"wall_mean_s":   {Better: results.BetterLower, Unit: "s"},
			"wall_min_s":    {Better: results.BetterLower, Unit: "s"},
			"wall_max_s":    {Better: results.BetterLower, Unit: "s"},
		},
		Executions: execs,
		Load:       &results.LoadStats{Mode: "tool"},
		Tools:      map[string]string{"command": cmd.String(), "timing": timing},
		Notes:      []string{"command: " + timing},
	}
	if sum > 0 {
		m.Metrics[results.MetricThroughput] = float64(len(execs)) / sum
	}
	if len(walls) > 1 {
		var ss float64
		for _, w := range walls {
			ss += (w - mean) * (w - mean)
		}
		m.Metrics["wall_stddev_s"] = math.Sqrt(ss / float64(len(walls)-1))
		m.Declared["wall_stddev_s"] = results.MetricInfo{Unit: "s"}
	}
	if l.Figure != "" {
		figs := make([]float64, len(execs))
		for i, e := range execs {
			figs[i] = e.Figures[l.Figure]
		}
		m.Metrics[l.Figure] = stats.Median(figs)
		m.Declared[l.Figure] = results.MetricInfo{Better: l.better(), Unit: l.FigureUnit}
	}
	return m
}

package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/labels"
	"ctrperf/internal/load"
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
	"ctrperf/internal/workload/parsers"
)

// A client command is the user's own load tool (redis-benchmark, pgbench,
// memtier_benchmark, wrk, k6) as the load of an app: it runs where the load
// stands — this machine, ctrperf's client namespace for
// published-external, or a client container (client: container) — so its
// traffic takes the configuration's network path, and its templates
// ({{host:app}}, {{port:app:PORT}}, {{addr:app:PORT}}) say where the app is
// reached from there. Each ctrperf run invokes it warmup_runs times
// untimed (or warmup_command), then runs times timed; the figures come
// from a ready-made parser (parser: redis-benchmark) and from the plan's
// own patterns (figures:), the median over the timed invocations being the
// run's value.

// Where a client command runs (ClientLoad.Client).
const (
	clientHost      = "host"
	clientContainer = "container"
)

// clientService is the service name of the client container.
const clientService = "client"

// ClientFigure is a figure of the plan's own: a number the tool prints,
// by regular expression or JSON path, as the command workload takes one.
type ClientFigure struct {
	Name   string
	Regex  string // (?P<value>…) or the only group; the last match
	JSON   string // a path into the JSON document of the output
	From   string // stdout, stderr or both
	Unit   string
	Better string // higher | lower; "" when the name says

	re    *regexp.Regexp
	group int
	path  jsonPath
}

// ClientLoad is an app's load when it is a client command.
type ClientLoad struct {
	Command       CommandLine
	WarmupCommand CommandLine // zero: Command
	WarmupRuns    int64       // untimed invocations first
	Runs          int64       // timed invocations per ctrperf run
	Timeout       time.Duration
	Parser        string
	parser        *parsers.Parser
	Figures       []ClientFigure
	Client        string // host | container
	Image         string // the client container's image; "" the Debian base
	Env           map[string]string
}

// DefaultClientLoad: one warm-up, one timed invocation per run (the
// repetitions give the spread), ten minutes each at most.
var DefaultClientLoad = ClientLoad{WarmupRuns: 1, Runs: 1, Timeout: 10 * time.Minute, Client: clientHost}

// parseClientLoad reads the load knobs of a client command.
func parseClientLoad(m map[string]any) (ClientLoad, error) {
	c := DefaultClientLoad
	k := newKnobs("load", m)
	var protocol string
	k.enum("protocol", &protocol, "command")
	k.command("command", &c.Command)
	k.command("warmup_command", &c.WarmupCommand)
	whole(k, "warmup_runs", &c.WarmupRuns, 0, 100)
	whole(k, "runs", &c.Runs, 1, 1000)
	k.duration("timeout", &c.Timeout, time.Second, 24*time.Hour)
	k.str("parser", &c.Parser, func(s string) error {
		p, ok := parsers.Get(s)
		if !ok {
			return fmt.Errorf("unknown parser (known: %s)", strings.Join(parsers.Names(), ", "))
		}
		c.parser = &p
		return nil
	})
	k.enum("client", &c.Client, clientHost, clientContainer)
	k.str("client_image", &c.Image, func(s string) error {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\n") {
			return errors.New("want an image reference such as ctrperf/debian-base")
		}
		return nil
	})
	k.env("env", &c.Env, dataEnv)
	for i, fm := range k.subList("figures") {
		c.Figures = append(c.Figures, parseClientFigure(k, fmt.Sprintf("load.figures[%d]", i), fm))
	}
	errs := []error{k.err()}
	if c.parser == nil && len(c.Figures) == 0 && c.Parser == "" {
		errs = append(errs, knobError("load.command", "load.command: no figure would be taken from its output: name a parser (load.parser: %s) or give load.figures", strings.Join(parsers.Names(), ", ")))
	}
	if given(m, "client_image") && c.Client != clientContainer {
		errs = append(errs, knobError("load.client_image", "load.client_image is the image of the client container: set load.client: container"))
	}
	seen := map[string]bool{}
	for i, f := range c.Figures {
		if f.Name != "" && seen[f.Name] {
			errs = append(errs, knobError(fmt.Sprintf("load.figures[%d].name", i), "load.figures[%d].name = %s: two figures have that name", i, f.Name))
		}
		seen[f.Name] = true
	}
	return c, errors.Join(errs...)
}

// parseClientFigure reads one entry of load.figures.
func parseClientFigure(parent *knobs, what string, m map[string]any) ClientFigure {
	f := ClientFigure{From: "stdout"}
	k := newKnobs(what, m)
	decodeFigure(k, clientFigureKeys, &f)
	if err := k.err(); err != nil {
		parent.errs = append(parent.errs, err)
		return f
	}
	switch {
	case f.Name == "":
		parent.errs = append(parent.errs, knobError(what+".name", "%s: no name; reports show the figure under it (e.g. set_per_s)", what))
	case given(m, "regex") == given(m, "json"):
		parent.errs = append(parent.errs, knobError(what+".regex", "%s: give either regex (a pattern with (?P<value>…)) or json (a path such as .results[0].tps)", what))
	}
	if f.Name != "" {
		switch figureSense(f.Name, f.Better) {
		case senseUnsaid:
			parent.errs = append(parent.errs, knobError(what+".better", "%s: %s does not say which way is better; add better: higher or lower (or end the name in _per_s or _ms)", what, f.Name))
		case senseContradicted:
			parent.errs = append(parent.errs, knobError(what+".better", "%s: better: %s contradicts the name %s; rename it or drop better", what, f.Better, f.Name))
		}
	}
	return f
}

// figureKeys are the knob names of a figure's fields: an entry of a
// client's load.figures names them plainly, the command workload's load
// with a figure_ prefix.
type figureKeys struct{ name, regex, json, from, unit, better string }

var (
	clientFigureKeys  = figureKeys{"name", "regex", "json", "from", "unit", "better"}
	commandFigureKeys = figureKeys{"figure", "figure_regex", "figure_json", "figure_from", "figure_unit", "better"}
)

// decodeFigure reads a figure's knobs into f, checking its name, pattern
// and JSON path; which of them must be given is the caller's to say.
func decodeFigure(k *knobs, keys figureKeys, f *ClientFigure) {
	k.str(keys.name, &f.Name, func(s string) error {
		switch {
		case !figureName.MatchString(s):
			return errors.New("want a metric name: lower-case letters, digits and _, starting with a letter (e.g. set_per_s)")
		case slices.Contains(reservedMetrics, s) || strings.HasPrefix(s, "wall_"):
			return errors.New("ctrperf reports that name itself; choose another")
		}
		return nil
	})
	k.str(keys.regex, &f.Regex, func(s string) error {
		re, g, err := figureRegexp(s)
		f.re, f.group = re, g
		return err
	})
	k.str(keys.json, &f.JSON, func(s string) error {
		p, err := parseJSONPath(s)
		f.path = p
		return err
	})
	k.enum(keys.from, &f.From, "stdout", "stderr", "both")
	k.str(keys.unit, &f.Unit, nil)
	k.enum(keys.better, &f.Better, results.BetterHigher, results.BetterLower)
}

// A figure's declared direction against what its name says.
const (
	senseFine = iota
	// senseUnsaid: neither the name nor better says which way is better.
	senseUnsaid
	// senseContradicted: better says the opposite of the name.
	senseContradicted
)

func figureSense(name, better string) int {
	byName := stats.SenseOf(name)
	switch {
	case better == "" && byName.Neutral:
		return senseUnsaid
	case better != "" && !byName.Neutral && byName.HigherIsBetter != (better == results.BetterHigher):
		return senseContradicted
	}
	return senseFine
}

// better is the figure's declared direction, or its name's.
func (f ClientFigure) better() string {
	if f.Better != "" {
		return f.Better
	}
	if s := stats.SenseOf(f.Name); s.HigherIsBetter {
		return results.BetterHigher
	}
	return results.BetterLower
}

// templates are every string of the client's command lines and
// environment that may hold a template.
func (c ClientLoad) templates() []string {
	var out []string
	for _, cl := range []CommandLine{c.Command, c.WarmupCommand} {
		if cl.Shell != "" {
			out = append(out, cl.Shell)
		}
		out = append(out, cl.Argv...)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		out = append(out, c.Env[k])
	}
	return out
}

// check is what the client command needs of the rest of the plan: every
// template names the app and one of its ports, a client container has
// the app's address on the run's network, and no sidecar is called client.
func (c ClientLoad) check(a AppApp, network engine.NetworkMode) error {
	var errs []error
	for _, s := range c.templates() {
		refs, err := engine.References(s)
		if err != nil {
			errs = append(errs, knobError("load.command", "load.command: %v", err))
			continue
		}
		for _, r := range refs {
			switch {
			case r.Kind != "host" && r.Kind != "port" && r.Kind != "addr":
				errs = append(errs, knobError("load.command", "load.command: %s: a client command takes {{host:app}}, {{port:app:PORT}} and {{addr:app:PORT}}; {{%s:…}} is for the services' own command lines", r.Text, r.Kind))
			case r.Service != "app":
				what := "no such service"
				for _, sc := range a.Sidecars {
					if sc.Name == r.Service {
						what = "a sidecar, which the client does not reach: it drives the app"
					}
				}
				errs = append(errs, knobError("load.command", "load.command: %s names service %q (%s); the client reaches the app: {{%s:app…}}", r.Text, r.Service, what, r.Kind))
			case r.Kind == "host" && r.Port != 0:
				errs = append(errs, knobError("load.command", "load.command: %s: host takes no port ({{host:app}}; {{addr:app:%d}} is host:port)", r.Text, r.Port))
			case r.Kind != "host" && r.Port == 0:
				errs = append(errs, knobError("load.command", "load.command: %s: %s needs a port ({{%s:app:PORT}})", r.Text, r.Kind, r.Kind))
			case r.Kind != "host" && !slices.Contains(a.Ports, r.Port):
				errs = append(errs, knobError("load.command", "load.command: %s: the app declares no port %d (app.port / app.ports: %v)", r.Text, r.Port, a.Ports))
			}
		}
	}
	if c.Client == clientContainer {
		switch network {
		case engine.NetworkPublished, engine.NetworkPublishedExternal:
			errs = append(errs, knobError("load.client", "load.client container reaches the app at its container IP on the run's network; network %s (a published port) would not be on its path: use network container-ip or host, or client: host", network))
		}
		for _, sc := range a.Sidecars {
			if sc.Name == clientService {
				errs = append(errs, knobError("load.client", "load.client container deploys a service named client, and a sidecar has that name: rename the sidecar"))
			}
		}
	}
	return errors.Join(errs...)
}

// clientPrograms are the Debian packages of tools people drive services
// with, for the advice of a missing one that has no parser.
var clientPrograms = map[string]string{"redis-benchmark": "redis-tools", "pgbench": "postgresql-15", "wrk": "wrk",
	"ab": "apache2-utils", "siege": "siege", "sysbench": "sysbench", "memtier_benchmark": "", "k6": ""}

// installAdvice says where a missing program comes from.
func installAdvice(program string) string {
	if p, ok := parsers.ByProgram(program); ok {
		return p.Install
	}
	if pkg, ok := clientPrograms[program]; ok && pkg != "" {
		return "Debian package " + pkg
	}
	return "install it there (a Debian package of that name, if there is one)"
}

// ToolMissingError is a client program that is not where the client runs:
// the configuration cannot run until someone installs it (not_run).
type ToolMissingError struct {
	Program, Where string
}

func (e *ToolMissingError) Error() string {
	return fmt.Sprintf("client command: %s is not installed %s: %s", e.Program, e.Where, installAdvice(e.Program))
}

// NotRunnable marks the error as a configuration that cannot run here.
func (e *ToolMissingError) NotRunnable() bool { return true }

// clientServices is the client container of a configuration, or nothing
// when the client runs on this machine (whose program is checked here, so
// that a missing one is not_run before anything is deployed).
func (c ClientLoad) clientServices(cfg Config) ([]engine.Service, error) {
	if c.Client != clientContainer {
		var missing []error
		for _, cl := range []CommandLine{c.Command, c.WarmupCommand} {
			if p := programOf(cl); p != "" {
				if _, err := cfg.lookPath(p); err != nil {
					missing = append(missing, &ToolMissingError{Program: p, Where: "on this machine, where the client runs"})
				}
			}
		}
		if cfg.Network == engine.NetworkPublishedExternal {
			if _, err := cfg.lookPath("ip"); err != nil {
				missing = append(missing, &ToolMissingError{Program: "ip", Where: "on this machine (the client enters its namespace with ip netns exec)"})
			}
		}
		return nil, errors.Join(missing...)
	}
	s := sleeperService(clientService, cfg)
	s.Resources = engine.Resources{} // the configuration's limits are the app's
	// The load generator: runtime kubernetes places it on
	// kubernetes.client_node.
	s.Labels = map[string]string{labels.Role: "client"}
	if c.Image != "" {
		s.Image = image.Resolve(c.Image)
	}
	return []engine.Service{s}, nil
}

// clientBindings is where the app is from the client: the endpoint the
// load would dial (docker-proxy's loopback port for published, the host
// side of the client namespace for published-external, the container's
// address for container-ip, the allocated loopback port on a shared
// network) or, for a client container on a bridge, the app's container IP
// and its own ports.
func clientBindings(t *engine.Target, client string) (engine.Bindings, error) {
	sb := engine.ServiceBinding{Ports: map[int]int{}}
	// On a shared network the endpoint is the app's own address; on a
	// cluster a client pod dials what the endpoint names (pod IP,
	// ClusterIP, NodePort, the node's address), the path under test.
	shared := t.Runtime.Traits().Processes || t.Network == engine.NetworkHost || plan.KubeNetwork(t.Network)
	if client == clientContainer && !shared {
		for _, c := range t.Containers {
			if c.Service == "app" && c.IP != "" {
				sb.Host = c.IP
			}
		}
		if sb.Host == "" {
			return nil, fmt.Errorf("the client container needs the app's container IP, and target %s has none", t.RunID)
		}
		for _, e := range t.Endpoints {
			if e.Service == "app" {
				sb.Ports[e.Port] = e.Port // its own port, on its own address
			}
		}
		return engine.Bindings{"app": sb}, nil
	}
	for _, e := range t.Endpoints {
		if e.Service != "app" {
			continue
		}
		host, port, err := net.SplitHostPort(e.Addr)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", e.Addr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", e.Addr, err)
		}
		if sb.Host != "" && sb.Host != host {
			return nil, fmt.Errorf("the app's ports are on two hosts (%s, %s)", sb.Host, host)
		}
		sb.Host, sb.Ports[e.Port] = host, p
	}
	if sb.Host == "" {
		return nil, fmt.Errorf("target %s has no endpoint of the app", t.RunID)
	}
	return engine.Bindings{"app": sb}, nil
}

// expand resolves the templates of a command line.
func expandCommand(b engine.Bindings, cl CommandLine) (CommandLine, error) {
	if cl.Shell != "" {
		s, err := b.Expand(cl.Shell)
		return CommandLine{Shell: s}, err
	}
	argv, err := b.ExpandAll(cl.Argv)
	return CommandLine{Argv: argv}, err
}

// localExec runs argv on this machine, prefixed (ip netns exec NS) when
// the client stands in a namespace.
func localExec(prefix ...string) load.ExecFunc {
	return func(ctx context.Context, argv []string) ([]byte, []byte, int, error) {
		full := append(slices.Clone(prefix), argv...)
		cmd := exec.CommandContext(ctx, full[0], full[1:]...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return out.Bytes(), errOut.Bytes(), ee.ExitCode(), nil
		}
		if err != nil {
			return out.Bytes(), errOut.Bytes(), -1, err
		}
		return out.Bytes(), errOut.Bytes(), 0, nil
	}
}

// clientSide is where a run's client stands: how its command and its
// files are reached, and in words for the record.
type clientSide struct {
	run, files load.ExecFunc
	where      string
}

func sideOf(env Env, c ClientLoad) clientSide {
	t := env.Target
	switch {
	case c.Client == clientContainer:
		ex := load.EngineExec(env.Engine, t, clientService)
		return clientSide{run: ex, files: ex, where: "in the client container (" + string(t.Network) + ")"}
	case t.Netns != "":
		return clientSide{run: localExec("ip", "netns", "exec", t.Netns), files: localExec(),
			where: "on this machine in the client namespace " + t.Netns}
	}
	return clientSide{run: localExec(), files: localExec(), where: "on this machine"}
}

// driveClient runs the client command of an app's run.
func driveClient(ctx context.Context, env Env, c ClientLoad) (*results.Measurement, error) {
	if env.Target == nil {
		return nil, errors.New("app: no target")
	}
	b, err := clientBindings(env.Target, c.Client)
	if err != nil {
		return nil, fmt.Errorf("client command: %w", err)
	}
	r := clientRunner{side: sideOf(env, c), c: c, started: env.Started,
		mark: fmt.Sprintf("ctrperf-client-timing-%x", time.Now().UnixNano())}
	if r.cmd, err = expandCommand(b, c.Command); err != nil {
		return nil, fmt.Errorf("client command: %w", err)
	}
	r.warm = r.cmd
	if !c.WarmupCommand.IsZero() {
		if r.warm, err = expandCommand(b, c.WarmupCommand); err != nil {
			return nil, fmt.Errorf("client warm-up command: %w", err)
		}
	}
	if r.env, err = b.ExpandEnv(c.Env); err != nil {
		return nil, fmt.Errorf("client command: %w", err)
	}
	return r.run(ctx)
}

// clientRunner runs one ctrperf run's invocations.
type clientRunner struct {
	side      clientSide
	c         ClientLoad
	cmd, warm CommandLine
	env       map[string]string
	started   func()
	mark      string
}

func (r *clientRunner) run(ctx context.Context) (*results.Measurement, error) {
	for _, cl := range []CommandLine{r.cmd, r.warm} {
		if err := r.haveProgram(ctx, cl); err != nil {
			return nil, err
		}
	}
	for i := int64(1); i <= r.c.WarmupRuns; i++ {
		if _, err := r.invoke(ctx, r.warm, fmt.Sprintf("warm-up %d of %d", i, r.c.WarmupRuns), false); err != nil {
			return nil, err
		}
	}
	if r.started != nil {
		r.started()
	}
	var invs []invocation
	for i := int64(1); i <= r.c.Runs; i++ {
		inv, err := r.invoke(ctx, r.cmd, fmt.Sprintf("run %d of %d", i, r.c.Runs), true)
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	return r.measurement(invs), nil
}

// haveProgram checks that the program a command starts is where the
// client runs (a client container's image may lack it).
func (r *clientRunner) haveProgram(ctx context.Context, cl CommandLine) error {
	p := programOf(cl)
	if p == "" {
		return nil
	}
	_, _, code, err := r.side.run(ctx, []string{"/bin/sh", "-c", `command -v "$1" >/dev/null`, "ctrperf-client", p})
	if err != nil {
		return fmt.Errorf("client command: look for %s %s: %w", p, r.side.where, err)
	}
	if code != 0 {
		return &ToolMissingError{Program: p, Where: r.side.where}
	}
	return nil
}

// invocation is one timed invocation's result.
type invocation struct {
	wall    wallTime
	figures map[string]float64
	parsed  parsers.Result
}

// invoke runs a command once in a fresh working directory and, when
// measured, takes its figures.
func (r *clientRunner) invoke(ctx context.Context, cl CommandLine, what string, measured bool) (invocation, error) {
	dirOut, _, code, err := r.side.files(ctx, []string{"mktemp", "-d", "/tmp/ctrperf-client.XXXXXX"})
	if err != nil || code != 0 {
		return invocation{}, fmt.Errorf("client command: a working directory %s: status %d, %v", r.side.where, code, err)
	}
	dir := strings.TrimSpace(string(dirOut))
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _, _, _ = r.side.files(cctx, []string{"rm", "-rf", "--", dir})
	}()
	env := maps.Clone(r.env)
	if env == nil {
		env = map[string]string{}
	}
	env[dataEnv] = dir // commandScript works in $CTRPERF_DATA
	ectx, cancel := context.WithTimeoutCause(ctx, r.c.Timeout, errExecTimeout)
	defer cancel()
	stdout, stderr, code, err := r.side.run(ectx, commandArgv("time", r.mark, env, cl.argv()))
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(ectx), errExecTimeout) {
			return invocation{}, fmt.Errorf("client command: %s (%s) timed out after %s (load.timeout) %s", what, cl, r.c.Timeout, r.side.where)
		}
		return invocation{}, fmt.Errorf("client command: %s (%s): %w", what, cl, err)
	}
	own, status, wall, terr := splitTiming(stderr, r.mark)
	if terr != nil {
		return invocation{}, fmt.Errorf("client command: %s (%s) exited with status %d: %v; stderr ends: %s", what, cl, code, terr, outputTail(stderr))
	}
	if status != 0 {
		msg := outputTail(own)
		if len(bytes.TrimSpace(own)) == 0 {
			msg = "no stderr; stdout ends: " + outputTail(stdout)
		}
		return invocation{}, fmt.Errorf("client command: %s (%s) exited with status %d %s: %s", what, cl, status, r.side.where, msg)
	}
	if !measured {
		return invocation{wall: wall}, nil
	}
	inv := invocation{wall: wall, figures: map[string]float64{}}
	if p := r.c.parser; p != nil {
		files, err := r.readFiles(ctx, dir, p.Files)
		if err != nil {
			return inv, err
		}
		inv.parsed, err = p.Parse(parsers.Output{Stdout: stdout, Stderr: own, Files: files})
		if err != nil {
			return inv, fmt.Errorf("client command: %s: parser %s: %v (%s)", what, p.Name, err, p.Hint)
		}
		maps.Copy(inv.figures, inv.parsed.Figures)
	}
	for _, f := range r.c.Figures {
		v, err := f.take(stdout, own)
		if err != nil {
			return inv, fmt.Errorf("client command: %s: figure %s: %w", what, f.Name, err)
		}
		inv.figures[f.Name] = v
	}
	return inv, nil
}

// take is the figure's value in an invocation's output.
func (f ClientFigure) take(stdout, stderr []byte) (float64, error) {
	out, from := stdout, "stdout"
	switch f.From {
	case "stderr":
		out, from = stderr, "stderr"
	case "both":
		out, from = append(append(slices.Clone(stdout), '\n'), stderr...), "stdout and stderr"
	}
	if f.re != nil {
		v, err := matchFigure(f.re, f.group, out)
		if err != nil {
			return 0, fmt.Errorf("regex %s: %v in %s, which ends: %s", f.Regex, err, from, outputTail(out))
		}
		return v, nil
	}
	doc, err := decodeJSONOutput(out)
	if err != nil {
		return 0, fmt.Errorf("%s: %v; it ends: %s", from, err, outputTail(out))
	}
	v, err := f.path.lookup(doc)
	if err != nil {
		return 0, fmt.Errorf("json %s: %v", f.JSON, err)
	}
	return v, nil
}

// readFiles reads the files of the working directory that match the
// parser's patterns.
func (r *clientRunner) readFiles(ctx context.Context, dir string, patterns []string) (map[string][]byte, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	list := `cd "$1" || exit 1; shift; for p in "$@"; do for f in $p; do [ -f "$f" ] && printf '%s\n' "$f"; done; done; exit 0`
	out, errOut, code, err := r.side.files(ctx, append([]string{"/bin/sh", "-c", list, "ctrperf-client", dir}, patterns...))
	if err != nil || code != 0 {
		return nil, fmt.Errorf("client command: list %s %s: status %d, %v %s", dir, r.side.where, code, err, outputTail(errOut))
	}
	files := map[string][]byte{}
	for _, name := range strings.Fields(string(out)) {
		b, errOut, code, err := r.side.files(ctx, []string{"cat", "--", dir + "/" + name})
		if err != nil || code != 0 {
			return nil, fmt.Errorf("client command: read %s/%s %s: status %d, %v %s", dir, name, r.side.where, code, err, outputTail(errOut))
		}
		files[name] = b
	}
	return files, nil
}

// measurement is the run's: the median of each figure over the timed
// invocations, their wall times, the parser's operations (of the last
// invocation) and its throughput.
func (r *clientRunner) measurement(invs []invocation) *results.Measurement {
	m := &results.Measurement{Metrics: map[string]float64{}, Declared: map[string]results.MetricInfo{},
		Load:  &results.LoadStats{Mode: "tool"},
		Tools: map[string]string{"client": r.cmd.String(), "client_where": r.side.where}}
	if p := r.c.parser; p != nil {
		m.Tools["parser"] = p.Name
	}
	walls := make([]float64, len(invs))
	var thr []float64
	for i, inv := range invs {
		walls[i] = inv.wall.Seconds()
		m.DurationS += walls[i]
		m.Executions = append(m.Executions, results.Execution{WallS: walls[i], Figures: inv.figures})
		if inv.parsed.Throughput > 0 {
			thr = append(thr, inv.parsed.Throughput)
		}
		if inv.wall.Stepped {
			m.Notes = append(m.Notes, fmt.Sprintf("client command: run %d: the wall clock was stepped; its wall time is /proc/uptime's, to 10 ms", i+1))
		}
	}
	m.Metrics["wall_client_s"] = stats.Median(walls)
	m.Declared["wall_client_s"] = results.MetricInfo{Better: results.BetterLower, Unit: "s"}
	if len(thr) > 0 {
		m.Metrics[results.MetricThroughput] = stats.Median(thr)
	}
	last := invs[len(invs)-1]
	maps.Copy(m.Declared, last.parsed.Declared)
	for _, f := range r.c.Figures {
		m.Declared[f.Name] = results.MetricInfo{Better: f.better(), Unit: f.Unit}
	}
	for name := range last.figures {
		vals := make([]float64, 0, len(invs))
		for _, inv := range invs {
			if v, ok := inv.figures[name]; ok {
				vals = append(vals, v)
			}
		}
		m.Metrics[name] = stats.Median(vals)
	}
	for name, op := range last.parsed.Operations {
		// A tool that gave percentiles but no count (redis-benchmark)
		// keeps them as figures only: an operation of count 0 would read
		// as no throughput.
		if op.Count > 0 {
			if m.Operations == nil {
				m.Operations = map[string]*results.Operation{}
			}
			m.Operations[name] = op
		}
	}
	if len(invs) > 1 && len(m.Operations) > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("client command: operations are the last of %d timed invocations'; figures are their medians", len(invs)))
	}
	return m
}

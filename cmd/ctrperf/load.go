package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

type loadOptions struct {
	rate        float64
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	ramp        time.Duration
	poisson     bool
	seed        uint64
	scenario    string
	timeout     time.Duration
	maxInFlight int
	memcached   bool
	mix         string
	valueSize   int
	keys        int
	ops         int64
	cpuset      string
	format      string // table, json, csv or md
	progress    bool   // draw live progress on stderr
}

func newLoadCmd() *cobra.Command {
	var o loadOptions
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "load URL|HOST:PORT",
		Short: "Drive open- or closed-loop load against an endpoint and print honest latencies",
		Long: `ctrperf load drives load against an HTTP endpoint (or memcached with
--memcached) and prints the per-operation table of the source documents
(JMeter aggregate report: samples, mean, median, 90%, 99%, min, max, error %,
throughput/s, KB/s) plus the target vs achieved rate and the late starts.
--format json prints the measurement (the record bench stores, with the
encoded histograms) and a summary: per operation and overall samples,
errors, throughput and latency mean, min, p50, p90, p95, p99, p99.9 and max
in ms. --format csv and md print the per-operation rows with those columns.
On a terminal, stderr shows live progress (elapsed of total, requests/s,
errors) unless the output is JSON.

Open loop (--rate R): R sessions per second start on schedule (fixed gaps, or
a Poisson process with --poisson), whatever the server does; --ramp D makes
the rate rise linearly from 0 over the first D of --warmup. Latency counts
from each session's intended start, so a stalled server shows up in every
request that should have been sent during the stall (no coordinated
omission). Closed loop (--concurrency N): N workers back to back, like wrk or
memslap, for saturation throughput; --ops stops after that many operations.
A closed loop of single requests (a URL, or a one-step scenario without
think time, extraction or {{variables}}) runs as wrk does: one epoll event
loop per CPU, each on its own thread with its share of the connections.

A scenario file describes sessions of several labelled steps:

  steps:
    - label: login page
      path: /login
      extract: {csrf: 'name="csrf" value="([^"]+)"'}
    - label: login
      method: POST
      path: /login
      form: {user: "u{{vu}}", password: secret, csrf: "{{csrf}}"}
      expect: 302
      follow_redirects: false
    - label: project page
      path: /projects/1
    - label: new ticket
      method: POST
      path: /projects/1/tickets
      form: {subject: "ticket {{session}}"}

Keys of a step: label, method, path, headers, form | body, expect, extract
(variable: regexp with one group over the body), follow_redirects, think.
Variables: {{name}} of an earlier extract, or the built-ins {{vu}},
{{session}}, {{rand}}. Each session has its own cookie jar.

Ctrl-C, SIGTERM and SIGHUP (the terminal was closed) stop the load the same
way: sessions in flight end, the table covers what was measured until then,
and the exit status is 130. A second signal exits at once. An open-loop run
that could not start the sessions asked for (achieved rate below 95% of
--rate, or due sessions never started) prints its results and exits 3.`,
		Example: `  ctrperf load http://127.0.0.1:8080/ --rate 2000 --duration 60s
  ctrperf load http://127.0.0.1:8080/ --rate 33.3 --poisson --scenario ticketd.yaml
  ctrperf load http://127.0.0.1:8080/index.html --concurrency 64 --duration 10s
  ctrperf load 127.0.0.1:11211 --memcached --mix set=1 --concurrency 4 --ops 100000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.format = format.String()
			o.progress = !format.JSON() && isTerminal(cmd.ErrOrStderr())
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			return runLoad(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, cmd.Flags().Changed("duration"))
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.rate, "rate", 0, fmt.Sprintf("open loop: sessions per second (%g to %g)", load.MinRate, load.MaxRate))
	f.IntVar(&o.concurrency, "concurrency", 0, "closed loop: workers back to back")
	f.DurationVar(&o.duration, "duration", 60*time.Second, "measured window")
	f.DurationVar(&o.warmup, "warmup", 0, "driven but not recorded, before the measured window")
	f.DurationVar(&o.ramp, "ramp", 0, "open loop: rise linearly from 0 to --rate over this first part of --warmup")
	f.BoolVar(&o.poisson, "poisson", false, "open loop: Poisson arrivals instead of fixed gaps")
	f.Uint64Var(&o.seed, "seed", 1, "seed of Poisson arrivals and random choices")
	f.StringVar(&o.scenario, "scenario", "", "YAML scenario of labelled steps (HTTP)")
	f.DurationVar(&o.timeout, "timeout", load.DefaultTimeout, "per request; a request without answer by then is a timeout error")
	f.IntVar(&o.maxInFlight, "max-in-flight", load.DefaultMaxInFlight, "open loop: most sessions (connections) at once")
	f.BoolVar(&o.memcached, "memcached", false, "memcached text protocol instead of HTTP; the target is HOST:PORT")
	f.StringVar(&o.mix, "mix", "set=1", "memcached operation weights, e.g. set=1,get=9")
	f.IntVar(&o.valueSize, "value-size", 100, "memcached value size in bytes")
	f.IntVar(&o.keys, "keys", 10000, "memcached key space")
	f.Int64Var(&o.ops, "ops", 0, "closed loop: stop after this many sessions (memslap --execute-number)")
	f.StringVar(&o.cpuset, "cpuset", "", "pin the generator to these CPUs (e.g. 1 or 0-1)")
	format = addFormatFlags(cmd, formatTable, formatJSON, formatCSV, formatMD)
	return cmd
}

func runLoad(ctx context.Context, stdout, stderr io.Writer, target string, o loadOptions, durationSet bool) error {
	p := load.Profile{
		Rate: o.rate, Poisson: o.poisson, Seed: o.seed, Concurrency: o.concurrency,
		Warmup: o.warmup, Ramp: o.ramp, Duration: o.duration, Ops: o.ops, Timeout: o.timeout,
		MaxInFlight: o.maxInFlight, CPUSet: o.cpuset,
	}
	if o.ops > 0 && !durationSet {
		p.Duration = 0 // the operation count ends the run
	}
	if err := p.Validate(); err != nil {
		return exitcode.AsUsage(err)
	}
	var (
		d    load.Driver
		addr string
	)
	if o.memcached {
		addr = strings.TrimPrefix(target, "memcached://")
		mix, err := load.ParseMix(o.mix)
		if err != nil {
			return exitcode.AsUsage(err)
		}
		d, err = load.NewMemcached(load.MemcachedConfig{Addr: addr, Mix: mix, Keys: o.keys, ValueSize: o.valueSize, Seed: o.seed})
		if err != nil {
			return exitcode.AsUsage(err)
		}
	} else {
		u, err := load.ParseTargetURL(target)
		if err != nil {
			return exitcode.AsUsage(err)
		}
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		var sc *load.Scenario
		if o.scenario != "" {
			if sc, err = load.LoadScenarioFile(o.scenario); err != nil {
				return exitcode.AsUsage(err)
			}
		}
		d, err = load.NewHTTP(load.HTTPConfig{BaseURL: target, Scenario: sc, Seed: o.seed})
		if err != nil {
			return exitcode.AsUsage(err)
		}
	}
	// One probe connection first: an unreachable target is a clear
	// message, not a table full of "refused".
	if err := probe(ctx, addr); err != nil {
		return err
	}
	if o.progress {
		p.Live = &load.Live{}
		stopProgress := startLoadProgress(stderr, p)
		m, runErr := load.Run(ctx, d, p)
		stopProgress()
		return reportLoad(stdout, target, o, d, m, runErr)
	}
	m, runErr := load.Run(ctx, d, p)
	return reportLoad(stdout, target, o, d, m, runErr)
}

// reportLoad prints what load.Run measured and maps how it ended to an
// exit status.
func reportLoad(stdout io.Writer, target string, o loadOptions, d load.Driver, m *results.Measurement, runErr error) error {
	if m == nil {
		return runErr
	}
	if err := writeLoad(stdout, target, o.format, m, d.Labels()); err != nil {
		return err
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return &exitcode.Error{Code: exitcode.Interrupted, Err: errors.New("interrupted; the table covers what was measured until then")}
		}
		return runErr
	}
	if msg := shortfall(m); msg != "" {
		return &exitcode.ThresholdError{Err: errors.New(msg)}
	}
	return nil
}

// loadJSON is `load --format json`: the measurement as bench records it
// (operations with their encoded histograms) and its summary.
type loadJSON struct {
	Target string `json:"target"`
	*results.Measurement
	Summary loadSummary `json:"summary"`
}

type loadSummary struct {
	Operations map[string]loadStats `json:"operations"`
	// Overall is over every operation (the merged histograms).
	Overall loadStats `json:"overall"`
}

type loadStats struct {
	Samples        int64      `json:"samples"`
	Errors         int64      `json:"errors"`
	ErrorPct       float64    `json:"error_pct"`
	ThroughputPerS float64    `json:"throughput_per_s"`
	KBPerS         float64    `json:"kb_per_s"`
	LatencyMs      *latencyMs `json:"latency_ms,omitempty"` // absent when the operation has no latencies
}

type latencyMs struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func statsOf(r load.AggregateRow) loadStats {
	s := loadStats{Samples: r.Samples, Errors: r.Errors, ErrorPct: r.ErrorPct, ThroughputPerS: r.ThroughputPerS, KBPerS: r.KBPerS}
	if r.HasLatency {
		s.LatencyMs = &latencyMs{Mean: r.MeanMs, Min: r.MinMs, P50: r.MedianMs, P90: r.P90Ms, P95: r.P95Ms, P99: r.P99Ms, P999: r.P999Ms, Max: r.MaxMs}
	}
	return s
}

// writeLoad prints m in format; labels give the order of the rows.
func writeLoad(w io.Writer, target, format string, m *results.Measurement, labels []string) error {
	if format == formatTable || format == "" {
		return load.WriteAggregateTable(w, m, labels)
	}
	rows, err := load.AggregateRows(m, labels)
	if err != nil {
		return err
	}
	if format == formatJSON {
		out := loadJSON{Target: target, Measurement: m, Summary: loadSummary{Operations: map[string]loadStats{}}}
		for i, r := range rows {
			if r.Label == load.TotalLabel && i == len(rows)-1 && len(rows) > 1 {
				out.Summary.Overall = statsOf(r)
				continue
			}
			out.Summary.Operations[r.Label] = statsOf(r)
		}
		if len(rows) == 1 {
			out.Summary.Overall = statsOf(rows[0])
		}
		return writeJSON(w, out)
	}
	t := table{header: []string{"label", "samples", "errors", "error_pct", "throughput_per_s", "kb_per_s",
		"mean_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"}}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rows {
		cells := []string{r.Label, strconv.FormatInt(r.Samples, 10), strconv.FormatInt(r.Errors, 10),
			num(r.ErrorPct), num(r.ThroughputPerS), num(r.KBPerS)}
		if r.HasLatency {
			cells = append(cells, ms(r.MeanMs), ms(r.MinMs), ms(r.MedianMs), ms(r.P90Ms), ms(r.P95Ms), ms(r.P99Ms), ms(r.P999Ms), ms(r.MaxMs))
		} else {
			cells = append(cells, "", "", "", "", "", "", "", "")
		}
		t.add(cells...)
	}
	return t.write(w, format)
}

// shortfall says when an open-loop run did not offer the load asked for:
// the result stays as measured, but the exit status and message say so.
func shortfall(m *results.Measurement) string {
	l := m.Load
	if l == nil || l.Mode != "open" || l.TargetRate == 0 {
		return ""
	}
	var not int64
	for _, op := range m.Operations {
		not += op.Errors[load.KindNotStarted]
	}
	if l.AchievedRate < 0.95*l.TargetRate || not > 0 {
		return fmt.Sprintf("rate shortfall: asked for %.1f sessions/s, started %.1f/s (%d due sessions never started); the generator or its in-flight bound could not keep up: lower --rate, raise --max-in-flight, or give it more CPUs (--cpuset)",
			l.TargetRate, l.AchievedRate, not)
	}
	return ""
}

func probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("target %s is unreachable: %w", addr, err)
	}
	return c.Close()
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startLoadProgress draws a progress bar of the run on w (a terminal) from
// p.Live: elapsed of the whole run (warm-up and measured window) or
// sessions of --ops, the request rate over the last second, errors. The
// returned stop clears it before the results are printed.
func startLoadProgress(w io.Writer, p load.Profile) (stop func()) {
	start := time.Now()
	total := p.Warmup + p.Duration
	byOps := p.Ops > 0 && p.Duration == 0
	barMax := int64(total / (100 * time.Millisecond))
	if byOps {
		barMax = p.Ops
	}
	bar := progressbar.NewOptions64(barMax,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		type point struct {
			at       time.Time
			requests int64
		}
		var window []point // the last second of counts, for the current rate
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				s := p.Live.Snapshot()
				window = append(window, point{now, s.Requests})
				for len(window) > 1 && now.Sub(window[0].at) > time.Second {
					window = window[1:]
				}
				rate := 0.0
				if dt := now.Sub(window[0].at).Seconds(); dt > 0 {
					rate = float64(s.Requests-window[0].requests) / dt
				}
				phase := "measuring"
				if !s.Measuring {
					phase = "warm-up"
				}
				elapsed := now.Sub(start).Truncate(time.Second)
				var where string
				if byOps {
					where = fmt.Sprintf("%d/%d sessions, %s", min(s.Sessions, p.Ops), p.Ops, elapsed)
					_ = bar.Set64(min(s.Sessions, p.Ops))
				} else {
					where = fmt.Sprintf("%s/%s", elapsed, total)
					_ = bar.Set64(min(int64(now.Sub(start)/(100*time.Millisecond)), barMax))
				}
				bar.Describe(fmt.Sprintf("%s %s  %.0f req/s  %d errors", phase, where, rate, s.Errors))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = bar.Clear()
	}
}

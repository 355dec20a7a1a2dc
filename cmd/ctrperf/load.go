package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ctrperf/internal/lifecycle"
	"ctrperf/internal/load"
	"ctrperf/internal/results"
)

type loadOptions struct {
	rate        float64
	concurrency int
	duration    time.Duration
	warmup      time.Duration
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
	json        bool
}

func newLoadCmd() *cobra.Command {
	var o loadOptions
	cmd := &cobra.Command{
		Use:   "load URL|HOST:PORT",
		Short: "Drive open- or closed-loop load against an endpoint and print honest latencies",
		Long: `ctrperf load drives load against an HTTP endpoint (or memcached with
--memcached) and prints the per-operation table of the source documents
(JMeter aggregate report: samples, mean, median, 90%, 99%, min, max, error %,
throughput/s, KB/s) plus the target vs achieved rate and the late starts.

Open loop (--rate R): R sessions per second start on schedule (fixed gaps, or
a Poisson process with --poisson), whatever the server does. Latency counts
from each session's intended start, so a stalled server shows up in every
request that should have been sent during the stall (no coordinated
omission). Closed loop (--concurrency N): N workers back to back, like wrk or
memslap, for saturation throughput; --ops stops after that many operations.

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
and the exit status is 130. A second signal exits at once.`,
		Example: `  ctrperf load http://127.0.0.1:8080/ --rate 2000 --duration 60s
  ctrperf load http://127.0.0.1:8080/ --rate 33.3 --poisson --scenario ticketd.yaml
  ctrperf load http://127.0.0.1:8080/index.html --concurrency 64 --duration 10s
  ctrperf load 127.0.0.1:11211 --memcached --mix set=1 --concurrency 4 --ops 100000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := lifecycle.SignalContext(cmd.Context())
			defer stop()
			return runLoad(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, cmd.Flags().Changed("duration"))
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.rate, "rate", 0, "open loop: sessions per second")
	f.IntVar(&o.concurrency, "concurrency", 0, "closed loop: workers back to back")
	f.DurationVar(&o.duration, "duration", 60*time.Second, "measured window")
	f.DurationVar(&o.warmup, "warmup", 0, "driven but not recorded, before the measured window")
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
	f.BoolVar(&o.json, "json", false, "print the measurement as JSON")
	return cmd
}

func runLoad(ctx context.Context, stdout, stderr io.Writer, target string, o loadOptions, durationSet bool) error {
	p := load.Profile{
		Rate: o.rate, Poisson: o.poisson, Seed: o.seed, Concurrency: o.concurrency,
		Warmup: o.warmup, Duration: o.duration, Ops: o.ops, Timeout: o.timeout,
		MaxInFlight: o.maxInFlight, CPUSet: o.cpuset,
	}
	if o.ops > 0 && !durationSet {
		p.Duration = 0 // the operation count ends the run
	}
	if err := p.Validate(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	var (
		d    load.Driver
		addr string
	)
	if o.memcached {
		addr = strings.TrimPrefix(target, "memcached://")
		mix, err := load.ParseMix(o.mix)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		d, err = load.NewMemcached(load.MemcachedConfig{Addr: addr, Mix: mix, Keys: o.keys, ValueSize: o.valueSize, Seed: o.seed})
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	} else {
		u, err := load.ParseTargetURL(target)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		var sc *load.Scenario
		if o.scenario != "" {
			if sc, err = load.LoadScenarioFile(o.scenario); err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
		}
		d, err = load.NewHTTP(load.HTTPConfig{BaseURL: target, Scenario: sc, Seed: o.seed})
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	// One probe connection first: an unreachable target is a clear
	// message, not a table full of "refused".
	if err := probe(ctx, addr); err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	m, runErr := load.Run(ctx, d, p)
	if m == nil {
		return runErr
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(m); err != nil {
			return err
		}
	} else if err := load.WriteAggregateTable(stdout, m, d.Labels()); err != nil {
		return err
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return &exitError{code: 130, msg: "interrupted; the table covers what was measured until then"}
		}
		return runErr
	}
	if msg := shortfall(m); msg != "" {
		return &exitError{code: 3, msg: msg}
	}
	return nil
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

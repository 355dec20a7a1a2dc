package plan

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"
)

// Run is one measured run of a configuration.
type Run struct {
	Index      int    // position in the run order, 0-based
	Repetition int    // 0-based; also the round the run belongs to
	Config     string // configuration name
}

// Runs is the plan's run order.
func (p *Plan) Runs() []Run { return Order(p.Names(), p.Repetitions, p.Seed) }

// Order interleaves repetitions across configurations: round r runs every
// configuration once, in an order shuffled per round from seed. Slow drift
// of the machine (page cache, thermal state, a neighbour's load) then
// spreads over all configurations instead of biasing whichever ran last,
// as running all of A then all of B would.
//
// The same names, repetitions and seed always give the same order. A round
// never starts with the configuration that ended the previous one, so no
// configuration runs twice back to back and profits from a warm cache.
func Order(names []string, repetitions int, seed int64) []Run {
	// PCG is specified exactly, so the order does not change with the Go
	// release. The second word is a fixed stream id ("ctrp").
	rng := rand.New(rand.NewPCG(uint64(seed), 0x63747270))
	var out []Run
	prevLast := ""
	for r := 0; r < repetitions; r++ {
		round := append([]string(nil), names...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		if len(round) > 1 && round[0] == prevLast {
			j := 1 + rng.IntN(len(round)-1)
			round[0], round[j] = round[j], round[0]
		}
		for _, n := range round {
			out = append(out, Run{Index: len(out), Repetition: r, Config: n})
		}
		if len(round) > 0 {
			prevLast = round[len(round)-1]
		}
	}
	return out
}

// Describe writes the expanded configurations and the run order, as
// `ctrperf bench validate` prints them.
func (p *Plan) Describe(w io.Writer) error {
	variant := ""
	if p.Quicked {
		variant = " (quick variant)"
	}
	fmt.Fprintf(w, "plan %s%s: workload %s, %d configurations × %d repetitions = %d runs, warm-up %s + %s each, seed %d\n",
		p.Name, variant, p.Workload, len(p.Configurations), p.Repetitions, len(p.Configurations)*p.Repetitions, p.Warmup, p.Duration, p.Seed)
	if p.Description != "" {
		fmt.Fprintf(w, "  %s\n", p.Description)
	}
	fmt.Fprintln(w, "\nconfigurations:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range p.Configurations {
		mark := ""
		if c.Name == p.Baseline {
			mark = " (baseline)"
		}
		fmt.Fprintf(tw, "  %s%s\t%s\n", c.Name, mark, c.describeKnobs())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nrun order:")
	runs := p.Runs()
	for r := 0; r < p.Repetitions; r++ {
		fmt.Fprintf(w, "  round %d:", r+1)
		for _, run := range runs {
			if run.Repetition == r {
				fmt.Fprintf(w, " %d:%s", run.Index+1, run.Config)
			}
		}
		fmt.Fprintln(w)
	}
	if len(p.Thresholds) > 0 {
		fmt.Fprintln(w, "\nthresholds (exit code 3 when a whole interval of a ratio is beyond one):")
		for _, t := range p.Thresholds {
			who := "every configuration without its own rule"
			if t.Config != "" {
				who = t.Config
			}
			fmt.Fprintf(w, "  %s: %s\n", who, t.Requirement(p.Baseline))
		}
	}
	window := p.Warmup + p.Duration
	est := time.Duration(len(runs)) * window
	searches, most := p.describeSearches(w)
	if searches == 0 {
		_, err := fmt.Fprintf(w, "\nmeasuring time at least %s (plus deploy and teardown of every run)\n", est)
		return err
	}
	_, err := fmt.Fprintf(w, "\nmeasuring time at least %s, at most %s: capacity searches measure 1 to %d windows per run (plus deploy and teardown of every run)\n",
		est, most, p.maxSteps())
	return err
}

// describeSearches prints the configurations' capacity searches, one line
// when they all search alike, and returns how many configurations search
// and the longest the plan's runs may drive.
func (p *Plan) describeSearches(w io.Writer) (int, time.Duration) {
	window := p.Warmup + p.Duration
	var n int
	var most time.Duration
	descs := map[string]bool{}
	for i := range p.Configurations {
		c := &p.Configurations[i]
		s, ok := c.Search()
		if ok {
			n++
			descs[s.Description] = true
			s.StepSlack = 0 // windows only, as the line says
			most += time.Duration(p.Repetitions) * s.MaxDrive(window)
		} else {
			most += time.Duration(p.Repetitions) * window
		}
	}
	if n == 0 {
		return 0, 0
	}
	fmt.Fprintln(w, "\ncapacity search:")
	if len(descs) == 1 && n == len(p.Configurations) {
		s, _ := p.Configurations[0].Search()
		fmt.Fprintf(w, "  every configuration: %s\n", s.Description)
		return n, most
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i := range p.Configurations {
		desc := "none (one window at the load's rate)"
		if s, ok := p.Configurations[i].Search(); ok {
			desc = s.Description
		}
		fmt.Fprintf(tw, "  %s\t%s\n", p.Configurations[i].Name, desc)
	}
	_ = tw.Flush()
	return n, most
}

// maxSteps is the most windows any configuration's search measures.
func (p *Plan) maxSteps() int {
	m := 1
	for i := range p.Configurations {
		if s, ok := p.Configurations[i].Search(); ok {
			m = max(m, s.MaxSteps)
		}
	}
	return m
}

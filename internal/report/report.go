// Package report turns the raw run records of a results directory into what
// people read: per configuration and operation the JMeter-style aggregate
// (samples, mean, median, p90, p99, min, max, error %, throughput, KB/s),
// every configuration against the baseline with ratios, intervals and
// verdicts, what the observers saw, and warnings with advice. It is always
// recomputed from results.jsonl, so a new report needs no re-run.
//
// Build computes a Report from records (pure); Load reads a directory;
// Render writes one of the formats: table, md, json, csv, html.
package report

import (
	"ctrperf/internal/plan"
	"ctrperf/internal/results"
	"ctrperf/internal/stats"
)

// Report is everything the renderers show. Its JSON form is the `json`
// format.
type Report struct {
	Plan     string `json:"plan"`
	Workload string `json:"workload,omitempty"`
	Baseline string `json:"baseline"`
	// Resamples and Level describe the bootstrap behind every interval.
	Resamples int     `json:"resamples"`
	Level     float64 `json:"level"`
	// Headline is what the report answers first, in words: one line per
	// configuration, naming only differences whose interval excludes 1.
	Headline []string `json:"headline"`
	// Env is where the results were measured (OUT/env.json and the
	// records' engines); nil when nothing is known.
	Env      *Environment    `json:"env,omitempty"`
	Configs  []*ConfigResult `json:"configs"`
	Warnings []Warning       `json:"warnings"`
	// Thresholds are the plan's gates, checked (Load reads them from
	// OUT/plan.yaml).
	Thresholds []GateResult `json:"thresholds,omitempty"`

	gateErr error // what checking the plan's thresholds found (Gate)
	// Declared are the metrics the workload described itself (which way is
	// better, the unit), as its records declared them: the command
	// workload's figure and wall times. The rest go by SenseOf their name.
	Declared map[string]results.MetricInfo `json:"declared,omitempty"`
}

// sense is which way metric is better: as declared, else by its name.
func (r *Report) sense(metric string) stats.Sense {
	return stats.SenseFor(metric, r.Declared[metric].Better)
}

// Gate is the outcome of the plan's thresholds as Load checked them: nil
// when none is broken (or the plan has none), a *ThresholdError when one
// is, another error when a rule could not be checked at all.
func (r *Report) Gate() error { return r.gateErr }

// ConfigResult is one configuration's results: its runs, metrics,
// comparison with the baseline and per-operation metrics. (The
// configuration itself, its knobs, is a plan.Configuration.)
type ConfigResult struct {
	Name string `json:"name"`
	// Runs is the number of successful repetitions the statistics use;
	// Failed and NotRun count the others.
	Runs   int            `json:"runs"`
	Failed int            `json:"failed"`
	NotRun int            `json:"not_run"`
	Errors []string       `json:"errors,omitempty"` // distinct errors of failed / not-run runs
	Knobs  map[string]any `json:"knobs,omitempty"`
	// Metrics at the configuration level (all operations together).
	Metrics map[string]stats.Estimate `json:"metrics"`
	// VsBaseline is the ratio config/baseline per metric; absent for the
	// baseline itself.
	VsBaseline map[string]stats.Comparison `json:"vs_baseline,omitempty"`
	// Operations holds the same metrics per operation.
	Operations map[string]map[string]stats.Estimate `json:"operations,omitempty"`
	// OpVsBaseline is, per operation both have, the ratio to the
	// baseline's same operation (latency and throughput).
	OpVsBaseline map[string]map[string]stats.Comparison `json:"op_vs_baseline,omitempty"`
	// System is the observers' summary over all successful runs.
	System []SystemFigure `json:"system,omitempty"`
	// Capacity is what its capacity searches found, when its load searched
	// (load.search); the capacity is Metrics["capacity_per_s"].
	Capacity *Capacity `json:"capacity,omitempty"`
	// Emulated: its runs were on an emulated CPU (runtime vm, accel tcg):
	// shown apart (EmulatedNote), never compared with the baseline.
	Emulated bool `json:"emulated,omitempty"`
	// ContainerInVM: its services ran as containers of a Docker engine
	// inside a VM guest (runtime vm with vm.docker, seed 003's fourth
	// row); its rows are labelled so (Label).
	ContainerInVM bool `json:"container_in_vm,omitempty"`

	reps     map[string][]float64            // bootstrap replicates per metric
	opReps   map[string]map[string][]float64 // per operation
	pooled   *stats.Pooled                   // all operations, all runs
	opPooled map[string]*stats.Pooled
	// representative is the successful run whose throughput is closest to
	// the median: its timelines stand for the configuration in plots.
	representative *results.RunRecord
	// perRun holds each successful repetition's own value per metric (p50
	// and p99 read from its own histogram), for strip plots; okRuns are
	// those repetitions.
	perRun map[string][]float64
	okRuns []*results.RunRecord
}

// Label is the configuration's name as its rows show it: with "(container
// in VM)" for a guest with Docker inside, which a name alone may not say.
func (c *ConfigResult) Label() string {
	if c.ContainerInVM {
		return c.Name + " (" + plan.ContainerInVMNote + ")"
	}
	return c.Name
}

// EmulatedNote is what every report says of an emulated configuration.
const EmulatedNote = "emulated CPU: not a performance comparison"

// OK reports whether the configuration has numbers at all.
func (c *ConfigResult) OK() bool { return c.Runs > 0 }

// OperationNames returns the operation names in a stable order.
func (c *ConfigResult) OperationNames() []string { return sortedKeys(c.Operations) }

// Warning is something the reader must know before trusting a number, with
// concrete advice. Config is empty for warnings about the whole report.
type Warning struct {
	Config  string `json:"config,omitempty"`
	Message string `json:"message"`
	Advice  string `json:"advice,omitempty"`
}

// SystemFigure is the mean and maximum of one observed figure over all the
// samples of all successful runs of a configuration, e.g. disk vda w/s.
type SystemFigure struct {
	Group   string  `json:"group"`   // cpu, disk, container, process
	Subject string  `json:"subject"` // all, cpu0, vda, a container or process group name
	Figure  string  `json:"figure"`  // user, system, iowait, softirq, w/s, wkB/s, w_await, util, cpu
	Unit    string  `json:"unit"`    // %, /s, kB/s, ms
	Mean    float64 `json:"mean"`
	Max     float64 `json:"max"`
}

// Config returns the results of the configuration called name, or nil.
func (r *Report) Config(name string) *ConfigResult {
	for _, c := range r.Configs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

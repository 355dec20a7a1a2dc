package isolate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics. Per managed container
// (labels container, name): usage and entitlement in CPUs, hot and demoted
// (0 or 1), the CPUs of its cpuset (0 = its own, untouched) and its stall
// (the fraction of the last interval its tasks waited for a CPU, from
// cgroup cpu.pressure). For the loop: decisions and failed writes by kind,
// the duration of a step, the CPU time the steps used and the reaction
// time (a container's saturation to the first change applied to it).
type Metrics struct {
	usage, entitlement, hot, demoted, cpus, stall *prometheus.GaugeVec
	decisions                                     *prometheus.CounterVec
	writeFailures                                 *prometheus.CounterVec
	loopSeconds                                   prometheus.Histogram
	stepCPU                                       prometheus.Counter
	reaction                                      prometheus.Histogram
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ctrperf_isolate_container_" + name, Help: help}, []string{"container", "name"})
	}
	m := &Metrics{
		usage:       gauge("usage_cpus", "CPU the container used over the last interval, in CPUs."),
		entitlement: gauge("entitlement_cpus", "CPU the container may use before it counts as saturated: its label, else online CPUs / managed containers."),
		hot:         gauge("hot", "1 when the container is hot, 0 when normal."),
		demoted:     gauge("demoted", "1 when the container is demoted (cpu.idle=1, else the lowest weight)."),
		cpus:        gauge("cpus", "CPUs in the cpuset the controller gave the container; 0 when it keeps its own."),
		stall:       gauge("stall_ratio", "Fraction of the last interval the container's tasks waited for a CPU (cgroup cpu.pressure some)."),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrperf_isolate_decisions_total",
			Help: "Decisions applied, by kind (cpuset, demote, undemote, drift, hot, normal, irq, rps, refused, restore)."}, []string{"kind"}),
		writeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrperf_isolate_write_failures_total",
			Help: "Writes that failed or were refused, by kind (cpuset, class, irq, rps)."}, []string{"kind"}),
		loopSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctrperf_isolate_loop_duration_seconds",
			Help: "Time one control step took.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		stepCPU: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctrperf_isolate_step_cpu_seconds_total",
			Help: "CPU time (user + system) the control steps used."}),
		reaction: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctrperf_isolate_reaction_seconds",
			Help:    "From the start of the interval in which a container began the saturated streak that made it hot to the first change applied to it as a hot container (cpuset or demotion); none in a dry run.",
			Buckets: prometheus.ExponentialBuckets(0.025, 2, 10)}),
	}
	reg.MustRegister(m.usage, m.entitlement, m.hot, m.demoted, m.cpus, m.stall, m.decisions, m.writeFailures, m.loopSeconds, m.stepCPU, m.reaction)
	return m
}

// The methods below take a nil *Metrics as "no metrics".

func (m *Metrics) event(e Event) {
	if m != nil && e.Kind != "error" {
		m.decisions.WithLabelValues(e.Kind).Inc()
	}
}

func (m *Metrics) writeFailure(kind string) {
	if m != nil {
		m.writeFailures.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) step(took, cpu time.Duration) {
	if m != nil {
		m.loopSeconds.Observe(took.Seconds())
		m.stepCPU.Add(cpu.Seconds())
	}
}

func (m *Metrics) reacted(d time.Duration) {
	if m != nil {
		m.reaction.Observe(d.Seconds())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) placement(id string, pl Placement, usage, stall float64) {
	if m == nil {
		return
	}
	m.usage.WithLabelValues(id, pl.Name).Set(usage)
	m.entitlement.WithLabelValues(id, pl.Name).Set(pl.Entitlement)
	m.hot.WithLabelValues(id, pl.Name).Set(b2f(pl.Hot))
	m.demoted.WithLabelValues(id, pl.Name).Set(b2f(pl.Demote))
	m.cpus.WithLabelValues(id, pl.Name).Set(float64(pl.CPUs.Size()))
	m.stall.WithLabelValues(id, pl.Name).Set(stall)
}

func (m *Metrics) forget(id string) {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.usage, m.entitlement, m.hot, m.demoted, m.cpus, m.stall} {
		g.DeletePartialMatch(prometheus.Labels{"container": id})
	}
}

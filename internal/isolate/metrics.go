package isolate

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	cpus          *prometheus.GaugeVec
	hot           *prometheus.GaugeVec
	decisions     *prometheus.CounterVec
	writeFailures *prometheus.CounterVec
	loopSeconds   prometheus.Histogram
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		cpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ctrperf_isolate_container_cpus",
			Help: "Number of CPUs in the container's current cpuset."}, []string{"container", "name"}),
		hot: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ctrperf_isolate_container_hot",
			Help: "1 when the container is hot, 0 when normal."}, []string{"container", "name"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrperf_isolate_decisions_total",
			Help: "Decisions applied, by kind (cpuset, hot, normal, irq, rps, restore)."}, []string{"kind"}),
		writeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctrperf_isolate_write_failures_total",
			Help: "Writes that failed or were refused, by kind (cpuset, irq, rps)."}, []string{"kind"}),
		loopSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctrperf_isolate_loop_duration_seconds",
			Help: "Time one control step took.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	reg.MustRegister(m.cpus, m.hot, m.decisions, m.writeFailures, m.loopSeconds)
	return m
}

func (m *Metrics) event(e Event) {
	if e.Kind != "error" {
		m.decisions.WithLabelValues(e.Kind).Inc()
	}
}

func (m *Metrics) placement(id string, pl Placement) {
	m.cpus.WithLabelValues(id, pl.Name).Set(float64(pl.CPUs.Size()))
	hot := 0.0
	if pl.Hot {
		hot = 1
	}
	m.hot.WithLabelValues(id, pl.Name).Set(hot)
}

func (m *Metrics) forget(id string) {
	m.cpus.DeletePartialMatch(prometheus.Labels{"container": id})
	m.hot.DeletePartialMatch(prometheus.Labels{"container": id})
}

package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are ticketd's Prometheus series, on a registry of its own so tests
// can build many servers in one process.
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	queueWait     prometheus.Histogram
	queueRejected *prometheus.CounterVec
	db            *prometheus.HistogramVec
}

func newMetrics(g *gate, p *pool) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ticketd_requests_total", Help: "Requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ticketd_request_duration_seconds", Help: "Time from arrival to response, including the queue.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"route"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ticketd_queue_wait_seconds", Help: "Time requests waited for a client slot (max-clients).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}),
		queueRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ticketd_queue_rejected_total", Help: "Requests refused by the gate, by reason (timeout, full).",
		}, []string{"reason"}),
		db: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ticketd_db_query_duration_seconds", Help: "Database call latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.queueWait, m.queueRejected, m.db,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ticketd_requests_in_flight", Help: "Requests holding a client slot.",
		}, func() float64 { return float64(g.busy()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ticketd_queue_length", Help: "Requests waiting for a client slot.",
		}, func() float64 { return float64(g.queued()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ticketd_workers_busy", Help: "Workers of the pool doing application work.",
		}, func() float64 { return float64(p.busy()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) observeDB(op string, d time.Duration) {
	m.db.WithLabelValues(op).Observe(d.Seconds())
}

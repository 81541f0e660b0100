// Package metrics exports what a qshare server knows in the Prometheus text
// format, at GET /metrics, and answers the health probes GET /healthz and
// GET /readyz (health.go).
//
// It sits beside the API in the server's flow: package server creates a
// Metrics, gives it to the daemon as its daemon.Observer and to the API
// handler as its api.Observer, then calls Watch with the daemon and mounts
// Handler on the same mux, behind the same request guard, as the API.
//
// Two kinds of figure come out of it. Counters and histograms (passes,
// commits, starts, waits, preemptions, requests) are observed as they
// happen, on the daemon's and the API's own goroutines, at the cost of a
// clock read and an atomic add. Gauges (capacity, use, lending, jobs by
// status, why jobs wait) are computed at scrape time from one
// daemon.MetricsState: the engine's own lending attribution and per-share
// counts the daemon keeps as jobs change, never a walk over the jobs.
// docs/metrics.md lists every family; a test keeps the two equal.
package metrics

import (
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"qshare/api"
	"qshare/daemon"
)

// Path is where the server serves Handler.
const Path = "/metrics"

// Metrics holds the server's metrics registry. Create one with New; its
// methods are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	pass    prometheus.Histogram
	commit  *prometheus.HistogramVec
	start   *prometheus.HistogramVec
	ended   *prometheus.CounterVec
	wait    *prometheus.HistogramVec
	preempt *prometheus.CounterVec
	request *prometheus.HistogramVec
	trained trained
}

var _ daemon.Observer = (*Metrics)(nil)

// Outcomes of a store commit or an executor start.
const (
	outcomeSuccess = "success"
	outcomeError   = "error"
)

// New returns a Metrics whose registry holds the Go runtime and process
// collectors and the qshare counters and histograms. The gauges of a
// daemon's state join it with Watch.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.pass = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "qshare_scheduling_pass_seconds",
		Help:    "Time one scheduling pass of the engine took (the control loop's AppendSchedule).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 9),
	})
	m.commit = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "qshare_store_commit_seconds",
		Help:    "Time one store commit took (the control loop's batches and submits), by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 11),
	}, []string{"outcome"})
	m.start = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "qshare_executor_start_seconds",
		Help:    "Time the executor took to start one attempt, by executor (its name in qshare serve --executors, else default) and outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"executor", "outcome"})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qshare_attempts_ended_total",
		Help: "Attempts that ended, by executor (its name in qshare serve --executors, else default) and outcome (succeeded, failed, stopped, lost).",
	}, []string{"executor", "outcome"})
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "qshare_job_wait_seconds",
		Help: "Time from a job's submission to its first start decision, per queue and quota share.",
		// Few buckets: there is a series of each per share.
		Buckets: []float64{1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
	}, []string{"queue", "share"})
	m.preempt = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qshare_preemptions_total",
		Help: "Preemptions decided, by kind (cross-share, in-share, limit-change), queue, and the preempting and preempted quota shares.",
	}, []string{"queue", "kind", "preempting_share", "preempted_share"})
	m.request = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "qshare_api_request_seconds",
		Help:    "Time the AWS Batch API took to answer one request, by operation and outcome (success or the AWS error type).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10),
	}, []string{"operation", "outcome"})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.pass, m.commit, m.start, m.ended, m.wait, m.preempt, m.request,
	)
	return m
}

// Watch adds the gauges of d's state to the registry; call it once, after
// daemon.New. They are computed at each scrape from d.MetricsState.
func (m *Metrics) Watch(d *daemon.Daemon) {
	m.reg.MustRegister(&stateCollector{d: d})
}

// Handler serves the registry in the Prometheus text format (or, when the
// scraper asks, OpenMetrics), gzipped at gzip.BestSpeed to a scraper that
// accepts gzip. A failure to collect is answered as a 500.
func (m *Metrics) Handler() http.Handler {
	return gzipped(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{DisableCompression: true}))
}

// Registry returns the registry, for tests and benchmarks that gather it
// without HTTP.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// API returns the api.Observer that records qshare_api_request_seconds.
func (m *Metrics) API() api.Observer {
	return func(operation, outcome string, elapsed time.Duration) {
		m.request.WithLabelValues(operation, outcome).Observe(elapsed.Seconds())
	}
}

func outcome(err error) string {
	if err != nil {
		return outcomeError
	}
	return outcomeSuccess
}

// SchedulingPass implements daemon.Observer.
func (m *Metrics) SchedulingPass(elapsed time.Duration) { m.pass.Observe(elapsed.Seconds()) }

// StoreCommit implements daemon.Observer.
func (m *Metrics) StoreCommit(elapsed time.Duration, err error) {
	m.commit.WithLabelValues(outcome(err)).Observe(elapsed.Seconds())
}

// ExecutorStart implements daemon.Observer.
func (m *Metrics) ExecutorStart(executor string, elapsed time.Duration, err error) {
	m.start.WithLabelValues(executor, outcome(err)).Observe(elapsed.Seconds())
}

// AttemptEnded implements daemon.Observer.
func (m *Metrics) AttemptEnded(executor string, o daemon.AttemptOutcome) {
	m.ended.WithLabelValues(executor, string(o)).Inc()
}

// JobStarted implements daemon.Observer.
func (m *Metrics) JobStarted(queue, share string, wait time.Duration) {
	m.wait.WithLabelValues(queue, share).Observe(math.Max(0, wait.Seconds()))
}

// Preempted implements daemon.Observer.
func (m *Metrics) Preempted(p daemon.Preemption) {
	m.preempt.WithLabelValues(p.Queue, string(p.Kind), p.By, p.Share).Inc()
}

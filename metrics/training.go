package metrics

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"qshare/daemon"
	"qshare/trainingjob"
)

// Bounds of qshare_training_metric: the final values of at most
// maxTrainedAttempts ended attempts are kept (the oldest is dropped), and at
// most maxWaitingReads ended attempts wait for their log to be read (an
// attempt that ends while that many wait is left out).
const (
	maxTrainedAttempts = 200
	maxWaitingReads    = 64
	readTimeout        = 30 * time.Second
)

var descTrainingMetric = prometheus.NewDesc("qshare_training_metric",
	"The final value of a metric of an ended training job (one attempt), as DescribeTrainingJob's FinalMetricDataList gives it: the last match in the attempt's log of the payload's AlgorithmSpecification.MetricDefinitions. Only the last 200 ended attempts whose payload defines metrics, since the server started.",
	[]string{"queue", "share", "training_job", "metric"}, nil)

// MetricValue is one final value of a training job's metric.
type MetricValue struct {
	Name  string
	Value float64
}

// FinalMetricsFunc computes the final metric values of an ended attempt
// (the SageMaker endpoint's FinalMetrics, over the executor's logs).
type FinalMetricsFunc func(ctx context.Context, e daemon.AttemptEnd) []MetricValue

// trained is the final metrics of ended attempts, for
// qshare_training_metric: filled off the daemon's goroutines as attempts
// end, read at scrape.
type trained struct {
	mu      sync.Mutex
	final   FinalMetricsFunc
	waiting []daemon.AttemptEnd
	reading bool
	order   []string // training job names, oldest first
	values  map[string]trainedAttempt
}

type trainedAttempt struct {
	queue, share string
	values       []MetricValue
}

// TrainingMetrics makes the final metric values of each attempt that ends
// from now on, computed by f, a sample of qshare_training_metric. Call it
// once, before the daemon starts attempts.
func (m *Metrics) TrainingMetrics(f FinalMetricsFunc) {
	m.trained.mu.Lock()
	defer m.trained.mu.Unlock()
	m.trained.final = f
	if m.trained.values == nil {
		m.trained.values = map[string]trainedAttempt{}
		m.reg.MustRegister(&m.trained)
	}
}

// AttemptCommitted implements daemon.Observer: an attempt whose payload defines
// metrics waits for its log to be read, by one goroutine that runs while
// any wait, so the daemon never waits on a log.
func (m *Metrics) AttemptCommitted(e daemon.AttemptEnd) {
	t := &m.trained
	if !strings.Contains(e.Payload, "MetricDefinitions") || e.Attempt.StartedAt.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.final == nil || len(t.waiting) >= maxWaitingReads {
		return
	}
	t.waiting = append(t.waiting, e)
	if !t.reading {
		t.reading = true
		go t.read()
	}
}

func (t *trained) read() {
	for {
		t.mu.Lock()
		if len(t.waiting) == 0 {
			t.reading = false
			t.mu.Unlock()
			return
		}
		e, f := t.waiting[0], t.final
		t.waiting = t.waiting[1:]
		t.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		vs := f(ctx, e)
		cancel()
		vs = lastByName(vs)
		if len(vs) > 0 {
			t.add(trainingjob.NameOfARN(e.Attempt.ResourceARN), trainedAttempt{e.Queue, e.Share, vs})
		}
	}
}

func (t *trained) add(name string, a trainedAttempt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.values[name]; !ok {
		t.order = append(t.order, name)
	}
	t.values[name] = a
	for len(t.order) > maxTrainedAttempts {
		delete(t.values, t.order[0])
		t.order = t.order[1:]
	}
}

// Describe implements prometheus.Collector.
func (t *trained) Describe(ch chan<- *prometheus.Desc) { ch <- descTrainingMetric }

// Collect implements prometheus.Collector.
func (t *trained) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range t.order {
		a := t.values[name]
		for _, v := range a.values {
			ch <- prometheus.MustNewConstMetric(descTrainingMetric, prometheus.GaugeValue, v.Value, a.queue, a.share, name, v.Name)
		}
	}
}

// lastByName keeps, of values with one name, the last: two definitions of
// one name would be two samples of one series, which a scrape refuses.
func lastByName(vs []MetricValue) []MetricValue {
	at := map[string]int{}
	var out []MetricValue
	for _, v := range vs {
		if i, ok := at[v.Name]; ok {
			out[i] = v
			continue
		}
		at[v.Name] = len(out)
		out = append(out, v)
	}
	return out
}

package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/metrics"
)

// ended is the end of attempt n of a job whose payload defines metrics.
func ended(n int, payload string) daemon.AttemptEnd {
	return daemon.AttemptEnd{JobID: fmt.Sprint("job", n), JobName: "train", Queue: "q", Share: "QS1", Payload: payload,
		Attempt: qshare.Attempt{ID: fmt.Sprint("a", n), StartedAt: time.Unix(100, 0), StoppedAt: time.Unix(200, 0),
			ResourceARN: fmt.Sprintf("arn:aws:sagemaker:us-east-1:000000000000:training-job/tj-%d", n)}}
}

// trainingSamples gathers qshare_training_metric: training job/metric -> value.
func trainingSamples(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "qshare_training_metric" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["queue"] != "q" || l["share"] != "QS1" {
				t.Errorf("labels %v, want queue q and share QS1", l)
			}
			out[l["training_job"]+"/"+l["metric"]] = s.GetGauge().GetValue()
		}
	}
	return out
}

// TestTrainingMetric scrapes qshare_training_metric: each ended attempt
// whose payload defines metrics gets the final values that its
// FinalMetricsFunc computes (the SageMaker endpoint's, in a server), read
// off the daemon's goroutine; an attempt without MetricDefinitions costs
// no read; two values of one name keep the last; only the last 200
// attempts are kept.
func TestTrainingMetric(t *testing.T) {
	m := metrics.New()
	reads := make(chan string, 300)
	m.TrainingMetrics(func(ctx context.Context, e daemon.AttemptEnd) []metrics.MetricValue {
		reads <- e.Attempt.ID
		return []metrics.MetricValue{{Name: "loss", Value: 1}, {Name: "acc", Value: 0.5}, {Name: "loss", Value: 0.25}}
	})
	with := `{"AlgorithmSpecification":{"MetricDefinitions":[{"Name":"loss","Regex":"loss=(.*)"}]}}`
	m.AttemptCommitted(ended(0, `{"AlgorithmSpecification":{}}`))
	m.AttemptCommitted(ended(1, with))
	deadline := time.Now().Add(time.Minute)
	for {
		got := trainingSamples(t, m)
		if got["tj-1/loss"] == 0.25 && got["tj-1/acc"] == 0.5 && len(got) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("qshare_training_metric = %v, want tj-1's loss 0.25 (the last of its name) and acc 0.5 only", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id := <-reads; id != "a1" || len(reads) != 0 {
		t.Errorf("read the logs of %s and %d more, want only a1 (a0 defines no metrics)", id, len(reads))
	}

	// The bound: of 260 more, the last 200 attempts are kept.
	for i := 2; i < 262; i++ {
		m.AttemptCommitted(ended(i, with))
		if i%50 == 0 { // the queue of waiting reads is bounded too: let it drain
			for len(reads) < i-1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	for {
		got := trainingSamples(t, m)
		if _, last := got["tj-261/loss"]; last && len(got) == 400 {
			if _, old := got["tj-61/loss"]; old {
				t.Errorf("tj-61 is still kept with tj-261: more than 200 attempts")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("qshare_training_metric holds %d samples, want the 200 newest attempts' 400", len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

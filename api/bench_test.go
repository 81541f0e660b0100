package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/internal/bench/stat"
)

// benchClient is an SDK client whose transport keeps a connection per
// concurrent caller, as a long-running client process would.
func benchClient(url string, conns int) *batch.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns*2, conns*2
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		HTTPClient: &http.Client{Transport: tr}}
	return batch.NewFromConfig(cfg, func(o *batch.Options) { o.BaseEndpoint = aws.String(url) })
}

// BenchmarkSubmitServiceJob measures acknowledged, durable submits over HTTP
// from 64 concurrent SDK clients. Jobs queue behind a small environment, as
// a busy queue does. Reported: submits/s and p50/p99 latency.
func BenchmarkSubmitServiceJob(b *testing.B) {
	const clients = 64
	s := newBenchServer(b, clients, 8)
	p := payload(g5, 1, time.Hour, 0)
	el := submitConcurrently(b, clients, func() error {
		_, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"),
			QuotaShareName: aws.String("A"), ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(p)})
		return err
	})
	st := s.db.Stats()
	b.ReportMetric(float64(st.Commits)/float64(max(1, st.Batches)), "commits/batch")
	b.ReportMetric(el.Seconds()*1000/float64(max(1, st.Batches)), "ms/batch")
}

// BenchmarkSubmitServiceJobRawHTTP is BenchmarkSubmitServiceJob with 64
// plain HTTP clients posting a prepared body: the same server work without
// the SDK's signing and middleware, which share the machine's cores with the
// server in the SDK variant.
func BenchmarkSubmitServiceJobRawHTTP(b *testing.B) {
	const clients = 64
	s := newBenchServer(b, clients, 8)
	post := rawSubmit(s, clients, time.Hour)
	submitConcurrently(b, clients, func() error {
		resp, err := post()
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// submitConcurrently times b.N calls of submit, shared out among n
// goroutines, and reports submits/s, CPU per submit and p50/p99 latency. It
// returns the wall time of the calls. The CPU is the whole process's
// (server and clients): unlike submits/s, it hardly depends on what else
// the machine is doing.
func submitConcurrently(b *testing.B, n int, submit func() error) time.Duration {
	lat := make([][]time.Duration, n)
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	shareOut(b, n, func(w int) error {
		t0 := time.Now()
		if err := submit(); err != nil {
			return err
		}
		lat[w] = append(lat[w], time.Since(t0))
		return nil
	})
	el := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "submits/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/submit")
	reportLatency(b, all)
	return el
}

// shareOut makes b.N calls of call, shared out among n goroutines, and
// waits for them. call is given its goroutine's number (0 to n-1); an
// error it returns is the benchmark's, and ends that goroutine's calls.
func shareOut(b *testing.B, n int, call func(w int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := call(w); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// reportLatency reports the median and the 99th percentile of lat in ms,
// as qshare bench computes them.
func reportLatency(b *testing.B, lat []time.Duration) {
	l := stat.Latencies(lat)
	b.ReportMetric(l.P50, "p50-ms")
	b.ReportMetric(l.P99, "p99-ms")
}

// BenchmarkSubmitToScheduled measures, with capacity free, the time from
// sending a submit to the job being durably SCHEDULED (the daemon installs
// the SCHEDULED record in memory right after its commit).
func BenchmarkSubmitToScheduled(b *testing.B) {
	s := newBenchServer(b, 1, 1_000_000)
	p := payload(g5, 1, time.Hour, 0)
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		out, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"),
			QuotaShareName: aws.String("A"), ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(p)})
		if err != nil {
			b.Fatal(err)
		}
		for {
			j, err := s.d.Job(*out.JobId)
			if err != nil {
				b.Fatal(err)
			}
			if j.Status != qshare.JobRunnable {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// newBenchServer is newServer for benchmarks: its client has a connection
// for each of clients, and its one queue q one share A that owns the whole
// environment of capacity instances.
func newBenchServer(b *testing.B, clients int, capacity int32) *server {
	s := newServer(b)
	s.c = benchClient(s.url, clients)
	s.setup2("q", capacity)
	return s
}

// setup2 is setup for benchmarks: one share A owning the whole environment.
func (s *server) setup2(queue string, capacity int32) {
	b, c := s.t, s.c
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	if err != nil {
		b.Fatal(err)
	}
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(capacity)}}})
	if err != nil {
		b.Fatal(err)
	}
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String(queue), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	if err != nil {
		b.Fatal(err)
	}
	_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("A"), JobQueue: aws.String(queue),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(capacity)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkJobLifecycle measures the server's work for a whole job, as in
// the kueue-large-scale benchmark: 64 plain HTTP clients submit b.N jobs of
// 1 ms into free capacity, and the benchmark waits until every one has
// SUCCEEDED. Each job is committed five times (RUNNABLE by its submit;
// SCHEDULED, STARTING, RUNNING and SUCCEEDED by the control loop).
// cpu-µs/job is the whole process's CPU from the first submit to the last
// SUCCEEDED, so it includes the (cheap) clients.
func BenchmarkJobLifecycle(b *testing.B) {
	const clients = 64
	s := newBenchServer(b, clients, 1_000_000)
	post := rawSubmit(s, clients, time.Millisecond)
	ids := make([][]string, clients)
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	shareOut(b, clients, func(w int) error {
		resp, err := post()
		if err != nil {
			return err
		}
		var out struct{ JobID string }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("status %d, %v", resp.StatusCode, err)
		}
		ids[w] = append(ids[w], out.JobID)
		return nil
	})
	for _, l := range ids {
		for _, id := range l {
			for {
				j, err := s.d.Job(id)
				if err != nil {
					b.Fatal(err)
				}
				if j.Status.Terminal() {
					if j.Status != qshare.JobSucceeded {
						b.Fatalf("job %s is %s: %s", id, j.Status, j.StatusReason)
					}
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	el := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	st := s.db.Stats()
	b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(st.Commits)/float64(max(1, st.Batches)), "commits/batch")
	b.ReportMetric(float64(st.Batches)/float64(b.N), "batches/job")
}

// rawSubmit returns a post of a plain HTTP SubmitServiceJob to s, of one
// ml.g5.xlarge to share A of queue q whose simulated run lasts d; its
// client has a connection for each of clients.
func rawSubmit(s *server, clients int, d time.Duration) func() (*http.Response, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = clients*2, clients*2
	body, _ := json.Marshal(map[string]any{"jobName": "j", "jobQueue": "q", "quotaShareName": "A",
		"serviceJobType": "SAGEMAKER_TRAINING", "serviceRequestPayload": payload(g5, 1, d, 0)})
	hc := &http.Client{Transport: tr}
	return func() (*http.Response, error) {
		return hc.Post(s.url+"/v1/submitservicejob", "application/json", bytes.NewReader(body))
	}
}

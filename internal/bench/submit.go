package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
)

// SubmitOptions configure the submit benchmark.
type SubmitOptions struct {
	// Endpoint is an existing server; when empty a temporary one is
	// started with Server.
	Endpoint string
	Server   ServerOptions
	// Sign signs each request (ClientOptions.Sign).
	Sign bool
	// Clients submit in a closed loop for Duration after a Warmup whose
	// submits are not counted.
	Clients  int
	Duration time.Duration
	Warmup   time.Duration
	// LatencyJobs is the number of jobs submitted one at a time into free
	// capacity to measure the time from submit to SCHEDULED; 0 skips it.
	LatencyJobs int
}

// SubmitResult is what `qshare bench submit` reports for one run.
type SubmitResult struct {
	Clients   int     `json:"clients"`
	DurationS float64 `json:"duration_s"`
	// Submits counts the acknowledged (durable) submits in the measured
	// window; Errors the failed ones.
	Submits     int     `json:"submits"`
	Errors      int     `json:"errors"`
	SubmitsPerS float64 `json:"submits_per_s"`
	// Latency is of one SubmitServiceJob call, as the client sees it.
	Latency
	// ScheduleP50Ms and ScheduleP99Ms are the server's time from a job's
	// createdAt to its scheduledAt when capacity is free (millisecond
	// timestamps, so ±1 ms).
	// Both are absent when no latency jobs were run.
	ScheduleP50Ms *float64 `json:"schedule_p50_ms,omitempty"`
	ScheduleP99Ms *float64 `json:"schedule_p99_ms,omitempty"`
	// ServerCPUUsPerSubmit is the server's CPU time (user and system) over
	// the measured window per durable submit, and HarnessCPUUsPerSubmit
	// the harness's own (its clients' signing included): what a submit
	// costs each side, which the machine's load moves far less than the
	// submits per second. Both are absent unless the harness started the
	// server as a child process.
	ServerCPUUsPerSubmit  *float64 `json:"server_cpu_us_per_submit,omitempty"`
	HarnessCPUUsPerSubmit *float64 `json:"harness_cpu_us_per_submit,omitempty"`
}

var submitRows = []Row{
	{Label: "clients", Key: "clients", Format: "%.0f"},
	{Label: "durable submits/s", Key: "submits_per_s", Format: "%.0f", Anchor: "target ≥ 5,000"},
	{Label: "submit latency p50", Key: "p50_ms", Format: "%.2f", Unit: "ms"},
	{Label: "submit latency p90", Key: "p90_ms", Format: "%.2f", Unit: "ms"},
	{Label: "submit latency p99", Key: "p99_ms", Format: "%.2f", Unit: "ms", Anchor: "target < 20 ms"},
	{Label: "submit latency max", Key: "max_ms", Format: "%.2f", Unit: "ms"},
	{Label: "failed submits", Key: "errors", Format: "%.0f"},
	{Label: "server CPU per submit", Key: "server_cpu_us_per_submit", Format: "%.1f", Unit: "µs"},
	{Label: "harness CPU per submit", Key: "harness_cpu_us_per_submit", Format: "%.1f", Unit: "µs"},
	{Label: "submit → SCHEDULED p50 (free capacity)", Key: "schedule_p50_ms", Format: "%.0f", Unit: "ms", Anchor: "target < 5 ms"},
	{Label: "submit → SCHEDULED p99 (free capacity)", Key: "schedule_p99_ms", Format: "%.0f", Unit: "ms"},
}

// SubmitRows returns the rows of the submit benchmark's table.
func SubmitRows() []Row { return submitRows }

const (
	submitType   = "ml.m5.large"
	hourDuration = "1h"
)

// submitConfig has two queues. "submit" has one instance of capacity, so
// that nearly every job submitted to it waits: the benchmark measures the
// submit path (validation, the durable write, the engine's insertion), not
// the executor. "latency" has room for every job sent to it.
func submitConfig(latencyJobs int) *config.File {
	one, room := int64(1), int64(latencyJobs+1)
	prio := int64(1)
	share := func(n int64) []config.Share {
		return []config.Share{{Name: "s0", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: submitType, MaxCapacity: n}}, Strategy: qshare.StrategyReserve}}
	}
	return &config.File{
		ServiceEnvironments: []config.Environment{
			{Name: "submit-env", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: submitType, MaxCapacity: one}}},
			{Name: "latency-env", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: submitType, MaxCapacity: room}}},
		},
		SchedulingPolicies: []config.Policy{{Name: "bench-policy", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}},
		JobQueues: []config.Queue{
			{Name: "submit", Priority: &prio, SchedulingPolicy: "bench-policy", ServiceEnvironment: "submit-env", QuotaShares: share(one)},
			{Name: "latency", Priority: &prio, SchedulingPolicy: "bench-policy", ServiceEnvironment: "latency-env", QuotaShares: share(room)},
		},
	}
}

// withServer runs f against opt's endpoint, or against a temporary server
// that it stops afterwards, with a client made with co (signed with the
// temporary server's Key, when it has one) through which cfg has been
// applied; queues are applyConfig's names of cfg's queues. prefix is "" for
// a fresh server and a unique run prefix for a shared one; srv is nil for
// the server at endpoint.
func withServer(ctx context.Context, endpoint string, so ServerOptions, co ClientOptions, cfg *config.File,
	f func(c *batch.Client, queues map[string]string, prefix string, srv *Server) error) error {
	run := func(endpoint, prefix string, srv *Server) error {
		if srv != nil {
			co.Key = srv.Key
		}
		c := NewClient(endpoint, co)
		queues, err := applyConfig(ctx, c, cfg, prefix)
		if err != nil {
			return err
		}
		return f(c, queues, prefix, srv)
	}
	if endpoint != "" {
		err := run(endpoint, fmt.Sprintf("b%d-", time.Now().UnixNano()%1e9), nil)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w\nnothing listens at %s: start a qshare serve there, or leave out --endpoint and the benchmark starts its own", err, endpoint)
		}
		return err
	}
	srv, err := StartServer(ctx, so)
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := run(srv.Endpoint, "", srv); err != nil {
		if gone := srv.Alive(); gone != nil {
			return fmt.Errorf("%w (%v)", err, gone)
		}
		return err
	}
	return nil
}

// RunSubmit measures SubmitServiceJob from opt.Clients concurrent clients.
func RunSubmit(ctx context.Context, opt SubmitOptions) (SubmitResult, error) {
	if opt.Clients < 1 || opt.Duration <= 0 {
		return SubmitResult{}, fmt.Errorf("bench submit: need at least one client and a positive duration")
	}
	if opt.Server.Executor == "" {
		opt.Server.Executor = "simulated"
	}
	var res SubmitResult
	err := withServer(ctx, opt.Endpoint, opt.Server, ClientOptions{Conns: opt.Clients, Sign: opt.Sign}, submitConfig(opt.LatencyJobs), func(c *batch.Client, queues map[string]string, _ string, srv *Server) error {
		var err error
		res, err = submitLoop(ctx, c, queues["submit"], opt, srv)
		if err != nil {
			return err
		}
		if opt.LatencyJobs > 0 {
			lat, err := scheduleLatency(ctx, c, queues["latency"], opt.LatencyJobs)
			if err != nil {
				return err
			}
			res.ScheduleP50Ms, res.ScheduleP99Ms = &lat.P50, &lat.P99
		}
		return nil
	})
	return res, err
}

func submitInput(queue, name string) *batch.SubmitServiceJobInput {
	return &batch.SubmitServiceJobInput{
		JobName:               aws.String(name),
		JobQueue:              aws.String(queue),
		QuotaShareName:        aws.String("s0"),
		ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(Payload(name, submitType, 1, []string{"true"}, map[string]string{"QSHARE_SIM_DURATION": hourDuration})),
	}
}

func submitLoop(ctx context.Context, c *batch.Client, queue string, opt SubmitOptions, srv *Server) (SubmitResult, error) {
	res := SubmitResult{Clients: opt.Clients}
	defer lessGC()()
	start := time.Now()
	measureFrom := start.Add(opt.Warmup)
	end := measureFrom.Add(opt.Duration)
	// The CPU of each side over the measured window (and the submits in
	// flight at its end).
	meter := make(chan *cpuMeter, 1)
	go func() {
		time.Sleep(time.Until(measureFrom))
		meter <- startCPU(srv)
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lats []time.Duration
	var errs atomic.Int64
	var firstErr atomic.Value
	var seq atomic.Int64
	for i := range opt.Clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				n := seq.Add(1)
				in := submitInput(queue, fmt.Sprintf("submit-%d-%d", i, n))
				t := time.Now()
				if t.After(end) {
					break
				}
				_, err := c.SubmitServiceJob(ctx, in)
				d := time.Since(t)
				if t.Before(measureFrom) {
					continue
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				mine = append(mine, d)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.DurationS = round(opt.Duration.Seconds(), 3)
	res.Submits = len(lats)
	if m := <-meter; srv != nil && res.Submits > 0 {
		m.stop()
		if d, ok := m.server(); ok {
			res.ServerCPUUsPerSubmit = ptr(round(float64(d.Microseconds())/float64(res.Submits), 1))
			res.HarnessCPUUsPerSubmit = ptr(round(float64(m.harness().Microseconds())/float64(res.Submits), 1))
		}
	}
	res.Errors = int(errs.Load())
	res.SubmitsPerS = round(float64(res.Submits)/opt.Duration.Seconds(), 1)
	res.Latency = Latencies(lats)
	if res.Errors > 0 && res.Errors*100 > res.Submits {
		return res, fmt.Errorf("bench submit: %d of %d submits failed, first: %v", res.Errors, res.Errors+res.Submits, firstErr.Load())
	}
	return res, nil
}

// scheduleLatency submits n jobs one at a time into free capacity and
// reports the server's createdAt → scheduledAt.
func scheduleLatency(ctx context.Context, c *batch.Client, queue string, n int) (Latency, error) {
	var ds []time.Duration
	for i := range n {
		out, err := c.SubmitServiceJob(ctx, submitInput(queue, fmt.Sprintf("latency-%d", i)))
		if err != nil {
			return Latency{}, fmt.Errorf("bench submit: latency job %d: %w", i, err)
		}
		var job *batch.DescribeServiceJobOutput
		deadline := time.Now().Add(10 * time.Second)
		for {
			job, err = c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: out.JobId})
			if err != nil {
				return Latency{}, fmt.Errorf("bench submit: describe latency job %d: %w", i, err)
			}
			if job.ScheduledAt != nil && *job.ScheduledAt != 0 {
				break
			}
			if time.Now().After(deadline) {
				return Latency{}, fmt.Errorf("bench submit: latency job %d was not scheduled within 10 s (status %s: %s)", i, job.Status, aws.ToString(job.StatusReason))
			}
			time.Sleep(2 * time.Millisecond)
		}
		ds = append(ds, ms(job.ScheduledAt).Sub(ms(job.CreatedAt)))
	}
	return Latencies(ds), nil
}

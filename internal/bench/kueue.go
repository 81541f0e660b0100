package bench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/fanout"
	"qshare/sim"
)

// KueueOptions configure a run of one of Kueue's scheduler benchmarks
// against a real server.
type KueueOptions struct {
	Endpoint string
	Server   ServerOptions
	// Sign signs each request (ClientOptions.Sign).
	Sign bool
	// Workload is sim.KueueBaseline() or sim.KueueLargeScale().
	Workload *sim.Workload
	// Submitters is the number of clients that submit the jobs at their
	// scheduled times (64 when zero).
	Submitters int
	// Timeout bounds the wait for every job to finish.
	Timeout time.Duration
	// ServerInProcess says that the server runs in this process
	// (--in-process): the process's CPU is then the server's and the
	// harness's together, and the harness's own is not reported.
	ServerInProcess bool
}

// KueueResult is what `qshare bench kueue-baseline` and
// `kueue-large-scale` report for one run. Usages are percentages.
type KueueResult struct {
	Workload string `json:"workload"`
	Jobs     int    `json:"jobs"`
	Shares   int    `json:"shares"`
	// WallS runs from the first submit to the stoppedAt of the last job.
	WallS float64 `json:"wall_s"`
	// IdealS is the makespan of the same workload through the same engine
	// in the simulator (virtual clock: no HTTP, no store, no executor).
	IdealS        float64 `json:"ideal_s"`
	WallOverIdeal float64 `json:"wall_over_ideal"`
	// MinShareUsage is, over the shares, the lowest of each share's
	// instance-seconds used (borrowed included) over its nominal capacity
	// times WallS: Kueue's ClusterQueue usage, taken per share.
	MinShareUsage float64 `json:"min_share_usage"`
	// Usage is the same over all shares together: what Kueue's checker
	// compares with clusterQueueClassesMinUsage (all its ClusterQueues are
	// one class).
	Usage float64 `json:"usage"`
	// MeanAdmissionS is the mean time from a job's createdAt to its first
	// admission, per class (small, medium, large).
	MeanAdmissionS map[string]float64 `json:"mean_admission_s"`
	// Preemptions counts preempted attempts over every job.
	Preemptions int `json:"preemptions"`
	// Ideal holds the same figures from the simulator's run.
	Ideal KueueIdeal `json:"ideal"`
	// IdealAtArrivalsS is the simulator's makespan for the same jobs due
	// when the server actually created them (createdAt from the first
	// submit) instead of at their scheduled times: what a scheduler
	// without overhead reaches with the arrivals this run got. Where
	// WallOverIdeal is large but WallOverIdealAtArrivals is near 1, the
	// clients' lag (the submit_lag figure), not the scheduling, set the
	// wall time. IdealAtArrivals holds that run's other figures.
	IdealAtArrivalsS        float64    `json:"ideal_at_arrivals_s"`
	WallOverIdealAtArrivals float64    `json:"wall_over_ideal_at_arrivals"`
	IdealAtArrivals         KueueIdeal `json:"ideal_at_arrivals"`
	// SubmitLagP99Ms is how late (99th percentile) the harness sent a
	// submit after its scheduled time: large means the clients, not the
	// scheduler, set the pace.
	SubmitLagP99Ms float64 `json:"submit_lag_p99_ms"`
	SubmitLatency  Latency `json:"submit_latency"`
	// SubmitRetries counts submits sent again after a connection failure
	// (with the same clientToken).
	SubmitRetries int `json:"submit_retries"`
	// SubmitSpanS runs from the first submit to the last one acknowledged,
	// and SubmitsPerS is Jobs over it: the rate the harness and the server
	// reached together. Keeping to the schedule takes Jobs over the last
	// scheduled submit time (about 16,700/s for kueue-large-scale).
	SubmitSpanS float64 `json:"submit_span_s"`
	SubmitsPerS float64 `json:"submits_per_s"`
	// ScheduleSubmitsPerS is the rate the schedule asks for: Jobs over the
	// last job's submit time. Where SubmitsPerS falls short of it the
	// submit lag grows.
	ScheduleSubmitsPerS float64 `json:"schedule_submits_per_s"`
	// CPU splits the machine's time between the harness and the server.
	CPU KueueCPU `json:"cpu"`
}

// KueueCPU is the CPU time (user and system) the harness and the server
// used during a Kueue run: where the machine's cores went.
type KueueCPU struct {
	// HarnessSubmitS is the harness process's CPU from the first submit to
	// the last acknowledgement (its AWS SDK client, HTTP, garbage
	// collection), and HarnessUsPerSubmit the same per job in µs.
	// Both are absent with --in-process (see ServerInProcess).
	HarnessSubmitS     *float64 `json:"harness_submit_s,omitempty"`
	HarnessUsPerSubmit *float64 `json:"harness_us_per_submit,omitempty"`
	// ServerSubmitS is the server's CPU over the same interval, and
	// ServerRunS from the first submit until the harness saw every job
	// finished; ServerUsPerJob is ServerRunS per job in µs (its submit,
	// scheduling, simulated run and the durable writes of each). They are
	// known only for a server the harness started as a child process:
	// absent with --endpoint and with --in-process (there, --cpuprofile
	// separates them: the harness's goroutines carry the pprof label
	// bench=submit, bench=wait or bench=read-back).
	ServerSubmitS  *float64 `json:"server_submit_s,omitempty"`
	ServerRunS     *float64 `json:"server_run_s,omitempty"`
	ServerUsPerJob *float64 `json:"server_us_per_job,omitempty"`
}

// KueueIdeal is the simulator's side of a Kueue benchmark.
type KueueIdeal struct {
	MinShareUsage  float64            `json:"min_share_usage"`
	Usage          float64            `json:"usage"`
	MeanAdmissionS map[string]float64 `json:"mean_admission_s"`
	Preemptions    int                `json:"preemptions"`
}

// KueuePublished are Kueue's own measured means (BENCHMARKS.md §2).
type KueuePublished struct {
	WallS          float64
	Usage          float64
	MeanAdmissionS map[string]float64
}

// Kueue's published figures for its two configurations.
var (
	KueueBaselinePublished   = KueuePublished{WallS: 351, Usage: 55.9, MeanAdmissionS: map[string]float64{"large": 16.5, "medium": 76.8, "small": 215}}
	KueueLargeScalePublished = KueuePublished{WallS: 1179, Usage: 38.6, MeanAdmissionS: map[string]float64{"large": 105.6, "medium": 256.4, "small": 700.4}}
)

// KueueRows returns the human table of a Kueue benchmark, with Kueue's
// published figures and the targets as anchors: wall_s at most wallTarget
// times ideal_s, and, when largeTarget is not zero, a mean admission of
// large jobs under largeTarget seconds.
func KueueRows(pub KueuePublished, wallTarget, largeTarget float64) []Row {
	rows := []Row{
		{Label: "jobs", Key: "jobs", Format: "%.0f"},
		{Label: "wall (first submit → last finish)", Key: "wall_s", Format: "%.1f", Unit: "s", Anchor: fmt.Sprintf("Kueue %.0f s", pub.WallS)},
		{Label: "ideal (simulator, same engine)", Key: "ideal_s", Format: "%.1f", Unit: "s"},
		{Label: "wall / ideal", Key: "wall_over_ideal", Format: "%.3f", Anchor: fmt.Sprintf("target ≤ %.2f", wallTarget)},
		{Label: "  ideal at the arrivals this run got", Key: "ideal_at_arrivals_s", Format: "%.1f", Unit: "s"},
		{Label: "  wall / that ideal", Key: "wall_over_ideal_at_arrivals", Format: "%.3f"},
		{Label: "min share usage", Key: "min_share_usage", Format: "%.1f", Unit: "%", Anchor: "target ≥ 85%"},
		{Label: "usage, all shares", Key: "usage", Format: "%.1f", Unit: "%", Anchor: fmt.Sprintf("Kueue %.1f%%", pub.Usage)},
	}
	for _, c := range []string{"large", "medium", "small"} {
		a := fmt.Sprintf("Kueue %.1f s", pub.MeanAdmissionS[c])
		if c == "large" && largeTarget > 0 {
			a += fmt.Sprintf("; target < %g s", largeTarget)
		}
		rows = append(rows, Row{Label: "mean admission " + c, Key: "mean_admission_s." + c, Format: "%.2f", Unit: "s", Anchor: a})
	}
	for _, c := range []string{"large", "medium", "small"} {
		rows = append(rows, Row{Label: "  ideal mean admission " + c, Key: "ideal.mean_admission_s." + c, Format: "%.2f", Unit: "s"})
	}
	rows = append(rows,
		Row{Label: "  ideal min share usage", Key: "ideal.min_share_usage", Format: "%.1f", Unit: "%"},
		Row{Label: "preemptions", Key: "preemptions", Format: "%.0f"},
		Row{Label: "  ideal preemptions", Key: "ideal.preemptions", Format: "%.0f"},
		Row{Label: "  ideal preemptions at this run's arrivals", Key: "ideal_at_arrivals.preemptions", Format: "%.0f"},
		Row{Label: "submit lag p99 (harness health)", Key: "submit_lag_p99_ms", Format: "%.1f", Unit: "ms"},
		Row{Label: "submit latency p99", Key: "submit_latency.p99_ms", Format: "%.1f", Unit: "ms"},
		Row{Label: "submits resent after a connection failure", Key: "submit_retries", Format: "%.0f"},
		Row{Label: "submit span (first submit → last acknowledged)", Key: "submit_span_s", Format: "%.2f", Unit: "s"},
		Row{Label: "submits/s reached", Key: "submits_per_s", Format: "%.0f"},
		Row{Label: "  submits/s the schedule asks", Key: "schedule_submits_per_s", Format: "%.0f"},
		Row{Label: "harness CPU while submitting", Key: "cpu.harness_submit_s", Format: "%.2f", Unit: "s"},
		Row{Label: "  per submit", Key: "cpu.harness_us_per_submit", Format: "%.0f", Unit: "µs"},
		Row{Label: "server CPU while submitting", Key: "cpu.server_submit_s", Format: "%.2f", Unit: "s"},
		Row{Label: "server CPU, first submit → all finished", Key: "cpu.server_run_s", Format: "%.2f", Unit: "s"},
		Row{Label: "  per job", Key: "cpu.server_us_per_job", Format: "%.0f", Unit: "µs"},
	)
	return rows
}

// submitted is what the harness knows of a job it submitted.
type submitted struct {
	spec *sim.Job
	id   string
}

// RunKueue runs a Kueue workload in real time against a server with the
// simulated executor, and the same workload through the simulator for the
// ideal.
func RunKueue(ctx context.Context, opt KueueOptions) (KueueResult, error) {
	w := opt.Workload
	if w == nil || len(w.Jobs) == 0 {
		return KueueResult{}, fmt.Errorf("bench kueue: no workload")
	}
	defer lessGC()()
	if opt.Submitters == 0 {
		opt.Submitters = 64
	}
	if opt.Timeout == 0 {
		opt.Timeout = 30 * time.Minute
	}
	opt.Server.Executor = "simulated"
	if opt.Server.MaxSharesPerQueue == 0 {
		opt.Server.MaxSharesPerQueue = w.MaxSharesPerQueue
	}
	res := KueueResult{Workload: w.Name, Jobs: len(w.Jobs), ScheduleSubmitsPerS: scheduleRate(w)}
	for _, q := range w.Config.JobQueues {
		res.Shares += len(q.QuotaShares)
	}
	ideal, err := KueueIdealRun(ctx, w)
	if err != nil {
		return res, err
	}
	res.IdealS = ideal.makespan
	res.Ideal = ideal.KueueIdeal
	err = withServer(ctx, opt.Endpoint, opt.Server, ClientOptions{Conns: opt.Submitters, Sign: opt.Sign}, w.Config, func(c *batch.Client, queues map[string]string, prefix string, srv *Server) error {
		ins := kueueInputs(w, queues, prefix)
		run := startCPU(srv)
		subs, start, err := kueueSubmit(ctx, c, w, ins, opt.Submitters, opt.ServerInProcess, srv, &res)
		if err != nil {
			return err
		}
		// The poll's period does not bound the figures' precision: they
		// come from the jobs' own timestamps.
		var qs []string
		for _, q := range queues {
			qs = append(qs, q)
		}
		sort.Strings(qs)
		pprof.Do(ctx, pprof.Labels("bench", "wait"), func(ctx context.Context) {
			err = waitDone(ctx, c, qs, srv, 500*time.Millisecond, opt.Timeout)
		})
		if err != nil {
			return err
		}
		run.stop()
		if d, ok := run.server(); ok {
			res.CPU.ServerRunS = ptr(round(d.Seconds(), 3))
			res.CPU.ServerUsPerJob = ptr(round(float64(d.Microseconds())/float64(len(ins)), 1))
		}
		var jobs []*batch.DescribeServiceJobOutput
		pprof.Do(ctx, pprof.Labels("bench", "read-back"), func(ctx context.Context) {
			jobs, err = describeAll(ctx, c, subs, opt.Submitters)
		})
		if err != nil {
			return err
		}
		if err := kueueFigures(w, subs, jobs, start, &res); err != nil {
			return err
		}
		at, err := idealAtArrivals(ctx, w, subs, jobs, start)
		if err != nil {
			return err
		}
		res.IdealAtArrivalsS = at.makespan
		res.IdealAtArrivals = at.KueueIdeal
		if at.makespan > 0 {
			res.WallOverIdealAtArrivals = round(res.WallS/at.makespan, 3)
		}
		return nil
	})
	return res, err
}

// idealAtArrivals runs the simulator on the jobs as the server received
// them: each one due at its createdAt, counted from the first submit (the
// origin of WallS), instead of at its scheduled time. createdAt has
// millisecond precision, so a job created within the first millisecond may
// read as a little before the start; it is then due at 0.
func idealAtArrivals(ctx context.Context, w *sim.Workload, subs []submitted, jobs []*batch.DescribeServiceJobOutput, start time.Time) (idealRun, error) {
	arr := make([]sim.Job, len(subs))
	for i, s := range subs {
		arr[i] = *s.spec
		arr[i].Submit = max(0, ms(jobs[i].CreatedAt).Sub(start))
	}
	sort.SliceStable(arr, func(a, b int) bool { return arr[a].Submit < arr[b].Submit })
	at := *w
	at.Jobs = arr
	return KueueIdealRun(ctx, &at)
}

// scheduleRate is the submit rate a workload's schedule asks for: its jobs
// over the last one's submit time (jobs are sorted by it); 0 when every job
// is due at once.
func scheduleRate(w *sim.Workload) float64 {
	last := w.Jobs[len(w.Jobs)-1].Submit
	if last <= 0 {
		return 0
	}
	return round(float64(len(w.Jobs))/last.Seconds(), 1)
}

type idealRun struct {
	KueueIdeal
	makespan float64
}

// KueueIdealRun runs the workload through the simulator: the ideal that the
// real run is compared with.
func KueueIdealRun(ctx context.Context, w *sim.Workload) (idealRun, error) {
	rep, err := sim.Run(ctx, w.Config, w.Jobs, sim.Options{Outcomes: true})
	if err != nil {
		return idealRun{}, fmt.Errorf("bench kueue: the simulator's run: %w", err)
	}
	out := idealRun{makespan: round(rep.MakespanS, 3)}
	out.MeanAdmissionS = sim.AdmissionMeans(rep)
	out.Preemptions = rep.Preemptions.CrossShare + rep.Preemptions.InShare
	var used, nominal float64
	out.MinShareUsage = -1
	for _, s := range rep.Shares {
		u := 100 * s.UsedInstS / (float64(s.OwnCapacity) * rep.MakespanS)
		if out.MinShareUsage < 0 || u < out.MinShareUsage {
			out.MinShareUsage = u
		}
		used += s.UsedInstS
		nominal += float64(s.OwnCapacity)
	}
	out.MinShareUsage = round(out.MinShareUsage, 2)
	out.Usage = round(100*used/(nominal*rep.MakespanS), 2)
	return out, nil
}

// kueueInputs builds every job's SubmitServiceJob request before the
// schedule starts, so that the clock only runs over the submits.
func kueueInputs(w *sim.Workload, queues map[string]string, prefix string) []*batch.SubmitServiceJobInput {
	ins := make([]*batch.SubmitServiceJobInput, len(w.Jobs))
	for i := range w.Jobs {
		j := &w.Jobs[i]
		size := j.Demand[sim.KueueInstanceType]
		ins[i] = &batch.SubmitServiceJobInput{
			JobName:            aws.String(j.ID),
			JobQueue:           aws.String(queues[j.Queue]),
			QuotaShareName:     aws.String(j.Share),
			SchedulingPriority: aws.Int32(int32(j.Priority)),
			ServiceJobType:     types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(Payload(j.ID, sim.KueueInstanceType, size, []string{"true"},
				map[string]string{"QSHARE_SIM_DURATION": j.Duration.String()})),
			ClientToken: aws.String(prefix + j.ID),
		}
	}
	return ins
}

// kueueSubmit submits every job at its scheduled time from n clients and
// returns them, with the instant the schedule started.
//
// The jobs are sorted by submit time. One goroutine keeps the schedule: it
// sleeps on a single timer until the next distinct submit time and then
// releases every job due by then at once (a gate, see release); the n
// clients take jobs in order and send each as soon as it is released. So
// there is no goroutine or timer per job, and when the clients fall behind
// they never wait on the schedule at all.
//
// A submit that fails on the connection (not with an answer from the
// server) is sent again with the same clientToken, so that it cannot create
// a second job; SubmitRetries counts them.
func kueueSubmit(ctx context.Context, c *batch.Client, w *sim.Workload, ins []*batch.SubmitServiceJobInput, n int, inProcess bool, srv *Server, res *KueueResult) ([]submitted, time.Time, error) {
	subs := make([]submitted, len(w.Jobs))
	lags := make([]time.Duration, len(w.Jobs))
	lats := make([]time.Duration, len(w.Jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gate := newRelease()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	var retried atomic.Int64
	cpu := startCPU(srv)
	start := time.Now()
	for range n {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("bench", "submit"), func(ctx context.Context) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ins) || !gate.wait(i) {
					return
				}
				j := &w.Jobs[i]
				t := time.Now()
				lags[i] = t.Sub(start.Add(j.Submit))
				var out *batch.SubmitServiceJobOutput
				r, err := retryTransient(ctx, 3, func() (err error) {
					out, err = c.SubmitServiceJob(ctx, ins[i])
					return err
				})
				retried.Add(int64(r))
				lats[i] = time.Since(t)
				if err != nil {
					if firstErr.CompareAndSwap(nil, fmt.Errorf("bench kueue: submit %s: %w", j.ID, err)) {
						cancel()
						gate.close()
					}
					return
				}
				subs[i] = submitted{spec: j, id: aws.ToString(out.JobId)}
			}
		})
	}
	keepSchedule(ctx, w.Jobs, start, gate)
	wg.Wait()
	span := time.Since(start)
	cpu.stop()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, start, err
	}
	if err := ctx.Err(); err != nil {
		return nil, start, err
	}
	ms := make([]float64, len(lags))
	for i, l := range lags {
		ms[i] = float64(l) / float64(time.Millisecond)
	}
	res.SubmitLagP99Ms = round(Percentile(ms, 99), 1)
	res.SubmitRetries = int(retried.Load())
	res.SubmitLatency = Latencies(lats)
	res.SubmitSpanS = round(span.Seconds(), 3)
	res.SubmitsPerS = round(float64(len(ins))/span.Seconds(), 1)
	if !inProcess {
		res.CPU.HarnessSubmitS = ptr(round(cpu.harness().Seconds(), 3))
		res.CPU.HarnessUsPerSubmit = ptr(round(float64(cpu.harness().Microseconds())/float64(len(ins)), 1))
	}
	if d, ok := cpu.server(); ok {
		res.CPU.ServerSubmitS = ptr(round(d.Seconds(), 3))
	}
	return subs, start, nil
}

// keepSchedule releases jobs (sorted by Submit) through gate as their
// submit times come, sleeping on one timer between distinct times, until
// every job is released or ctx ends; then it closes the gate.
func keepSchedule(ctx context.Context, jobs []sim.Job, start time.Time, gate *release) {
	defer gate.close()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for k := 0; k < len(jobs); {
		if d := time.Until(start.Add(jobs[k].Submit)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		now := time.Since(start)
		for k < len(jobs) && jobs[k].Submit <= now {
			k++
		}
		gate.open(k)
	}
}

// release is a gate over a sequence of jobs: jobs below its mark may go.
// Waiting costs one atomic load while the mark is ahead, which it is
// whenever the clients are behind the schedule.
type release struct {
	mark   atomic.Int64
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
}

func newRelease() *release {
	r := &release{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// open lets every job below k go.
func (r *release) open(k int) {
	r.mu.Lock()
	r.mark.Store(int64(k))
	r.mu.Unlock()
	r.cond.Broadcast()
}

// close wakes every waiter for good: wait returns whether its job was
// released before.
func (r *release) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cond.Broadcast()
}

// wait blocks until job i is released (true) or the gate is closed first
// (false).
func (r *release) wait(i int) bool {
	if int64(i) < r.mark.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for int64(i) >= r.mark.Load() && !r.closed {
		r.cond.Wait()
	}
	return int64(i) < r.mark.Load()
}

func ptr[T any](v T) *T { return &v }

// describeAll fetches every submitted job's detail (attempts and
// preemptions) with n clients, after the run.
func describeAll(ctx context.Context, c *batch.Client, subs []submitted, n int) ([]*batch.DescribeServiceJobOutput, error) {
	out := make([]*batch.DescribeServiceJobOutput, len(subs))
	if err := fanout.Each(ctx, min(n, 16), len(subs), func(ctx context.Context, i int) error {
		_, err := retryTransient(ctx, 3, func() (err error) {
			out[i], err = c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(subs[i].id)})
			return err
		})
		if err != nil {
			return fmt.Errorf("bench kueue: describe %s: %w", subs[i].spec.ID, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// kueueFigures computes the figures of a run from the jobs' details, as
// Kueue's recorder does from its events: usage is instance-seconds held
// over nominal capacity over the run, admission is from creation to the
// first admission.
func kueueFigures(w *sim.Workload, subs []submitted, jobs []*batch.DescribeServiceJobOutput, start time.Time, res *KueueResult) error {
	nominal := map[string]int64{}
	for _, q := range w.Config.JobQueues {
		for _, s := range q.QuotaShares {
			for _, l := range s.CapacityLimits {
				nominal[q.Name+"/"+s.Name] += l.MaxCapacity
			}
		}
	}
	used := map[string]float64{}
	admSum := map[string]float64{}
	admN := map[string]int{}
	var last time.Time
	for i, d := range jobs {
		spec := subs[i].spec
		if d.Status != types.ServiceJobStatusSucceeded {
			return fmt.Errorf("bench kueue: job %s ended %s: %s", spec.ID, d.Status, aws.ToString(d.StatusReason))
		}
		if t := ms(d.StoppedAt); t.After(last) {
			last = t
		}
		size := float64(spec.Demand.Total())
		for _, a := range d.Attempts {
			s, e := ms(a.StartedAt), ms(a.StoppedAt)
			if !s.IsZero() && e.After(s) {
				used[spec.Queue+"/"+spec.Share] += size * e.Sub(s).Seconds()
			}
		}
		if d.PreemptionSummary != nil {
			res.Preemptions += int(aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount))
		}
		// The API gives a job's latest scheduledAt and each attempt's
		// startedAt; the first admission of a job that was preempted is
		// when its first attempt started.
		admitted := ms(d.ScheduledAt)
		if len(d.Attempts) > 1 && d.Attempts[0].StartedAt != nil {
			admitted = ms(d.Attempts[0].StartedAt)
		}
		class := sim.ClassOf(spec.ID)
		admSum[class] += admitted.Sub(ms(d.CreatedAt)).Seconds()
		admN[class]++
	}
	wall := last.Sub(start).Seconds()
	if wall <= 0 {
		return fmt.Errorf("bench kueue: no job finished after the first submit")
	}
	res.WallS = round(wall, 3)
	res.WallOverIdeal = round(wall/res.IdealS, 3)
	res.MeanAdmissionS = map[string]float64{}
	for c, s := range admSum {
		res.MeanAdmissionS[c] = round(s/float64(admN[c]), 3)
	}
	var total, nom float64
	res.MinShareUsage = -1
	for key, n := range nominal {
		u := 100 * used[key] / (float64(n) * wall)
		if res.MinShareUsage < 0 || u < res.MinShareUsage {
			res.MinShareUsage = u
		}
		total += used[key]
		nom += float64(n)
	}
	res.MinShareUsage = round(res.MinShareUsage, 2)
	res.Usage = round(100*total/(nom*wall), 2)
	return nil
}

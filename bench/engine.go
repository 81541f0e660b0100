package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"qshare"
	"qshare/engine"
)

// EngineOptions configure the engine's scale run.
type EngineOptions struct {
	// Pending is the number of RUNNABLE jobs kept in the engine (1,000,000).
	Pending int
	// Queues and SharesPerQueue shape the configuration (50 × 20 = 1,000
	// shares); each queue has its own service environment.
	Queues         int
	SharesPerQueue int
	// Passes is the number of steady-state passes measured; Churn the
	// number of jobs that finish, and of new jobs submitted, before each.
	Passes int
	Churn  int
	// Seed makes the workload reproducible.
	Seed uint64
}

// DefaultEngineOptions is the run the engine issue asks for.
func DefaultEngineOptions() EngineOptions {
	return EngineOptions{Pending: 1_000_000, Queues: 50, SharesPerQueue: 20, Passes: 2000, Churn: 64, Seed: 1}
}

// EngineResult is what `qshare bench engine` reports for one run.
type EngineResult struct {
	PendingJobs int `json:"pending_jobs"`
	Shares      int `json:"shares"`
	Queues      int `json:"queues"`
	Passes      int `json:"passes"`
	// DecisionsPerS is decisions over the time spent in Schedule during the
	// steady-state passes; StartsPerS counts only the starts (admissions).
	DecisionsPerS float64 `json:"decisions_per_s"`
	StartsPerS    float64 `json:"starts_per_s"`
	// ChurnOpsPerS counts every engine call of the steady state (Release,
	// Submit and Schedule) over the time they took together.
	ChurnOpsPerS float64 `json:"churn_ops_per_s"`
	// PassP50Ms, PassP99Ms and PassMaxMs are the latency of one steady-state
	// Schedule call.
	PassP50Ms float64 `json:"pass_p50_ms"`
	PassP99Ms float64 `json:"pass_p99_ms"`
	PassMaxMs float64 `json:"pass_max_ms"`
	// Preemptions counts the cross-share reclaims of the run: shares that
	// borrowed give capacity back when the lender's jobs arrive.
	Preemptions int `json:"preemptions"`
	// FillPassMs is the first pass, which starts jobs into empty capacity.
	FillPassMs float64 `json:"fill_pass_ms"`
	// SubmitsPerS is the rate of Submit calls while loading the pending jobs.
	SubmitsPerS float64 `json:"submits_per_s"`
	// BytesPerPendingJob is the growth of the live heap (after a full GC)
	// from the configured, empty engine to the engine holding every pending
	// job, divided by their number: the job IDs the engine keeps included.
	BytesPerPendingJob float64 `json:"bytes_per_pending_job"`
}

// engineRows is the human table of the engine run; the anchors are the
// engine issue's targets.
var engineRows = []Row{
	{Label: "pending jobs", Key: "pending_jobs", Format: "%.0f"},
	{Label: "decisions/s (steady state, in Schedule)", Key: "decisions_per_s", Format: "%.0f", Anchor: "target ≥ 500,000 admissions/s"},
	{Label: "starts/s (steady state, in Schedule)", Key: "starts_per_s", Format: "%.0f"},
	{Label: "engine calls/s (release+submit+schedule)", Key: "churn_ops_per_s", Format: "%.0f"},
	{Label: "pass latency p50", Key: "pass_p50_ms", Format: "%.3f", Unit: "ms"},
	{Label: "pass latency p99", Key: "pass_p99_ms", Format: "%.3f", Unit: "ms", Anchor: "target < 1 ms"},
	{Label: "pass latency max", Key: "pass_max_ms", Format: "%.3f", Unit: "ms"},
	{Label: "preemptions (cross-share reclaim)", Key: "preemptions", Format: "%.0f"},
	{Label: "first (fill) pass", Key: "fill_pass_ms", Format: "%.1f", Unit: "ms"},
	{Label: "Submit calls/s (loading)", Key: "submits_per_s", Format: "%.0f"},
	{Label: "memory per pending job", Key: "bytes_per_pending_job", Format: "%.0f", Unit: "B", Anchor: "target < 1024 B"},
}

// EngineRows returns the rows of the engine benchmark's table.
func EngineRows() []Row { return engineRows }

const benchType = "ml.g5.xlarge"

// RunEngine loads an engine with opt.Pending jobs over the configured
// shares, runs the first pass, then opt.Passes steady-state passes, each
// after opt.Churn running jobs finished and as many new jobs arrived. It
// measures only engine calls: the bookkeeping of the driver is outside the
// timed sections.
func RunEngine(opt EngineOptions) (EngineResult, error) {
	if opt.Pending < 1 || opt.Queues < 1 || opt.SharesPerQueue < 1 || opt.Passes < 1 || opt.Churn < 1 {
		return EngineResult{}, fmt.Errorf("bench engine: every size must be at least 1: %+v", opt)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	runtime.GC()
	e := engine.New()
	type shareRef struct{ queue, name string }
	var shares []shareRef
	const ownCap = 8
	for q := range opt.Queues {
		env := fmt.Sprintf("env-%02d", q)
		queue := fmt.Sprintf("queue-%02d", q)
		if err := e.SetEnvironment(engine.EnvironmentConfig{Name: env, Limits: qshare.Capacity{benchType: int64(ownCap * opt.SharesPerQueue)}}); err != nil {
			return EngineResult{}, err
		}
		if err := e.SetQueue(engine.QueueConfig{Name: queue, Environment: env}); err != nil {
			return EngineResult{}, err
		}
		for s := range opt.SharesPerQueue {
			name := fmt.Sprintf("share-%02d", s)
			if err := e.SetShare(engine.ShareConfig{
				Queue: queue, Name: name, Limits: qshare.Capacity{benchType: ownCap},
				Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 100,
			}); err != nil {
				return EngineResult{}, err
			}
			shares = append(shares, shareRef{queue, name})
		}
	}
	e.Schedule(time.Unix(0, 0)) // settle the configuration

	base := time.Unix(1_700_000_000, 0)
	seq := 0
	spec := func() engine.JobSpec {
		sh := shares[rng.IntN(len(shares))]
		seq++
		return engine.JobSpec{
			ID:                "j" + strconv.Itoa(seq),
			Queue:             sh.queue,
			Share:             sh.name,
			Priority:          rng.IntN(10),
			Created:           base.Add(time.Duration(seq) * time.Millisecond),
			Demand:            qshare.Capacity{benchType: int64(1 + rng.IntN(4))},
			PreemptionRetries: -1,
		}
	}
	// Jobs are loaded in batches: each batch's specs are built outside the
	// timed section, and dropped before the heap is measured, so that
	// neither the clock nor the heap sees the driver's work; what stays
	// live is what the engine keeps (job IDs included).
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var loadDur time.Duration
	batch := make([]engine.JobSpec, 0, 10_000)
	for loaded := 0; loaded < opt.Pending; {
		batch = batch[:0]
		for range min(cap(batch), opt.Pending-loaded) {
			batch = append(batch, spec())
		}
		t := time.Now()
		for i := range batch {
			if err := e.Submit(batch[i]); err != nil {
				return EngineResult{}, err
			}
		}
		loadDur += time.Since(t)
		loaded += len(batch)
	}
	batch = nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	res := EngineResult{
		PendingJobs:        opt.Pending,
		Shares:             opt.Queues * opt.SharesPerQueue,
		Queues:             opt.Queues,
		Passes:             opt.Passes,
		SubmitsPerS:        round(float64(opt.Pending)/loadDur.Seconds(), 0),
		BytesPerPendingJob: round((float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(opt.Pending), 1),
	}

	// running lists the jobs holding capacity, with each one's index, so
	// that a finish or a preemption removes it in constant time. stopped
	// holds the victims of preemptions, released (requeued) before the
	// next pass as if they had stopped at once.
	var running []string
	pos := map[string]int{}
	type stop struct {
		id      string
		requeue bool
	}
	var stopped []stop
	remove := func(i int) string {
		id := running[i]
		last := running[len(running)-1]
		running[i] = last
		pos[last] = i
		running = running[:len(running)-1]
		delete(pos, id)
		return id
	}
	var preemptions int
	apply := func(ds []engine.Decision) {
		for _, d := range ds {
			switch d.Kind {
			case engine.DecisionStart:
				pos[d.Job] = len(running)
				running = append(running, d.Job)
			case engine.DecisionPreempt:
				preemptions++
				if i, ok := pos[d.Job]; ok {
					remove(i)
				}
				stopped = append(stopped, stop{d.Job, !d.Final})
			}
		}
	}
	now := base.Add(time.Duration(seq) * time.Millisecond)
	t0 := time.Now()
	ds := e.Schedule(now)
	res.FillPassMs = round(float64(time.Since(t0))/float64(time.Millisecond), 3)
	apply(ds)
	if len(running) == 0 {
		return res, fmt.Errorf("bench engine: the first pass started nothing")
	}

	passes := make([]time.Duration, 0, opt.Passes)
	var inSchedule, inChurn time.Duration
	var decisions, starts, calls int
	newSpecs := make([]engine.JobSpec, opt.Churn)
	finished := make([]string, 0, opt.Churn)
	for range opt.Passes {
		// Choose who finishes and who arrives outside the timed section.
		finished = finished[:0]
		for range min(opt.Churn, len(running)) {
			finished = append(finished, remove(rng.IntN(len(running))))
		}
		for i := range newSpecs {
			newSpecs[i] = spec()
		}
		now = now.Add(10 * time.Millisecond)

		t := time.Now()
		for _, st := range stopped {
			if err := e.Release(st.id, st.requeue); err != nil {
				return res, err
			}
		}
		for _, id := range finished {
			if err := e.Release(id, false); err != nil {
				return res, err
			}
		}
		for i := range newSpecs {
			if err := e.Submit(newSpecs[i]); err != nil {
				return res, err
			}
		}
		ts := time.Now()
		ds := e.Schedule(now)
		end := time.Now()
		passes = append(passes, end.Sub(ts))
		inSchedule += end.Sub(ts)
		inChurn += end.Sub(t)
		calls += len(stopped) + len(finished) + len(newSpecs) + 1
		stopped = stopped[:0]
		decisions += len(ds)
		for _, d := range ds {
			if d.Kind == engine.DecisionStart {
				starts++
			}
		}
		apply(ds)
	}
	if starts == 0 {
		return res, fmt.Errorf("bench engine: no job started in the steady state")
	}
	lat := Latencies(passes)
	res.PassP50Ms, res.PassP99Ms, res.PassMaxMs = lat.P50, lat.P99, lat.Max
	res.DecisionsPerS = round(float64(decisions)/inSchedule.Seconds(), 0)
	res.StartsPerS = round(float64(starts)/inSchedule.Seconds(), 0)
	res.ChurnOpsPerS = round(float64(calls)/inChurn.Seconds(), 0)
	res.Preemptions = preemptions
	runtime.KeepAlive(e)
	return res, nil
}

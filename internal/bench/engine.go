package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/internal/bench/jobset"
)

// EngineOptions configure the engine's scale run.
type EngineOptions struct {
	// Pending is the number of RUNNABLE jobs kept in the engine (1,000,000).
	Pending int
	// Queues and SharesPerQueue shape the configuration (50 × 20 = 1,000
	// shares); each queue has its own service environment.
	Queues         int
	SharesPerQueue int
	// LatencyPasses is the number of passes of the trickle phase: before
	// each, one running job finishes and one job arrives, the daemon's
	// loop under a steady trickle of events.
	LatencyPasses int
	// BatchPasses is the number of passes of the batch phase, each after
	// Batch finishes and Batch arrivals: the engine's throughput.
	BatchPasses int
	Batch       int
	// Seed makes the workload reproducible.
	Seed uint64
}

// DefaultEngineOptions is the run the engine issue asks for.
func DefaultEngineOptions() EngineOptions {
	return EngineOptions{Pending: 1_000_000, Queues: 50, SharesPerQueue: 20, LatencyPasses: 20_000, BatchPasses: 200, Batch: 1000, Seed: 1}
}

// EngineResult is what `qshare bench engine` reports for one run. Its
// row tags are the human table (RowsOf), whose anchors are the engine
// issue's targets.
type EngineResult struct {
	PendingJobs int `json:"pending_jobs" row:"pending jobs;%.0f"`
	Shares      int `json:"shares"`
	Queues      int `json:"queues"`
	// PassP50Ms, PassP99Ms and PassMaxMs are the latency of one Schedule
	// call in the trickle phase (one finish and one arrival per pass).
	PassP50Ms float64 `json:"pass_p50_ms" row:"pass latency p50 (trickle: 1 finish + 1 arrival);%.3f;ms"`
	PassP99Ms float64 `json:"pass_p99_ms" row:"pass latency p99 (trickle);%.3f;ms;target < 1 ms"`
	PassMaxMs float64 `json:"pass_max_ms" row:"pass latency max (trickle);%.3f;ms"`
	// AdmissionsPerS is jobs started per second of engine time (Release,
	// Submit and Schedule together) in the batch phase; DecisionsPerS is
	// every decision (starts, preemptions, wait reasons) per second spent
	// in Schedule in the same phase.
	AdmissionsPerS float64 `json:"admissions_per_s" row:"admissions/s (batch: 1,000 + 1,000 per pass);%.0f;;target ≥ 500,000"`
	DecisionsPerS  float64 `json:"decisions_per_s" row:"decisions/s in Schedule (batch);%.0f"`
	// BatchPassP50Ms and BatchPassP99Ms are the latency of one pass of the
	// batch phase.
	BatchPassP50Ms float64 `json:"batch_pass_p50_ms" row:"pass latency p50 (batch);%.3f;ms"`
	BatchPassP99Ms float64 `json:"batch_pass_p99_ms" row:"pass latency p99 (batch);%.3f;ms"`
	// Preemptions counts the preemptions of both phases (cross-share
	// reclaim and in-share, by priority).
	Preemptions int `json:"preemptions" row:"preemptions;%.0f"`
	// FillPassMs is the first pass, which starts jobs into empty capacity.
	FillPassMs float64 `json:"fill_pass_ms" row:"first (fill) pass;%.1f;ms"`
	// SubmitsPerS is the rate of Submit calls while loading the pending jobs.
	SubmitsPerS float64 `json:"submits_per_s" row:"Submit calls/s (loading);%.0f"`
	// BytesPerPendingJob is the growth of the live heap (after a full GC)
	// from the configured, empty engine to the engine holding every pending
	// job, divided by their number: the job IDs the engine keeps included.
	BytesPerPendingJob float64 `json:"bytes_per_pending_job" row:"memory per pending job;%.0f;B;target < 1024 B"`
}

// The installation of the engine run, the same shape as the engine's own
// benchmarks (engine/bench_test.go): per share 20 of a small type and 4 of
// a large one; strategies LEND_AND_BORROW (borrowLimit 100), LEND,
// LEND_AND_BORROW, RESERVE in turn; in-share preemption on every other
// share; jobs of 1–2 small instances, or (one in eight) 1 large.
var engineTypes = [2]string{"ml.g5.xlarge", "ml.p4d.24xlarge"}

const (
	engineSmallPerShare = 20
	engineLargePerShare = 4
)

// engineWorld is the engine under test and the driver's bookkeeping.
type engineWorld struct {
	e      *engine.Engine
	rng    *rand.Rand
	shares [][2]string
	seq    int
	base   time.Time
	// running lists the jobs holding capacity, with each one's index, so
	// that a finish or a preemption removes it in constant time. stopped
	// holds the victims of the last pass, released (requeued) before the
	// next as if they had stopped at once.
	running     jobset.Set
	stopped     []stop
	preemptions int
	// ds is the last pass's decisions, reused by the next pass
	// (engine.AppendSchedule), as the daemon and the simulator do.
	ds []engine.Decision
}

type stop struct {
	id      string
	requeue bool
}

func newEngineWorld(opt EngineOptions) (*engineWorld, error) {
	w := &engineWorld{
		e:    engine.New(),
		rng:  rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15)),
		base: time.Unix(1_700_000_000, 0),
	}
	strategies := []qshare.Strategy{qshare.StrategyLendAndBorrow, qshare.StrategyLend, qshare.StrategyLendAndBorrow, qshare.StrategyReserve}
	n := int64(opt.SharesPerQueue)
	for q := range opt.Queues {
		env := fmt.Sprintf("env-%02d", q)
		queue := fmt.Sprintf("queue-%02d", q)
		if err := w.e.SetEnvironment(engine.EnvironmentConfig{Name: env, Limits: qshare.Capacity{engineTypes[0]: engineSmallPerShare * n, engineTypes[1]: engineLargePerShare * n}}); err != nil {
			return nil, err
		}
		if err := w.e.SetQueue(engine.QueueConfig{Name: queue, Environment: env}); err != nil {
			return nil, err
		}
		for s := range opt.SharesPerQueue {
			st := strategies[s%len(strategies)]
			bl := int64(-1)
			if st == qshare.StrategyLendAndBorrow {
				bl = 100
			}
			name := fmt.Sprintf("share-%02d", s)
			if err := w.e.SetShare(engine.ShareConfig{
				Queue: queue, Name: name, Limits: qshare.Capacity{engineTypes[0]: engineSmallPerShare, engineTypes[1]: engineLargePerShare},
				Strategy: st, BorrowLimit: bl, InSharePreemption: s%2 == 0,
			}); err != nil {
				return nil, err
			}
			w.shares = append(w.shares, [2]string{queue, name})
		}
	}
	w.e.Schedule(w.base) // settle the configuration
	return w, nil
}

// spec describes the next job, for a random share.
func (w *engineWorld) spec() engine.JobSpec {
	sh := w.shares[w.rng.IntN(len(w.shares))]
	w.seq++
	d := qshare.Capacity{engineTypes[0]: int64(1 + w.rng.IntN(2))}
	if w.rng.IntN(8) == 0 {
		d = qshare.Capacity{engineTypes[1]: 1}
	}
	return engine.JobSpec{
		ID:                "j" + strconv.Itoa(w.seq),
		Queue:             sh[0],
		Share:             sh[1],
		Priority:          w.rng.IntN(10),
		Created:           w.now(),
		Demand:            d,
		PreemptionRetries: -1,
	}
}

func (w *engineWorld) now() time.Time { return w.base.Add(time.Duration(w.seq) * time.Millisecond) }

// apply records a pass's decisions and counts its starts.
func (w *engineWorld) apply(ds []engine.Decision) (starts int) {
	for _, d := range ds {
		switch d.Kind {
		case engine.DecisionStart:
			starts++
			w.running.Add(d.Job)
		case engine.DecisionPreempt:
			w.preemptions++
			w.running.Remove(d.Job)
			w.stopped = append(w.stopped, stop{d.Job, !d.Final})
		}
	}
	return starts
}

// phase is what a steady-state phase measured.
type phase struct {
	passes     []time.Duration
	inSchedule time.Duration
	inEngine   time.Duration
	decisions  int
	starts     int
}

// steady runs passes steps of: the victims of the last pass stop, churn
// running jobs finish, churn jobs arrive, one pass. Only engine calls are
// timed; choosing who finishes and building the specs is not.
func (w *engineWorld) steady(passes, churn int) (phase, error) {
	p := phase{passes: make([]time.Duration, 0, passes)}
	specs := make([]engine.JobSpec, churn)
	finished := make([]string, 0, churn)
	for range passes {
		finished = finished[:0]
		for range min(churn, w.running.Len()) {
			finished = append(finished, w.running.RemoveAt(w.rng.IntN(w.running.Len())))
		}
		for i := range specs {
			specs[i] = w.spec()
		}
		t := time.Now()
		for _, st := range w.stopped {
			if err := w.e.Release(st.id, st.requeue); err != nil {
				return p, err
			}
		}
		// The jobs that finished are released in one call and the new
		// ones submitted in one, as the simulator does with the jobs that
		// finish or arrive at one instant (the same effect as one call
		// each, in the same order).
		if _, err := w.e.ReleaseMany(finished, false); err != nil {
			return p, err
		}
		if _, err := w.e.SubmitMany(specs); err != nil {
			return p, err
		}
		ts := time.Now()
		ds := w.e.AppendSchedule(w.ds[:0], w.now())
		end := time.Now()
		w.ds = ds
		w.stopped = w.stopped[:0]
		p.passes = append(p.passes, end.Sub(ts))
		p.inSchedule += end.Sub(ts)
		p.inEngine += end.Sub(t)
		p.decisions += len(ds)
		p.starts += w.apply(ds)
	}
	return p, nil
}

// RunEngine loads an engine with opt.Pending jobs over the configured
// shares, runs the first pass, then the trickle phase (pass latency) and
// the batch phase (throughput).
func RunEngine(opt EngineOptions) (EngineResult, error) {
	if opt.Pending < 1 || opt.Queues < 1 || opt.SharesPerQueue < 1 || opt.LatencyPasses < 1 || opt.BatchPasses < 1 || opt.Batch < 1 {
		return EngineResult{}, fmt.Errorf("bench engine: every size must be at least 1: %+v", opt)
	}
	runtime.GC()
	w, err := newEngineWorld(opt)
	if err != nil {
		return EngineResult{}, err
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
			batch = append(batch, w.spec())
		}
		t := time.Now()
		for i := range batch {
			if err := w.e.Submit(batch[i]); err != nil {
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
		SubmitsPerS:        round(float64(opt.Pending)/loadDur.Seconds(), 0),
		BytesPerPendingJob: round((float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(opt.Pending), 1),
	}

	t0 := time.Now()
	ds := w.e.Schedule(w.now())
	res.FillPassMs = round(float64(time.Since(t0))/float64(time.Millisecond), 3)
	if w.apply(ds) == 0 {
		return res, fmt.Errorf("bench engine: the first pass started nothing")
	}

	trickle, err := w.steady(opt.LatencyPasses, 1)
	if err != nil {
		return res, err
	}
	lat := Latencies(trickle.passes)
	res.PassP50Ms, res.PassP99Ms, res.PassMaxMs = lat.P50, lat.P99, lat.Max

	bulk, err := w.steady(opt.BatchPasses, opt.Batch)
	if err != nil {
		return res, err
	}
	if bulk.starts == 0 {
		return res, fmt.Errorf("bench engine: no job started in the batch phase")
	}
	blat := Latencies(bulk.passes)
	res.BatchPassP50Ms, res.BatchPassP99Ms = blat.P50, blat.P99
	res.AdmissionsPerS = round(float64(bulk.starts)/bulk.inEngine.Seconds(), 0)
	res.DecisionsPerS = round(float64(bulk.decisions)/bulk.inSchedule.Seconds(), 0)
	res.Preemptions = w.preemptions
	runtime.KeepAlive(w)
	return res, nil
}

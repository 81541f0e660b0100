package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"qshare"
	"qshare/internal/bench/jobset"
)

// The benchmarks model a large installation: 50 environments, each with
// one queue of 20 quota shares (1,000 shares), a mix of the three
// strategies, two instance types, and a given number of RUNNABLE jobs
// spread evenly over the shares. Run them with
//
//	go test ./engine -run XXX -bench . -benchtime 20000x
//
// They report admissions per CPU-second of the engine calls (jobs started;
// Release, Submit, Schedule and the garbage collection they cause), the 50th and 99th
// percentile of one Schedule call in wall time and in CPU time of its
// thread, and engine memory per pending job. CPU time is the figure to
// trust on a shared machine: wall time includes time the process waited
// for a core. Run with -cpu 1 for one core.

const (
	benchEnvs   = 50
	benchShares = 20
)

var benchTypes = []string{"ml.g5.xlarge", "ml.p4d.24xlarge"}

type benchWorld struct {
	e       *Engine
	rng     *rand.Rand
	running jobset.Set // holding jobs
	next    int
	clock   time.Time
	shares  [][2]string // queue, share
	// idents, in a fair-share world, is each entry of shares' share
	// identifier.
	idents []string
	// plans, in a world with capacity plans, is each entry of shares'
	// plan: a quarter of the share's jobs of one ml.g5.xlarge type name it.
	plans []string
	// ds is the decisions of the last pass; the next pass reuses it, as
	// the simulator and the daemon do (AppendSchedule).
	ds []Decision
	// harness is the process CPU time schedule spent on the harness's
	// bookkeeping, to be left out of the engine's CPU time.
	harness time.Duration
}

// newBenchWorld builds the installation with pending RUNNABLE jobs and runs
// one pass so that capacity is full and the rest wait. A mixed world has
// all three strategies (borrowing, reclaim) and in-share preemption in half
// of the shares; a plain one has LEND shares without in-share preemption,
// so that every start is a plain admission.
func newBenchWorld(pending int, mixed bool) *benchWorld {
	w := &benchWorld{e: New(), rng: rand.New(rand.NewPCG(1, 2)), clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	strategies := []qshare.Strategy{qshare.StrategyLendAndBorrow, qshare.StrategyLend, qshare.StrategyLendAndBorrow, qshare.StrategyReserve}
	for i := 0; i < benchEnvs; i++ {
		env := fmt.Sprintf("env%02d", i)
		q := fmt.Sprintf("queue%02d", i)
		if err := w.e.SetEnvironment(EnvironmentConfig{Name: env, Limits: qshare.Capacity{benchTypes[0]: 20 * benchShares, benchTypes[1]: 4 * benchShares}}); err != nil {
			panic(err)
		}
		if err := w.e.SetQueue(QueueConfig{Name: q, Environment: env}); err != nil {
			panic(err)
		}
		for s := 0; s < benchShares; s++ {
			st := strategies[s%len(strategies)]
			if !mixed {
				st = qshare.StrategyLend
			}
			bl := int64(-1)
			if st == qshare.StrategyLendAndBorrow {
				bl = 100
			}
			name := fmt.Sprintf("share%02d", s)
			if err := w.e.SetShare(ShareConfig{Queue: q, Name: name, Limits: qshare.Capacity{benchTypes[0]: 20, benchTypes[1]: 4}, Strategy: st, BorrowLimit: bl, InSharePreemption: mixed && s%2 == 0}); err != nil {
				panic(err)
			}
			w.shares = append(w.shares, [2]string{q, name})
		}
	}
	for i := 0; i < pending; i++ {
		w.submit(i % len(w.shares))
	}
	w.schedule()
	return w
}

func (w *benchWorld) submit(share int) {
	if err := w.e.Submit(w.spec(share)); err != nil {
		panic(err)
	}
}

// spec makes the next job for a share.
func (w *benchWorld) spec(share int) JobSpec {
	w.next++
	w.clock = w.clock.Add(time.Millisecond)
	d := qshare.Capacity{benchTypes[0]: int64(1 + w.rng.IntN(2))}
	if w.rng.IntN(8) == 0 {
		d = qshare.Capacity{benchTypes[1]: 1}
	}
	sh := w.shares[share]
	spec := JobSpec{ID: fmt.Sprintf("job%08d", w.next), Queue: sh[0], Share: sh[1], Priority: w.rng.IntN(10), Created: w.clock, Demand: d, PreemptionRetries: -1}
	if w.idents != nil {
		spec.ShareIdentifier = w.idents[share]
	}
	if w.plans != nil && d[benchTypes[0]] > 0 && w.rng.IntN(4) == 0 {
		spec.Plan = w.plans[share]
	}
	return spec
}

// threadCPU is the CPU time consumed by the calling OS thread.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// processCPU is the CPU time consumed by the process (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type passTime struct{ wall, cpu time.Duration }

// schedule runs a pass and carries out its decisions the way the daemon
// would (into a reused slice, as the daemon and the simulator do), except that preempted jobs are released at once (inside the
// measured region: releasing is engine work).
func (w *benchWorld) schedule() (starts int, d passTime) {
	c0 := threadCPU()
	t0 := time.Now()
	ds := w.e.AppendSchedule(w.ds[:0], w.clock)
	w.ds = ds
	d.wall = time.Since(t0)
	d.cpu = threadCPU() - c0
	for _, x := range ds {
		if x.Kind == DecisionPreempt {
			if err := w.e.Release(x.Job, !x.Final); err != nil {
				panic(err)
			}
		}
	}
	// The harness's own bookkeeping of running jobs (a map of a million
	// string keys) is not engine work: its CPU time is set aside.
	h0 := processCPU()
	for _, x := range ds {
		switch x.Kind {
		case DecisionStart:
			starts++
			w.running.Add(x.Job)
		case DecisionPreempt:
			w.running.Remove(x.Job)
		}
	}
	w.harness += processCPU() - h0
	return starts, d
}

// newFairBenchWorld is the installation with fair-share queues instead:
// 50 environments of the same size, each with one fair-share queue of 20
// share identifiers (weights 0.5 to 2.4, a computeReservation of 10), and
// pending RUNNABLE jobs spread evenly over the identifiers.
func newFairBenchWorld(pending int) *benchWorld {
	w := &benchWorld{e: New(), rng: rand.New(rand.NewPCG(1, 2)), clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	limits := qshare.Capacity{benchTypes[0]: 20 * benchShares, benchTypes[1]: 4 * benchShares}
	for i := 0; i < benchEnvs; i++ {
		env := fmt.Sprintf("env%02d", i)
		q := fmt.Sprintf("queue%02d", i)
		if err := w.e.SetEnvironment(EnvironmentConfig{Name: env, Limits: limits}); err != nil {
			panic(err)
		}
		if err := w.e.SetQueue(QueueConfig{Name: q, Environment: env}); err != nil {
			panic(err)
		}
		fs := &FairShareConfig{DecaySeconds: 600, ComputeReservation: 10}
		for s := 0; s < benchShares; s++ {
			fs.Weights = append(fs.Weights, ShareWeight{Identifier: fmt.Sprintf("team%02d", s), Factor: 0.5 + 0.1*float64(s)})
		}
		if err := w.e.SetShare(ShareConfig{Queue: q, Name: QueueShare, Limits: limits, Strategy: qshare.StrategyReserve, FairShare: fs}); err != nil {
			panic(err)
		}
		for s := 0; s < benchShares; s++ {
			w.shares = append(w.shares, [2]string{q, QueueShare})
			w.idents = append(w.idents, fmt.Sprintf("team%02d", s))
		}
	}
	for i := 0; i < pending; i++ {
		w.submit(i % len(w.shares))
	}
	w.schedule()
	return w
}

// newPlanBenchWorld is the mixed installation with a capacity plan of 10
// ml.g5.xlarge on every share (1,000 plans): half of them open for the
// whole run, half opening in a day (their jobs wait aside); a quarter of
// each share's jobs of one ml.g5.xlarge type name the share's plan.
func newPlanBenchWorld(pending int) *benchWorld {
	w := newBenchWorld(0, true)
	w.plans = make([]string, len(w.shares))
	for i, sh := range w.shares {
		start := w.clock.Add(-time.Hour)
		if i%2 == 1 {
			start = w.clock.Add(24 * time.Hour)
		}
		w.plans[i] = fmt.Sprintf("plan%04d", i)
		if err := w.e.SetPlan(PlanConfig{Name: w.plans[i], Queue: sh[0], Share: sh[1], InstanceType: benchTypes[0], Count: 10,
			Start: start, End: start.Add(30 * 24 * time.Hour), Warning: 10 * time.Minute}); err != nil {
			panic(err)
		}
	}
	for i := 0; i < pending; i++ {
		w.submit(i % len(w.shares))
	}
	w.schedule()
	return w
}

// BenchmarkPlanChurn is ChurnBatch (k=1000) and ChurnOne (k=1) in the
// world with capacity plans, at 100,000 and 1,000,000 pending jobs.
func BenchmarkPlanChurn(b *testing.B) {
	for _, pending := range []int{100_000, 1_000_000} {
		for _, k := range []int{1000, 1} {
			b.Run(fmt.Sprintf("pending=%d/k=%d", pending, k), func(b *testing.B) {
				churn(b, cachedOther("plan", pending, newPlanBenchWorld), k)
			})
		}
	}
}

// BenchmarkPlanMemoryPerPendingJob is MemoryPerPendingJob in the world
// with capacity plans.
func BenchmarkPlanMemoryPerPendingJob(b *testing.B) { memoryPerPendingJob(b, newPlanBenchWorld) }

// BenchmarkFairShareChurn is ChurnBatch (k=1000) and ChurnOne (k=1) in the
// fair-share world, at 100,000 and 1,000,000 pending jobs.
func BenchmarkFairShareChurn(b *testing.B) {
	for _, pending := range []int{100_000, 1_000_000} {
		for _, k := range []int{1000, 1} {
			b.Run(fmt.Sprintf("pending=%d/k=%d", pending, k), func(b *testing.B) {
				churn(b, cachedOther("fair", pending, newFairBenchWorld), k)
			})
		}
	}
}

// otherWorld is the one world of another kind than cachedWorld's (fair
// share, capacity plans) kept for the benchmarks, as cachedWorld keeps its.
var otherWorld struct {
	kind    string
	pending int
	w       *benchWorld
}

// cachedOther builds the world of kind with pending jobs once (build makes
// it), dropping every other cached world first.
func cachedOther(kind string, pending int, build func(int) *benchWorld) *benchWorld {
	if otherWorld.w != nil && otherWorld.kind == kind && otherWorld.pending == pending {
		return otherWorld.w
	}
	clear(benchWorlds)
	otherWorld.w = nil
	runtime.GC()
	otherWorld.kind, otherWorld.pending, otherWorld.w = kind, pending, build(pending)
	return otherWorld.w
}

// BenchmarkFairShareMemoryPerPendingJob is MemoryPerPendingJob in the
// fair-share world.
func BenchmarkFairShareMemoryPerPendingJob(b *testing.B) { memoryPerPendingJob(b, newFairBenchWorld) }

// memoryPerPendingJob reports the heap that a world of 1,000,000 pending
// jobs, made by build, holds per pending job.
func memoryPerPendingJob(b *testing.B, build func(int) *benchWorld) {
	const pending = 1_000_000
	for i := 0; i < b.N; i++ {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		w := build(pending)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/pending, "bytes/pending-job")
		runtime.KeepAlive(w)
	}
	b.ReportMetric(0, "ns/op")
}

type worldKey struct {
	pending int
	mixed   bool
}

var (
	benchWorlds = map[worldKey]*benchWorld{}
	benchLast   worldKey
)

// cachedWorld builds a world once per process; the benchmarks keep it in
// steady state, so consecutive runs continue where the last one stopped.
// Only one world is kept, so that its size alone sets the heap.
func cachedWorld(pending int, mixed bool) *benchWorld {
	k := worldKey{pending, mixed}
	benchLast = k
	if w := benchWorlds[k]; w != nil {
		return w
	}
	clear(benchWorlds)
	runtime.GC()
	w := newBenchWorld(pending, mixed)
	benchWorlds[k] = w
	return w
}

func eachWorld(b *testing.B, f func(b *testing.B, w *benchWorld)) {
	for _, mixed := range []bool{false, true} {
		for _, pending := range []int{100_000, 1_000_000} {
			name := "plain"
			if mixed {
				name = "mixed"
			}
			b.Run(fmt.Sprintf("world=%s/pending=%d", name, pending), func(b *testing.B) {
				f(b, cachedWorld(pending, mixed))
			})
		}
	}
}

func reportPasses(b *testing.B, passes []passTime, starts int, cpu time.Duration) {
	wall := make([]time.Duration, len(passes))
	cpus := make([]time.Duration, len(passes))
	for i, p := range passes {
		wall[i], cpus[i] = p.wall, p.cpu
	}
	slices.Sort(wall)
	slices.Sort(cpus)
	if len(passes) > 0 {
		b.ReportMetric(float64(wall[len(wall)/2].Nanoseconds()), "p50-pass-ns")
		b.ReportMetric(float64(wall[len(wall)*99/100].Nanoseconds()), "p99-pass-ns")
		b.ReportMetric(float64(cpus[len(cpus)/2].Nanoseconds()), "p50-pass-cpu-ns")
		b.ReportMetric(float64(cpus[len(cpus)*99/100].Nanoseconds()), "p99-pass-cpu-ns")
	}
	if cpu > 0 {
		b.ReportMetric(float64(starts)/cpu.Seconds(), "admissions/cpu-s")
	}
	b.ReportMetric(float64(starts)/float64(b.N), "starts/op")
	if w := benchWorlds[benchLast]; w != nil {
		st := w.e.Stats()
		b.ReportMetric(float64(st.Preempts)/float64(st.Passes), "preempts/pass")
		b.ReportMetric(float64(st.Decisions-st.Starts-st.Preempts)/float64(st.Passes), "waits/pass")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkChurnOne: at steady state, each step finishes one running job,
// submits one job and runs a pass (the daemon's loop under a trickle of
// events). The pass sees one dirty environment.
func BenchmarkChurnOne(b *testing.B) {
	eachWorld(b, func(b *testing.B, w *benchWorld) { churn(b, w, 1) })
}

// BenchmarkChurnBatch: each step finishes 1,000 running jobs across all
// environments, submits 1,000 and runs one pass; admissions/cpu-s is the
// steady-state throughput.
func BenchmarkChurnBatch(b *testing.B) {
	eachWorld(b, func(b *testing.B, w *benchWorld) { churn(b, w, 1000) })
}

// churn runs b.N steps of k finishes, k submits and one pass. The CPU time
// counted is that of the engine calls (ReleaseMany, SubmitMany, Schedule, and Release of preempted jobs), the
// garbage collection they cause included; choosing jobs, building their
// specs and the harness's bookkeeping of decisions are left out.
func churn(b *testing.B, w *benchWorld, k int) {
	passes := make([]passTime, 0, b.N)
	starts := 0
	ids := make([]string, k)
	specs := make([]JobSpec, k)
	var cpu time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for x := range k {
			ids[x] = w.running.RemoveAt(w.rng.IntN(w.running.Len()))
			specs[x] = w.spec(w.rng.IntN(len(w.shares)))
		}
		c0, h0 := processCPU(), w.harness
		// The finished jobs are released in one call, and the new ones
		// submitted in one, as the simulator does with the jobs that
		// finish or arrive at one instant.
		if _, err := w.e.ReleaseMany(ids, false); err != nil {
			panic(err)
		}
		if _, err := w.e.SubmitMany(specs); err != nil {
			panic(err)
		}
		n, d := w.schedule()
		cpu += processCPU() - c0 - (w.harness - h0)
		starts += n
		passes = append(passes, d)
	}
	b.StopTimer()
	reportPasses(b, passes, starts, cpu)
}

// BenchmarkReclaim: in every environment, borrowers hold all capacity; a
// burst of jobs arrives in the lending shares and one pass decides every
// reclaim. Reported per pass: latency and preemptions.
func BenchmarkReclaim(b *testing.B) {
	var passes []time.Duration
	preempts := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := New()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		n := 0
		for v := 0; v < benchEnvs; v++ {
			env, q := fmt.Sprintf("env%02d", v), fmt.Sprintf("queue%02d", v)
			_ = e.SetEnvironment(EnvironmentConfig{Name: env, Limits: qshare.Capacity{benchTypes[0]: 20 * benchShares}})
			_ = e.SetQueue(QueueConfig{Name: q, Environment: env})
			for s := 0; s < benchShares; s++ {
				st := qshare.StrategyLend
				if s < 2 {
					st = qshare.StrategyLendAndBorrow
				}
				_ = e.SetShare(ShareConfig{Queue: q, Name: fmt.Sprintf("share%02d", s), Limits: qshare.Capacity{benchTypes[0]: 20}, Strategy: st, BorrowLimit: -1})
			}
			// Two borrowers fill the environment with one-instance jobs.
			for k := 0; k < 20*benchShares; k++ {
				n++
				_ = e.Submit(JobSpec{ID: fmt.Sprintf("b%d", n), Queue: q, Share: fmt.Sprintf("share%02d", k%2), Priority: k % 10, Created: clock.Add(time.Duration(n)), Demand: qshare.Capacity{benchTypes[0]: 1}, PreemptionRetries: -1})
			}
		}
		e.Schedule(clock)
		// Every lender wants 10 instances back, in jobs of 1 to 3.
		for v := 0; v < benchEnvs; v++ {
			q := fmt.Sprintf("queue%02d", v)
			for s := 2; s < benchShares; s++ {
				for k := 0; k < 5; k++ {
					n++
					_ = e.Submit(JobSpec{ID: fmt.Sprintf("l%d", n), Queue: q, Share: fmt.Sprintf("share%02d", s), Created: clock.Add(time.Duration(n)), Demand: qshare.Capacity{benchTypes[0]: int64(1 + k%3)}, PreemptionRetries: -1})
				}
			}
		}
		b.StartTimer()
		t0 := time.Now()
		ds := e.Schedule(clock.Add(time.Second))
		passes = append(passes, time.Since(t0))
		for _, d := range ds {
			if d.Kind == DecisionPreempt {
				preempts++
			}
		}
	}
	slices.Sort(passes)
	b.ReportMetric(float64(passes[len(passes)/2].Nanoseconds()), "p50-pass-ns")
	b.ReportMetric(float64(preempts)/float64(b.N), "preemptions/pass")
	var total time.Duration
	for _, p := range passes {
		total += p
	}
	b.ReportMetric(float64(preempts)/total.Seconds(), "preemptions/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMemoryPerPendingJob measures the heap the engine holds per
// RUNNABLE job (IDs of 11 bytes, one or two instance types).
func BenchmarkMemoryPerPendingJob(b *testing.B) {
	memoryPerPendingJob(b, func(pending int) *benchWorld { return newBenchWorld(pending, false) })
}

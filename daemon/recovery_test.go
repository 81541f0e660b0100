package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/sqlite"
)

// blockingExecutor holds every Start until the context ends, so that a
// daemon closed meanwhile leaves the attempt STARTING in the store.
type blockingExecutor struct {
	executor.Executor
	started chan string
}

func (e *blockingExecutor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	e.started <- s.AttemptID
	<-ctx.Done()
	return executor.Handle{}, ctx.Err()
}

type instance struct {
	d  *daemon.Daemon
	db *sqlite.DB
	ex executor.Executor
}

func open(t *testing.T, dir string, ex executor.Executor) *instance {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "q.db"))
	must(t, err)
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond})
	must(t, err)
	must(t, d.Start(context.Background()))
	return &instance{d, db, ex}
}

// openSetUp opens a daemon with the simulated executor in a new directory,
// closed when t ends, and gives it setup's queue of capacity 1.
func openSetUp(t *testing.T) *daemon.Daemon {
	t.Helper()
	a := open(t, t.TempDir(), simulated.New(simulated.Options{}))
	t.Cleanup(a.close)
	setup(t, a.d, 1, false)
	return a.d
}

func (i *instance) close() {
	i.d.Close()
	i.ex.Close()
	i.db.Close()
}

// setupQueue creates the FIFO policy p, the environment e of capacity
// ml.g5.xlarge and the queue q on it.
func setupQueue(t *testing.T, d *daemon.Daemon, capacity int64) {
	t.Helper()
	ctx := context.Background()
	_, err := d.CreatePolicy(ctx, daemon.PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	must(t, err)
	_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: capacity}}})
	must(t, err)
	_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: "q", SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}})
	must(t, err)
}

// setup creates queue q of capacity ml.g5.xlarge (see setupQueue) with
// the one RESERVE share A of all of it.
func setup(t *testing.T, d *daemon.Daemon, capacity int64, inShare bool) {
	t.Helper()
	setupQueue(t, d, capacity)
	pre := qshare.Disabled
	if inShare {
		pre = qshare.Enabled
	}
	_, err := d.CreateShare(context.Background(), daemon.ShareInput{Name: "A", Queue: "q", Strategy: qshare.StrategyReserve, InSharePreemption: pre,
		CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: capacity}}})
	must(t, err)
}

func submit(t *testing.T, d *daemon.Daemon, name string, prio int64, env string) string {
	t.Helper()
	j, err := d.Submit(context.Background(), daemon.SubmitInput{Name: name, Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		Payload: fmt.Sprintf(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{%s}}`, env)})
	must(t, err)
	return j.ID
}

func waitFor(t *testing.T, d *daemon.Daemon, id string, ok func(*qshare.Job) bool, what string) *qshare.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := d.Job(id)
		must(t, err)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %s %q, want %s", j.Name, j.Status, j.StatusReason, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// beforeRestart is a server's first life over dir, with the queue of
// setup (one instance): it runs one job per environment in order (each
// but the last to its success, the last until it is RUNNING), closes the
// server and returns the jobs as they were then.
func beforeRestart(t *testing.T, dir string, envs ...string) []*qshare.Job {
	t.Helper()
	a := open(t, dir, simulated.New(simulated.Options{}))
	defer a.close()
	setup(t, a.d, 1, false)
	var jobs []*qshare.Job
	for n, env := range envs {
		id := submit(t, a.d, fmt.Sprintf("j%d", n), 0, env)
		want := qshare.JobSucceeded
		if n == len(envs)-1 {
			want = qshare.JobRunning
		}
		jobs = append(jobs, waitFor(t, a.d, id, status(want), string(want)))
	}
	return jobs
}

func status(s qshare.JobStatus) func(*qshare.Job) bool {
	return func(j *qshare.Job) bool { return j.Status == s }
}

// TestRecoverStarting: an attempt left STARTING by a stop is started again
// with the same attempt ID (Start adopts what was launched), not declared
// lost and run a second time under a new attempt.
func TestRecoverStarting(t *testing.T) {
	dir := t.TempDir()
	block := &blockingExecutor{Executor: simulated.New(simulated.Options{}), started: make(chan string, 1)}
	a := open(t, dir, block)
	setup(t, a.d, 1, false)
	id := submit(t, a.d, "j", 0, `"QSHARE_SIM_DURATION":"20ms"`)
	attempt := <-block.started
	waitFor(t, a.d, id, status(qshare.JobStarting), "STARTING")
	a.close()

	b := open(t, dir, simulated.New(simulated.Options{}))
	defer b.close()
	j := waitFor(t, b.d, id, status(qshare.JobSucceeded), "SUCCEEDED")
	if len(j.Attempts) != 1 || j.Attempts[0].ID != attempt {
		t.Fatalf("attempts after recovery: %+v, want the one attempt %s", j.Attempts, attempt)
	}
}

// TestRecoverPreemption: a preemption decided before a stop, whose attempt
// had not stopped yet, is carried out after the restart and recorded as a
// preemption (the job returns to RUNNABLE, and runs again), even though the
// job it made room for is gone, so the engine would not decide it again.
func TestRecoverPreemption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir, simulated.New(simulated.Options{}))
	setup(t, a.d, 1, true)
	// The victim ignores SIGTERM for 300ms, so its stop outlives the server.
	one := int64(1)
	lj, err := a.d.Submit(context.Background(), daemon.SubmitInput{Name: "low", Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING",
		PreemptionRetries: &one, Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"1h","QSHARE_SIM_ON_STOP":"ignore","QSHARE_STOP_GRACE":"300ms"}}`})
	must(t, err)
	low := lj.ID
	waitFor(t, a.d, low, status(qshare.JobRunning), "RUNNING")
	high := submit(t, a.d, "high", 5, `"QSHARE_SIM_DURATION":"1h"`)
	waitFor(t, a.d, low, func(j *qshare.Job) bool {
		return strings.HasPrefix(j.LatestAttempt().StatusReason, "Preempted by quota management")
	}, "a preemption decided")
	must(t, a.d.Terminate(context.Background(), high, "changed my mind"))
	a.close()

	b := open(t, dir, simulated.New(simulated.Options{}))
	defer b.close()
	j := waitFor(t, b.d, low, func(j *qshare.Job) bool { return len(j.Attempts) == 2 && j.Status == qshare.JobRunning }, "RUNNING its second attempt")
	if j.Preemptions != 1 || !j.Attempts[0].Preempted || j.FailedAttempts != 0 || j.Attempts[0].StoppedAt.IsZero() {
		t.Fatalf("victim after restart: preemptions %d, first attempt %+v, failed attempts %d", j.Preemptions, j.Attempts[0], j.FailedAttempts)
	}
	// The engine counts the recovered preemption: with one preemption retry,
	// the next preemption is the last.
	submit(t, b.d, "high2", 5, `"QSHARE_SIM_DURATION":"1h"`)
	j = waitFor(t, b.d, low, status(qshare.JobFailed), "FAILED at its second preemption")
	if j.Preemptions != 2 || !strings.Contains(j.StatusReason, "no preemption retries left") {
		t.Fatalf("victim: %d preemptions, reason %q", j.Preemptions, j.StatusReason)
	}
}

// flakyRecover fails its first Recover, as an executor that cannot answer
// yet (its supervisor still starting, say) would.
type flakyRecover struct {
	executor.Executor
	failed bool
}

func (e *flakyRecover) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	if !e.failed {
		e.failed = true
		return 0, fmt.Errorf("supervisor not answering yet")
	}
	return e.Executor.Recover(ctx, h)
}

// TestRecoverRetriesOnError: when the executor cannot say what became of a
// running attempt, the job keeps its capacity and recovery is retried; it is
// not requeued beside an attempt that may still run.
func TestRecoverRetriesOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := beforeRestart(t, dir, `"QSHARE_SIM_DURATION":"1500ms"`)[0].ID

	b := open(t, dir, &flakyRecover{Executor: simulated.New(simulated.Options{})})
	defer b.close()
	other := submit(t, b.d, "other", 0, `"QSHARE_SIM_DURATION":"10ms"`)
	j := waitFor(t, b.d, id, status(qshare.JobSucceeded), "SUCCEEDED")
	if len(j.Attempts) != 1 {
		t.Fatalf("attempts after a failed recovery: %+v, want the one attempt, re-attached", j.Attempts)
	}
	// The recovered job held the only instance until it ended.
	o := waitFor(t, b.d, other, status(qshare.JobSucceeded), "SUCCEEDED")
	if o.ScheduledAt.Before(j.StoppedAt) {
		t.Fatalf("other job was scheduled at %v, before the recovered job stopped at %v", o.ScheduledAt, j.StoppedAt)
	}
}

// reportingExecutor is the simulated executor with the optional reports
// of an executor that runs attempts through a scheduler of its own: the
// test sets what it reports, as Slurm's squeue would.
type reportingExecutor struct {
	executor.Executor
	mu       sync.Mutex
	pending  map[string]string // attempt ID → reason
	health   string
	keeps    []map[string]bool // the keep sets Sweep was called with
	lives    []map[string]bool // the live sets SweepJobs was called with
	failJobs int               // SweepJobs fails this many calls first
}

func (e *reportingExecutor) PendingReason(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pending[id]
}

func (e *reportingExecutor) Health() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health
}

func (e *reportingExecutor) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keeps = append(e.keeps, keep)
	return nil, nil
}

func (e *reportingExecutor) SweepJobs(ctx context.Context, live map[string]bool) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lives = append(e.lives, live)
	if e.failJobs > 0 {
		e.failJobs--
		return nil, errors.New("the API server does not answer")
	}
	return nil, nil
}

func (e *reportingExecutor) set(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
}

var (
	_ executor.PendingReasoner = (*reportingExecutor)(nil)
	_ executor.HealthReporter  = (*reportingExecutor)(nil)
	_ executor.Sweeper         = (*reportingExecutor)(nil)
	_ executor.JobSweeper      = (*reportingExecutor)(nil)
)

func newReporting() *reportingExecutor {
	return &reportingExecutor{Executor: simulated.New(simulated.Options{}), pending: map[string]string{}}
}

// TestPendingReasonInStatusReason: while the executor says a started
// attempt waits in its scheduler, the RUNNING job's statusReason says why;
// once it runs, the reason says so again.
func TestPendingReasonInStatusReason(t *testing.T) {
	ex := newReporting()
	i := open(t, t.TempDir(), ex)
	defer i.close()
	setup(t, i.d, 1, false)
	id := submit(t, i.d, "j", 0, `"QSHARE_SIM_DURATION":"1h"`)
	j := waitFor(t, i.d, id, status(qshare.JobRunning), "RUNNING")
	attempt := j.LatestAttempt().ID
	ex.set(func() { ex.pending[attempt] = "Resources" })
	waitFor(t, i.d, id, func(j *qshare.Job) bool {
		return j.Status == qshare.JobRunning && j.StatusReason == "Attempt 1 waits to run in simulated: Resources"
	}, "RUNNING, waiting for Resources")
	ex.set(func() { delete(ex.pending, attempt) })
	waitFor(t, i.d, id, func(j *qshare.Job) bool { return j.StatusReason == "Attempt 1 is running" }, "running again")
	// A stop's reason is not overwritten by a pending one.
	ex.set(func() { ex.pending[attempt] = "Priority" })
	if err := i.d.Terminate(context.Background(), id, "enough"); err != nil {
		t.Fatal(err)
	}
	j = waitFor(t, i.d, id, status(qshare.JobFailed), "FAILED")
	if j.StatusReason != "enough" {
		t.Errorf("terminated job's reason = %q, want the termination's", j.StatusReason)
	}
}

// versionedExecutor is reportingExecutor that says when its pending
// reasons change (executor.PendingReasonsVersioner), and counts the calls
// of PendingReason.
type versionedExecutor struct {
	*reportingExecutor
	version atomic.Uint64
	calls   atomic.Int64
}

func (e *versionedExecutor) PendingReason(id string) string {
	e.calls.Add(1)
	return e.reportingExecutor.PendingReason(id)
}

func (e *versionedExecutor) PendingReasonsVersion() uint64 { return e.version.Load() }

var _ executor.PendingReasonsVersioner = (*versionedExecutor)(nil)

// TestPendingReasonsOnlyOnChange: with an executor that says when its
// pending reasons change, the daemon asks for a running attempt's reason
// once it runs and again only after a change, not on every cycle (which
// cost 8% of qshare's CPU with thousands of attempts running); and the
// change still reaches the job's statusReason.
func TestPendingReasonsOnlyOnChange(t *testing.T) {
	t.Parallel()
	ex := &versionedExecutor{reportingExecutor: newReporting()}
	i := open(t, t.TempDir(), ex)
	defer i.close()
	setup(t, i.d, 1, false)
	id := submit(t, i.d, "j", 0, `"QSHARE_SIM_DURATION":"1h"`)
	j := waitFor(t, i.d, id, func(j *qshare.Job) bool {
		return j.Status == qshare.JobRunning && j.StatusReason == "Attempt 1 is running"
	}, "RUNNING")
	attempt := j.LatestAttempt().ID
	for range 3 { // cycles: the queued jobs wait for the one instance
		submit(t, i.d, "queued", 0, `"QSHARE_SIM_DURATION":"1h"`)
		time.Sleep(100 * time.Millisecond)
	}
	if n := ex.calls.Load(); n != 1 {
		t.Errorf("PendingReason called %d times for one running attempt and no change, want 1", n)
	}
	ex.set(func() { ex.pending[attempt] = "Resources" })
	ex.version.Add(1)
	waitFor(t, i.d, id, func(j *qshare.Job) bool {
		return j.StatusReason == "Attempt 1 waits to run in simulated: Resources"
	}, "RUNNING, waiting for Resources")
	if n := ex.calls.Load(); n != 2 {
		t.Errorf("PendingReason called %d times after one change, want 2", n)
	}
}

// TestHealthInEnvironmentReason: while the executor reports trouble, every
// environment's statusReason leads with it; once it is gone, so is the
// text, and nothing of it was stored.
func TestHealthInEnvironmentReason(t *testing.T) {
	ex := newReporting()
	i := open(t, t.TempDir(), ex)
	defer i.close()
	setupQueue(t, i.d, 1)
	reason := func() string {
		es, err := i.d.Environments(nil)
		must(t, err)
		return es[0].StatusReason
	}
	if r := reason(); r != "" {
		t.Fatalf("statusReason of a healthy environment = %q", r)
	}
	ex.set(func() { ex.health = "slurmctld does not answer" })
	if r := reason(); !strings.HasPrefix(r, "slurmctld does not answer") {
		t.Errorf("statusReason while the executor is in trouble = %q", r)
	}
	ex.set(func() { ex.health = "" })
	if r := reason(); r != "" {
		t.Errorf("statusReason once the trouble is over = %q", r)
	}
}

// TestSweepAtRecovery: after a restart the daemon asks the executor, once,
// to end what it runs for attempts the store does not hold, naming the
// attempts of every unfinished job and of no finished one.
func TestSweepAtRecovery(t *testing.T) {
	dir := t.TempDir()
	jobs := beforeRestart(t, dir, `"QSHARE_SIM_DURATION":"10ms"`, `"QSHARE_SIM_DURATION":"1h"`)
	ex := newReporting()
	b := open(t, dir, ex)
	defer b.close()
	var keeps []map[string]bool
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(keeps) == 0; time.Sleep(5 * time.Millisecond) {
		ex.set(func() { keeps = ex.keeps })
	}
	if len(keeps) != 1 {
		t.Fatalf("Sweep was called %d times, want once", len(keeps))
	}
	if want := jobs[1].LatestAttempt().ID; len(keeps[0]) != 1 || !keeps[0][want] {
		t.Errorf("Sweep kept %v, want only the running job's attempt %s", keeps[0], want)
	}
}

// TestSweepJobsAtRecovery: after a restart the daemon asks the executor to
// release what it keeps for jobs that are not unfinished in the store,
// naming every unfinished job (a queued one too, which has no attempt but
// may have a claim from an attempt preempted before the restart) and no
// finished one, and asks again, with the same set, while it fails.
func TestSweepJobsAtRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir, simulated.New(simulated.Options{}))
	setup(t, a.d, 1, false)
	var jobs []*qshare.Job
	for n, want := range []qshare.JobStatus{qshare.JobSucceeded, qshare.JobRunning, qshare.JobRunnable} {
		env := `"QSHARE_SIM_DURATION":"1h"`
		if n == 0 {
			env = `"QSHARE_SIM_DURATION":"10ms"`
		}
		id := submit(t, a.d, fmt.Sprintf("j%d", n), 0, env)
		jobs = append(jobs, waitFor(t, a.d, id, status(want), string(want)))
	}
	a.close()
	ex := newReporting()
	ex.failJobs = 1
	b := open(t, dir, ex)
	defer b.close()
	var lives []map[string]bool
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(lives) < 2; time.Sleep(5 * time.Millisecond) {
		ex.set(func() { lives = ex.lives })
	}
	if len(lives) != 2 {
		t.Fatalf("SweepJobs was called %d times (the first failing), want twice", len(lives))
	}
	for _, live := range lives {
		if len(live) != 2 || !live[jobs[1].ID] || !live[jobs[2].ID] || live[jobs[0].ID] {
			t.Errorf("SweepJobs was given %v, want the unfinished jobs %s and %s", live, jobs[1].ID, jobs[2].ID)
		}
	}
}

// endedAtRecovery is the simulated executor whose Recover answers the
// first attempt it is asked about as Exited, whose Wait then returns at
// once, and every later one, after a pause, as Lost: so the first
// attempt's end is posted to the loop from its own goroutine while the
// daemon is still recovering the others.
type endedAtRecovery struct {
	executor.Executor
	calls atomic.Int32
	first atomic.Value // the attempt ID answered Exited
}

func (e *endedAtRecovery) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	if e.calls.Add(1) == 1 {
		e.first.Store(h.AttemptID)
		return executor.Exited, nil
	}
	time.Sleep(50 * time.Millisecond) // the first one's Wait has returned by now
	return executor.Lost, nil
}

func (e *endedAtRecovery) Wait(ctx context.Context, id string) (executor.Exit, error) {
	if v, _ := e.first.Load().(string); v == id {
		return executor.Exit{AttemptID: id, ExitCode: 0, At: time.Now()}, nil
	}
	return e.Executor.Wait(ctx, id)
}

// TestRecoverWhileAttemptsEnd: what recovery hands the loop (here, the
// lost attempts' requeue) is not lost to an attempt that ends while the
// others are still being recovered, which reports its end from a
// goroutine of its own. Under the race detector (.ci/run runs this
// package with -race) the recovery's appends to the loop's inbox, made
// without its lock, were a race with those reports; without it, an op
// could be lost, and a job stay STARTING for good (test/fault's 10
// failovers, once, 7 December 2026).
func TestRecoverWhileAttemptsEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir, simulated.New(simulated.Options{}))
	setup(t, a.d, 3, false)
	var ids []string
	for n := range 3 {
		ids = append(ids, submit(t, a.d, fmt.Sprintf("j%d", n), 0, `"QSHARE_SIM_DURATION":"1h"`))
	}
	for _, id := range ids {
		waitFor(t, a.d, id, status(qshare.JobRunning), "RUNNING")
	}
	a.close()

	ex := &endedAtRecovery{Executor: simulated.New(simulated.Options{})}
	b := open(t, dir, ex)
	defer b.close()
	for _, id := range ids {
		j := waitFor(t, b.d, id, func(j *qshare.Job) bool { return j.Status.Terminal() || len(j.Attempts) == 2 }, "ended, or requeued to a second attempt")
		if v, _ := ex.first.Load().(string); j.Attempts[0].ID == v {
			if j.Status != qshare.JobSucceeded || len(j.Attempts) != 1 {
				t.Errorf("%s, whose attempt had ended: %s with %d attempts, want SUCCEEDED with 1", j.Name, j.Status, len(j.Attempts))
			}
		} else if len(j.Attempts) != 2 {
			t.Errorf("%s, whose attempt was lost: %s with %d attempts, want a second attempt", j.Name, j.Status, len(j.Attempts))
		}
	}
}

package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// heldStore is a real SQLite store whose loop commits (those that put a
// job version after the submit's) can be held back until released, and
// that records what each commit put and which versions are durable (their
// commit has returned).
type heldStore struct {
	*sqlite.DB
	gate    storetest.Gate
	entered chan struct{} // a loop commit waits at the gate
	mu      sync.Mutex    // guards commits and durable
	commits [][]qshare.Job
	durable map[string]int64 // job ID -> highest version whose commit returned
}

func newHeldStore(t *testing.T) *heldStore {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	return &heldStore{DB: db, entered: make(chan struct{}, 16), durable: map[string]int64{}}
}

func (s *heldStore) hold()    { s.gate.Hold() }
func (s *heldStore) release() { s.gate.Release() }

func (s *heldStore) Commit(ctx context.Context, c *store.Change) error {
	loop := false
	for _, j := range c.PutJobs {
		loop = loop || j.Version > 1
	}
	if loop {
		if err := s.gate.Pass(ctx, func() { s.entered <- struct{}{} }); err != nil {
			return err
		}
	}
	if err := s.DB.Commit(ctx, c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, append([]qshare.Job(nil), c.PutJobs...))
	for _, j := range c.PutJobs {
		if j.Version > s.durable[j.ID] {
			s.durable[j.ID] = j.Version
		}
	}
	return nil
}

func (s *heldStore) durableVersion(id string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable[id]
}

// watchingExecutor is the simulated executor; it records every Start made
// before the store's record of the job says STARTING.
type watchingExecutor struct {
	*simulated.Executor
	st       *heldStore
	starts   atomic.Int64
	tooEarly atomic.Value // string
}

func (x *watchingExecutor) Start(ctx context.Context, spec executor.Spec) (executor.Handle, error) {
	x.starts.Add(1)
	x.st.mu.Lock()
	var last *qshare.Job
	for _, c := range x.st.commits {
		for i := range c {
			if c[i].ID == spec.JobID {
				last = &c[i]
			}
		}
	}
	x.st.mu.Unlock()
	if last == nil || last.Status != qshare.JobStarting {
		x.tooEarly.Store(fmt.Sprintf("Start of %s before STARTING was durable (durable: %+v)", spec.AttemptID, last))
	}
	return x.Executor.Start(ctx, spec)
}

func startHeld(t *testing.T) (*Daemon, *heldStore, *watchingExecutor) {
	t.Helper()
	st := newHeldStore(t)
	ex := &watchingExecutor{Executor: simulated.New(simulated.Options{}), st: st}
	d, stop := startDaemon(t, st, ex)
	t.Cleanup(func() {
		st.release()
		stop()
	})
	waitShareStatus(t, d, createReserved(t, d, 4, 4).ARN, qshare.StatusValid)
	return d, st, ex
}

func submitSim(t *testing.T, d *Daemon, name, duration string) *qshare.Job {
	t.Helper()
	j, err := d.Submit(context.Background(), SubmitInput{Name: name, Queue: "q", QuotaShare: "A", ServiceJobType: serviceTypeSageMaker,
		Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"` + duration + `"}}`})
	mustNil(t, err)
	return j
}

// runFirst submits a job of an hour and waits until it runs: a job whose
// tags the tests change to hold the committer.
// holdTagChange holds the store and tags the first job: the change's
// commit then waits in the store until st.release. It returns the tag
// change's answer, which comes once its commit has returned.
func holdTagChange(d *Daemon, st *heldStore, first *qshare.Job) <-chan error {
	st.hold()
	tagged := make(chan error, 1)
	go func() { tagged <- d.TagResource(context.Background(), first.ARN, map[string]string{"k": "v"}) }()
	<-st.entered
	return tagged
}

// startAheadOfStore submits a second job while the store is held, and
// waits until the loop has made it STARTING ahead of the store.
func startAheadOfStore(t *testing.T, d *Daemon) *qshare.Job {
	t.Helper()
	second := submitSim(t, d, "second", "1h")
	waitFor(t, "the loop to make the second job STARTING ahead of the store", func() bool {
		d.mu.RLock()
		defer d.mu.RUnlock()
		j := d.inflight[second.ID]
		return j != nil && j.Status == qshare.JobStarting
	})
	return second
}

func runFirst(t *testing.T, d *Daemon) *qshare.Job {
	t.Helper()
	first := submitSim(t, d, "first", "1h")
	waitFor(t, "the first job to run", func() bool {
		j, _ := d.Job(first.ID)
		return j.Status == qshare.JobRunning
	})
	return first
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPipelinedCommit holds the committer in a commit (a tag change) while
// a job is submitted: the loop goes on without it, making the job
// SCHEDULED and then STARTING in two cycles, which reach the store as one
// row in one commit once the store is released. Meanwhile the tag command
// is not answered, the API reads show only durable versions, and the
// executor is not asked to start the job before STARTING is durable.
func TestPipelinedCommit(t *testing.T) {
	d, st, ex := startHeld(t)
	first := runFirst(t, d)

	// Every API read of a job sees a durable version, all along.
	stop := make(chan struct{})
	var readerDone sync.WaitGroup
	var undurable atomic.Value
	readerDone.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			d.mu.RLock()
			ids := make([]string, 0, len(d.jobs))
			for id := range d.jobs {
				ids = append(ids, id)
			}
			d.mu.RUnlock()
			for _, id := range ids {
				j, err := d.Job(id)
				if err == nil && j.Version > st.durableVersion(id) {
					undurable.Store(fmt.Sprintf("job %s shown at version %d (%s), durable is %d", id, j.Version, j.Status, st.durableVersion(id)))
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	})

	tagged := holdTagChange(d, st, first)
	second := startAheadOfStore(t, d)
	select {
	case err := <-tagged:
		t.Fatalf("TagResource answered (%v) before its commit returned", err)
	case <-time.After(20 * time.Millisecond):
	}
	if j, _ := d.Job(second.ID); j.Status != qshare.JobRunnable || j.Version != 1 {
		t.Fatalf("Describe shows the second job %s v%d while nothing of the loop's is durable, want RUNNABLE v1", j.Status, j.Version)
	}
	if j, _ := d.Job(first.ID); j.Tags["k"] != "" {
		t.Fatal("Describe shows the tag before its commit returned")
	}
	if n := ex.starts.Load(); n != 1 {
		t.Fatalf("%d Start calls while the store is held, want 1 (the first job's)", n)
	}

	st.release()
	mustNil(t, <-tagged)
	if st.durableVersion(first.ID) == 0 {
		t.Fatal("TagResource returned without its commit")
	}
	waitFor(t, "the second job to run", func() bool {
		j, _ := d.Job(second.ID)
		return j.Status == qshare.JobRunning
	})
	close(stop)
	readerDone.Wait()
	if v := undurable.Load(); v != nil {
		t.Fatal(v)
	}
	if v := ex.tooEarly.Load(); v != nil {
		t.Fatal(v)
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	var rows []string
	for i, c := range st.commits {
		for _, j := range c {
			if j.ID == second.ID {
				rows = append(rows, fmt.Sprintf("commit %d: v%d %s", i, j.Version, j.Status))
			}
		}
	}
	want := []string{"v1 RUNNABLE", "v3 STARTING", "v4 RUNNING"}
	if len(rows) != len(want) {
		t.Fatalf("the second job's rows: %q, want %q (SCHEDULED and STARTING in one commit, one row)", rows, want)
	}
	for i := range want {
		if got := rows[i][len(rows[i])-len(want[i]):]; got != want[i] {
			t.Fatalf("the second job's rows: %q, want %q", rows, want)
		}
	}
}

// TestShutdownWithQueuedCycles closes the daemon while the committer is
// held in a commit and the loop has queued more behind it: the waiting
// command is answered with the shutdown error, and the executor is never
// asked to start what was not made durable.
func TestShutdownWithQueuedCycles(t *testing.T) {
	d, st, ex := startHeld(t)
	ctx := context.Background()
	first := runFirst(t, d)
	holdTagChange(d, st, first)
	second := startAheadOfStore(t, d)
	prio := make(chan error, 1)
	go func() {
		_, err := d.UpdatePriority(ctx, second.ID, 5)
		prio <- err
	}()
	waitFor(t, "the priority change to be queued", func() bool {
		d.mu.RLock()
		defer d.mu.RUnlock()
		j := d.inflight[second.ID]
		return j != nil && j.Priority == 5
	})
	mustNil(t, d.Close())
	if err := <-prio; err == nil || qshare.ErrorMessageOf(err) != "the server is shutting down; retry the request" {
		t.Fatalf("UpdatePriority at shutdown: %v, want the shutdown error", err)
	}
	if n := ex.starts.Load(); n != 1 {
		t.Fatalf("%d Start calls, want 1: the second job's STARTING was never durable", n)
	}
	if v := st.durableVersion(second.ID); v != 1 {
		t.Fatalf("the second job is durable at version %d, want 1", v)
	}
}

// TestLoopWaitsForCommitter holds the committer in a commit while jobs keep
// arriving: the loop runs at most maxQueuedCycles cycles ahead (it then
// waits, leaving the rest in its inbox), and everything goes through once
// the store is released.
func TestLoopWaitsForCommitter(t *testing.T) {
	d, st, _ := startHeld(t)
	first := runFirst(t, d)
	tagged := holdTagChange(d, st, first)
	var jobs []*qshare.Job
	for i := 0; i < 30; i++ {
		jobs = append(jobs, submitSim(t, d, fmt.Sprintf("j%d", i), "1ms"))
		time.Sleep(time.Millisecond) // one cycle each, as far as the loop may run
		d.cmu.Lock()
		n := len(d.cq)
		d.cmu.Unlock()
		if n > maxQueuedCycles+1 {
			t.Fatalf("%d cycles queued behind a held commit, want at most %d", n, maxQueuedCycles+1)
		}
	}
	waitFor(t, "the loop to wait for the committer", func() bool {
		d.cmu.Lock()
		defer d.cmu.Unlock()
		return len(d.cq) > maxQueuedCycles
	})
	d.mu.RLock()
	waiting := len(d.inbox)
	d.mu.RUnlock()
	if waiting == 0 {
		t.Fatal("the loop's inbox is empty while it waits for the committer: it ran further ahead")
	}
	st.release()
	mustNil(t, <-tagged)
	for _, j := range jobs {
		waitFor(t, "job "+j.Name+" to end", func() bool {
			j, _ := d.Job(j.ID)
			return j.Status.Terminal()
		})
	}
}

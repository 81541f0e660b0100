// Package storetest is the conformance suite for store.Store: every backend
// (sqlite/, later postgres/) runs Run from its own tests, so that the daemon
// can rely on one contract whichever store it is given.
//
// The suite compares each store with a small in-memory model of the
// contract (model.go) after every step, using records with every field set.
// It also checks exclusive ownership (exclusive.go), with a child process
// that it kills, and, for a store that keeps the event log, the event sink
// contract (eventsink.go, which event.File passes too).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/store"
)

// Run runs the conformance suite against one store backend.
//
// newLocation returns the location of new, empty storage for one test: a
// file path, a URL, a database name, whatever open understands. Each subtest
// calls it once (t.TempDir is the place for files).
//
// open opens the storage at a location. The suite calls it several times
// with one location: to reopen storage after Close (durability), and, while
// a store on that location is still open, to check exclusive ownership: that
// second open must fail with an error that wraps store.ErrLocked, and must
// succeed again once the first store is closed, or once a child process
// holding it has been killed (the suite starts the test binary again, with
// the location in an environment variable, to run that child). The suite
// closes every store it opens; on error open must return a nil Store.
//
// When the store implements store.EventSink, the suite also runs
// RunEventSink on it.
func Run(t *testing.T, newLocation func(t *testing.T) string, open func(ctx context.Context, location string) (store.Store, error)) {
	if holdChild(t, open) {
		return
	}
	t.Run("Fixtures", testFixtures)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"Empty", testEmpty},
		{"RoundTrip", testRoundTrip},
		{"SparseRecords", testSparse},
		{"NilAndEmpty", testNilAndEmpty},
		{"ReplaceOnPut", testReplace},
		{"JobVersion", testJobVersion},
		{"Delete", testDelete},
		{"PutThenDeleteInOneChange", testPutThenDelete},
		{"SharesKeyedByQueue", testShareKeys},
		{"EmptyChange", testEmptyChange},
		{"Atomicity", testAtomicity},
		{"LoadOrder", testLoadOrder},
		{"ConcurrentCommits", testConcurrent},
		{"Reopen", testReopen},
		{"Closed", testClosed},
		{"Exclusive", testExclusive},
		{"ExclusiveAfterCrash", testExclusiveAfterCrash},
		{"LargeChange", testLarge},
		{"RetentionDeletes", testRetentionDeletes},
		{"CancelledContext", testCancelled},
		{"DeadlinesTellTheTruth", testDeadlines},
		{"CallerMayReuseChange", testReuse},
		{"RandomChanges", testRandom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &harness{t: t, openFn: open, loc: newLocation(t), m: newModel()}
			h.s = h.open()
			tc.fn(t, h)
		})
	}
	t.Run("EventSink", func(t *testing.T) {
		loc := newLocation(t)
		s := mustOpen(t, open, loc)
		_, ok := s.(store.EventSink)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !ok {
			t.Skip("the store keeps no event log (it does not implement store.EventSink)")
		}
		RunEventSink(t, newLocation, func(location string) (store.EventSink, func() error, error) {
			s, err := open(context.Background(), location)
			if err != nil {
				return nil, nil, err
			}
			return s.(store.EventSink), s.Close, nil
		})
	})
}

// mustOpen opens location, failing t on error, and closes the store when t
// ends.
func mustOpen(t *testing.T, open func(context.Context, string) (store.Store, error), location string) store.Store {
	t.Helper()
	s, err := open(context.Background(), location)
	if err != nil {
		t.Fatalf("open %s: %v", location, err)
	}
	if s == nil {
		t.Fatalf("open %s returned a nil Store and no error", location)
	}
	t.Cleanup(func() { s.Close() }) //nolint:errcheck // a second Close; the tests check the first
	return s
}

// harness holds a subtest's store and the model it must match.
type harness struct {
	t      *testing.T
	openFn func(ctx context.Context, location string) (store.Store, error)
	loc    string
	s      store.Store
	m      *model
}

// open opens the subtest's storage.
func (h *harness) open() store.Store {
	h.t.Helper()
	return mustOpen(h.t, h.openFn, h.loc)
}

// commit commits c, which must succeed, and applies it to the model.
func (h *harness) commit(c *store.Change) {
	h.t.Helper()
	if err := h.s.Commit(context.Background(), c); err != nil {
		h.t.Fatalf("Commit: %v", err)
	}
	h.m.apply(c)
}

// load loads the store.
func (h *harness) load() *store.State {
	h.t.Helper()
	st, err := h.s.Load(context.Background())
	if err != nil {
		h.t.Fatalf("Load: %v", err)
	}
	return st
}

// check loads the store and compares it with the model.
func (h *harness) check() {
	h.t.Helper()
	h.m.check(h.t, h.load())
}

// reopen closes the store and opens its storage again.
func (h *harness) reopen() {
	h.t.Helper()
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.s = h.open()
}

// fullChange puts one fully populated record of every kind.
func fullChange() *store.Change {
	return &store.Change{
		PutEnvironments: []qshare.ServiceEnvironment{FullEnvironment("env-a")},
		PutPolicies:     []qshare.SchedulingPolicy{FullPolicy("policy-a")},
		PutQueues:       []qshare.JobQueue{FullQueue("queue-a")},
		PutShares:       []qshare.QuotaShare{FullShare("queue-a", "share-a")},
		PutPlans:        []qshare.CapacityPlan{FullPlan("plan-a")},
		PutJobs:         []qshare.Job{FullJob("job-a", base)},
	}
}

func testFixtures(t *testing.T) {
	for name, v := range map[string]any{
		"FullEnvironment": FullEnvironment("e"),
		"FullPolicy":      FullPolicy("p"),
		"FullQueue":       FullQueue("q"),
		"FullShare":       FullShare("q", "s"),
		"FullPlan":        FullPlan("p"),
		"FullJob":         FullJob("j", base),
	} {
		if z := zeroFields(v); len(z) > 0 {
			t.Errorf("%s leaves fields zero, so the round trip would not test them: %v", name, z)
		}
	}
	// The comparison itself must see differences, or every check passes.
	a, b := FullJob("j", base), FullJob("j", base)
	b.Attempts[1].Executor[0] ^= 1
	if diff(a, b) == "" {
		t.Error("diff misses a changed byte inside an attempt")
	}
	b = FullJob("j", base)
	b.Attempts[0].ExitCode = ptr(0)
	if diff(a, b) == "" {
		t.Error("diff misses a changed exit code")
	}
	b = FullJob("j", base)
	b.PreemptionRetries = nil
	if diff(a, b) == "" {
		t.Error("diff misses nil against a pointer")
	}
	b = FullJob("j", base.UTC())
	if d := diff(a, b); d != "" {
		t.Errorf("diff tells one instant in two locations apart: %s", d)
	}
	b.StoppedAt = b.StoppedAt.Add(1)
	if diff(a, b) == "" {
		t.Error("diff misses a nanosecond")
	}
}

func testEmpty(t *testing.T, h *harness) {
	st := h.load()
	if len(st.Environments)+len(st.Policies)+len(st.Queues)+len(st.Shares)+len(st.Plans)+len(st.Jobs) != 0 {
		t.Fatalf("a new store is not empty: %+v", st)
	}
}

func testRoundTrip(t *testing.T, h *harness) {
	h.commit(fullChange())
	h.check()
	// Several of each kind, in one change.
	c := &store.Change{}
	for i := range 5 {
		n := fmt.Sprint("x", i)
		c.PutEnvironments = append(c.PutEnvironments, FullEnvironment(n))
		c.PutPolicies = append(c.PutPolicies, FullPolicy(n))
		c.PutQueues = append(c.PutQueues, FullQueue(n))
		c.PutShares = append(c.PutShares, FullShare("queue-"+n, n))
		c.PutPlans = append(c.PutPlans, FullPlan("plan-"+fmt.Sprint(4-i)))
		c.PutJobs = append(c.PutJobs, FullJob("job-"+n, base.Add(time.Duration(i)*time.Second)))
	}
	h.commit(c)
	h.check()
}

func testSparse(t *testing.T, h *harness) {
	// Only the keys: every time zero, every pointer nil, every collection nil.
	h.commit(&store.Change{
		PutEnvironments: []qshare.ServiceEnvironment{{Name: "e"}},
		PutPolicies:     []qshare.SchedulingPolicy{{Name: "p"}},
		PutQueues:       []qshare.JobQueue{{Name: "q"}},
		PutShares:       []qshare.QuotaShare{{JobQueue: "q", Name: "s"}},
		PutPlans:        []qshare.CapacityPlan{{Name: "p"}},
		PutJobs:         []qshare.Job{{ID: "j"}, {ID: "k", Attempts: []qshare.Attempt{{N: 1}}}},
	})
	h.check()
	st := h.load()
	for _, j := range st.Jobs {
		if !j.CreatedAt.IsZero() || !j.StoppedAt.IsZero() {
			t.Errorf("job %s: zero times came back as %v, %v", j.ID, j.CreatedAt, j.StoppedAt)
		}
		if j.RetryStrategy != nil || j.PreemptionRetries != nil {
			t.Errorf("job %s: nil pointers came back set", j.ID)
		}
	}
	if a := st.Jobs[1].Attempts[0]; a.ExitCode != nil || !a.StartedAt.IsZero() {
		t.Errorf("a sparse attempt came back with exit code %v, started %v", a.ExitCode, a.StartedAt)
	}
}

func testNilAndEmpty(t *testing.T, h *harness) {
	j := job(1, base)
	j.Tags = map[string]string{}
	j.Attempts = []qshare.Attempt{{N: 1, ID: "a", Executor: []byte{}, ExitCode: ptr(0)}}
	j.Demand = qshare.Capacity{}
	j.PreemptionRetries = ptr(0)
	j.RetryStrategy = &qshare.RetryStrategy{}
	p := qshare.SchedulingPolicy{Name: "p", FairsharePolicy: []byte{}, QuotaSharePolicy: &qshare.QuotaSharePolicy{}}
	h.commit(&store.Change{PutJobs: []qshare.Job{j}, PutPolicies: []qshare.SchedulingPolicy{p}})
	h.check() // empty and nil collections compare equal; pointers to zero do not equal nil
	got := h.load().Jobs[0]
	if got.Attempts[0].ExitCode == nil || *got.Attempts[0].ExitCode != 0 {
		t.Errorf("exit code 0 came back as %v: a pointer to zero must stay a pointer to zero", got.Attempts[0].ExitCode)
	}
	if got.PreemptionRetries == nil || got.RetryStrategy == nil {
		t.Error("a pointer to a zero value came back nil")
	}
}

func testReplace(t *testing.T, h *harness) {
	h.commit(fullChange())
	c := fullChange()
	c.PutEnvironments[0].CapacityLimits = c.PutEnvironments[0].CapacityLimits[:1]
	c.PutEnvironments[0].Tags = nil
	c.PutPolicies[0].QuotaSharePolicy = nil
	c.PutQueues[0].Priority = 0
	c.PutQueues[0].State = qshare.Enabled
	c.PutShares[0].Strategy = qshare.StrategyReserve
	c.PutShares[0].BorrowLimit = 0
	c.PutPlans[0].InstanceCount = 2
	c.PutPlans[0].WarningSeconds = nil
	c.PutJobs[0].Status = qshare.JobSucceeded
	c.PutJobs[0].Attempts = c.PutJobs[0].Attempts[:1]
	c.PutJobs[0].QuotaShare = "other"
	c.PutJobs[0].CreatedAt = base.Add(-time.Hour)
	h.commit(c)
	h.check()
}

func testJobVersion(t *testing.T, h *harness) {
	j := FullJob("j", base)
	j.Version = 5
	h.commit(&store.Change{PutJobs: []qshare.Job{j}})
	older := j
	older.Version = 4
	older.Status = qshare.JobRunnable
	h.commit(&store.Change{PutJobs: []qshare.Job{older}}) // ignored
	h.check()
	if got := h.load().Jobs[0]; got.Version != 5 || got.Status != j.Status {
		t.Fatalf("an older version replaced the newer one: version %d, status %s", got.Version, got.Status)
	}
	same := j
	same.Status = qshare.JobSucceeded
	h.commit(&store.Change{PutJobs: []qshare.Job{same}}) // replaces
	newer := same
	newer.Version = 6
	newer.Status = qshare.JobFailed
	h.commit(&store.Change{PutJobs: []qshare.Job{newer}})
	h.check()
	// Within one change the same rule holds, in order.
	a, b := job(7, base), job(7, base)
	a.Version, b.Version = 9, 8
	h.commit(&store.Change{PutJobs: []qshare.Job{a, b}})
	h.check()
}

func testDelete(t *testing.T, h *harness) {
	h.commit(fullChange())
	h.commit(&store.Change{PutJobs: []qshare.Job{job(1, base), job(2, base)}})
	h.commit(&store.Change{
		DeleteEnvironments: []string{"env-a", "missing"},
		DeletePolicies:     []string{"policy-a", "missing"},
		DeleteQueues:       []string{"queue-a", "missing"},
		DeleteShares:       []store.ShareKey{{Queue: "queue-a", Name: "share-a"}, {Queue: "missing", Name: "x"}},
		DeletePlans:        []string{"plan-a", "missing"},
		DeleteJobs:         []string{"job-a", "job-000001", "missing"},
	})
	h.check()
	// A change that only deletes missing keys succeeds and changes nothing.
	h.commit(&store.Change{DeleteJobs: []string{"nope"}, DeleteQueues: []string{"nope"}})
	h.check()
	if n := len(h.load().Jobs); n != 1 {
		t.Fatalf("%d jobs left, want 1", n)
	}
}

func testPutThenDelete(t *testing.T, h *harness) {
	c := fullChange()
	c.DeleteEnvironments = []string{"env-a"}
	c.DeletePolicies = []string{"policy-a"}
	c.DeleteQueues = []string{"queue-a"}
	c.DeleteShares = []store.ShareKey{{Queue: "queue-a", Name: "share-a"}}
	c.DeletePlans = []string{"plan-a"}
	c.DeleteJobs = []string{"job-a"}
	c.PutJobs = append(c.PutJobs, job(1, base))
	h.commit(c)
	h.check()
	if st := h.load(); len(st.Jobs) != 1 || len(st.Environments) != 0 {
		t.Fatalf("deletes must apply after puts: got %d jobs and %d environments", len(st.Jobs), len(st.Environments))
	}
}

func testShareKeys(t *testing.T, h *harness) {
	h.commit(&store.Change{PutShares: []qshare.QuotaShare{FullShare("q1", "s"), FullShare("q2", "s"), FullShare("q1", "t")}})
	h.check()
	h.commit(&store.Change{DeleteShares: []store.ShareKey{{Queue: "q1", Name: "s"}}})
	h.check()
}

func testEmptyChange(t *testing.T, h *harness) {
	h.commit(&store.Change{})
	h.commit(fullChange())
	h.commit(&store.Change{PutJobs: []qshare.Job{}})
	h.check()
}

func testAtomicity(t *testing.T, h *harness) {
	h.commit(fullChange())
	// Each change below writes records of every kind, then one record with
	// an empty key; none of it may be applied.
	bad := []func(c *store.Change){
		func(c *store.Change) { c.PutEnvironments = append(c.PutEnvironments, qshare.ServiceEnvironment{}) },
		func(c *store.Change) { c.PutPolicies = append(c.PutPolicies, qshare.SchedulingPolicy{}) },
		func(c *store.Change) { c.PutQueues = append(c.PutQueues, qshare.JobQueue{}) },
		func(c *store.Change) { c.PutShares = append(c.PutShares, qshare.QuotaShare{Name: "no-queue"}) },
		func(c *store.Change) { c.PutShares = append(c.PutShares, qshare.QuotaShare{JobQueue: "no-name"}) },
		func(c *store.Change) { c.PutPlans = append(c.PutPlans, qshare.CapacityPlan{}) },
		func(c *store.Change) { c.PutJobs = append(c.PutJobs, qshare.Job{Name: "no-id"}) },
	}
	for i, spoil := range bad {
		c := &store.Change{
			PutEnvironments:    []qshare.ServiceEnvironment{FullEnvironment("new")},
			PutPolicies:        []qshare.SchedulingPolicy{FullPolicy("new")},
			PutQueues:          []qshare.JobQueue{FullQueue("new")},
			PutShares:          []qshare.QuotaShare{FullShare("new", "new")},
			PutPlans:           []qshare.CapacityPlan{FullPlan("new")},
			DeleteEnvironments: []string{"env-a"},
			DeleteJobs:         []string{"job-a"},
		}
		for k := range 100 {
			c.PutJobs = append(c.PutJobs, job(k, base))
		}
		spoil(c)
		if err := h.s.Commit(context.Background(), c); err == nil {
			t.Fatalf("bad change %d (a record with an empty key) was accepted", i)
		}
		h.check() // unchanged
	}
	// A failing change does not take the concurrent ones down with it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range 16 {
		wg.Go(func() {
			c := &store.Change{PutJobs: []qshare.Job{job(1000+g, base)}}
			if g%4 == 0 {
				c.PutJobs = append(c.PutJobs, qshare.Job{})
				if err := h.s.Commit(context.Background(), c); err == nil {
					t.Errorf("goroutine %d: a job with an empty ID was accepted", g)
				}
				return
			}
			if err := h.s.Commit(context.Background(), c); err != nil {
				t.Errorf("goroutine %d: a good change failed beside a bad one: %v", g, err)
				return
			}
			mu.Lock()
			h.m.apply(c)
			mu.Unlock()
		})
	}
	wg.Wait()
	h.check()
}

func testLoadOrder(t *testing.T, h *harness) {
	r := rand.New(rand.NewPCG(1, 2))
	var js []qshare.Job
	for i := range 200 {
		// Few distinct times, so that many jobs tie and the ID decides;
		// times before and after the base, and in other locations.
		at := base.Add(time.Duration(r.IntN(7)-3) * time.Hour).Add(time.Duration(r.IntN(3)))
		if i%3 == 0 {
			at = at.UTC()
		}
		js = append(js, job(r.IntN(1_000_000), at))
	}
	js = append(js, job(1_000_001, time.Time{}), job(1_000_002, base.AddDate(-2000, 0, 0)), job(1_000_003, base.AddDate(5000, 0, 0)))
	r.Shuffle(len(js), func(i, j int) { js[i], js[j] = js[j], js[i] })
	for len(js) > 0 { // in several commits, so that insertion order is not the answer
		n := min(len(js), 1+r.IntN(40))
		h.commit(&store.Change{PutJobs: js[:n]})
		js = js[n:]
	}
	h.check()
}

func testConcurrent(t *testing.T, h *harness) {
	const goroutines, perG = 64, 15
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Loads run beside the commits; each must see every change whole or
	// not at all. Each change puts a pair of jobs.
	loadErr := make(chan error, 1)
	go func() {
		defer close(loadErr)
		for ctx.Err() == nil {
			st, err := h.s.Load(ctx)
			if err != nil {
				if ctx.Err() == nil {
					loadErr <- fmt.Errorf("Load during commits: %w", err)
				}
				return
			}
			seen := map[string]bool{}
			for _, j := range st.Jobs {
				seen[j.ID] = true
			}
			for _, j := range st.Jobs {
				if j.ShareIdentifier == "a" && !seen[j.ID+"-pair"] {
					loadErr <- fmt.Errorf("Load saw half a change: %s without %s-pair", j.ID, j.ID)
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				a := job(g*1000+i, base.Add(time.Duration(i)*time.Millisecond))
				a.ShareIdentifier = "a"
				b := a
				b.ID += "-pair"
				b.ShareIdentifier = "b"
				c := &store.Change{PutJobs: []qshare.Job{a, b}}
				if i > 0 && i%5 == 0 { // and some deletes of an earlier change
					c.DeleteJobs = []string{fmt.Sprintf("job-%06d", g*1000+i-1), fmt.Sprintf("job-%06d-pair", g*1000+i-1)}
				}
				if err := h.s.Commit(context.Background(), c); err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				mu.Lock()
				h.m.apply(c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-loadErr; err != nil {
		t.Fatal(err)
	}
	h.check()
}

func testReopen(t *testing.T, h *harness) {
	h.commit(fullChange())
	h.commit(&store.Change{PutJobs: []qshare.Job{job(1, base), job(2, base)}})
	h.reopen()
	h.check()
	h.commit(&store.Change{DeleteJobs: []string{"job-000001"}, PutQueues: []qshare.JobQueue{FullQueue("b")}})
	h.reopen()
	h.check()
	h.reopen() // reopening without changes changes nothing
	h.check()
}

func testClosed(t *testing.T, h *harness) {
	h.commit(fullChange())
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.s.Commit(context.Background(), &store.Change{PutJobs: []qshare.Job{job(1, base)}}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Commit after Close returned %v, want store.ErrClosed", err)
	}
	if _, err := h.s.Load(context.Background()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Load after Close returned %v, want store.ErrClosed", err)
	}
	if err := h.s.Close(); err != nil {
		t.Fatalf("a second Close returned %v, want nil", err)
	}
	h.s = h.open()
	h.check() // the failed commit left nothing behind
}

func testLarge(t *testing.T, h *harness) {
	const n = 10_000
	c := &store.Change{}
	del := &store.Change{}
	for i := range n {
		j := job(i, base.Add(time.Duration(n-i)*time.Microsecond))
		if i%1000 == 0 {
			j = FullJob(j.ID, j.CreatedAt)
		}
		c.PutJobs = append(c.PutJobs, j)
		if i%2 == 0 {
			del.DeleteJobs = append(del.DeleteJobs, j.ID)
		}
	}
	h.commit(c)
	h.check()
	h.commit(del)
	h.check()
}

// testRetentionDeletes is how the daemon's job retention uses a store:
// finished jobs deleted in batches of DeleteJobs among unfinished ones, the
// deletions surviving a reopen, and a deleted job put again (a tag change
// that raced the deletion) stored afresh whatever its version.
func testRetentionDeletes(t *testing.T, h *harness) {
	const n = 2500
	put := &store.Change{}
	var finished []string
	for i := range n {
		j := job(i, base.Add(time.Duration(i)*time.Millisecond))
		if i%3 != 0 {
			j.Status = qshare.JobSucceeded
			if i%2 == 0 {
				j.Status = qshare.JobFailed
			}
			j.StoppedAt = j.CreatedAt.Add(time.Minute)
			j.Version = 5
			finished = append(finished, j.ID)
		}
		put.PutJobs = append(put.PutJobs, j)
	}
	h.commit(put)
	for len(finished) > 0 {
		batch := finished[:min(len(finished), 1000)]
		finished = finished[len(batch):]
		h.commit(&store.Change{DeleteJobs: batch})
	}
	h.check()
	h.reopen()
	h.check()
	if got, want := len(h.load().Jobs), (n+2)/3; got != want {
		t.Fatalf("%d jobs left after deleting the finished ones, want %d", got, want)
	}
	again := job(1, base.Add(time.Millisecond))
	again.Status, again.Version = qshare.JobSucceeded, 2
	h.commit(&store.Change{PutJobs: []qshare.Job{again}})
	h.check()
}

func testCancelled(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.s.Commit(ctx, fullChange())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context returned %v, want context.Canceled", err)
	}
	h.check() // nothing applied
	if _, err := h.s.Load(ctx); err == nil {
		t.Fatal("Load with a cancelled context succeeded")
	}
}

// testDeadlines commits under deadlines so short that many expire while the
// change waits. Whatever Commit answers must be the truth: nil means the
// change is there, an error means it is not.
func testDeadlines(t *testing.T, h *harness) {
	const goroutines, perG = 32, 10
	type result struct {
		c   *store.Change
		err error
	}
	results := make(chan result, goroutines*perG)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range perG {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(3000))*time.Microsecond)
				c := &store.Change{PutJobs: []qshare.Job{job(g*1000+i, base)}}
				err := h.s.Commit(ctx, c)
				cancel()
				results <- result{c, err}
			}
		})
	}
	wg.Wait()
	close(results)
	var ok, failed int
	for r := range results {
		if r.err == nil {
			h.m.apply(r.c)
			ok++
			continue
		}
		failed++
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("Commit failed with %v, want only context.DeadlineExceeded", r.err)
		}
	}
	t.Logf("%d commits succeeded, %d ran out of time", ok, failed)
	h.check()
}

// testReuse checks that a store does not keep a reference to the Change or
// its records after Commit returns: the caller may reuse them.
func testReuse(t *testing.T, h *harness) {
	c := fullChange()
	h.commit(c)
	c.PutJobs[0].Status = qshare.JobFailed
	c.PutJobs[0].Tags["project"] = "changed"
	c.PutJobs[0].Attempts[0].Executor[0] = 'X'
	c.PutEnvironments[0].CapacityLimits[0].MaxCapacity = 1
	h.m = newModel()
	h.m.apply(fullChange())
	h.check()
	// A change whose commit was cancelled must not be applied later either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c2 := &store.Change{DeleteJobs: []string{"job-a"}}
	h.s.Commit(ctx, c2) //nolint:errcheck // checked by testCancelled
	c2.DeleteJobs[0] = "unrelated"
	h.check()
}

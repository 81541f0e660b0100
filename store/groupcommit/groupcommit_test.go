package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare/store"
)

// item is a change in these tests: a name, and whether Apply refuses it.
type item struct {
	name string
	bad  bool
}

// recorder is an Apply that keeps what it was called with and what it
// committed, refusing the bad items one at a time (as a database rejects
// the first failing statement), or everything while failAll is set.
type recorder struct {
	mu        sync.Mutex
	calls     [][]string // the names of each call's batch
	committed []string
	failAll   error
	gate      chan struct{} // when not nil, each call waits for a value
	entered   chan struct{} // when not nil, each call signals here first
}

func (r *recorder) apply(batch []*item) (int, error) {
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, it := range batch {
		names = append(names, it.name)
	}
	r.calls = append(r.calls, names)
	if r.failAll != nil {
		return -1, r.failAll
	}
	for i, it := range batch {
		if it.bad {
			return i, fmt.Errorf("%s refused", it.name)
		}
	}
	r.committed = append(r.committed, names...)
	return -1, nil
}

func (r *recorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, c := range r.calls {
		n = append(n, len(c))
	}
	return n
}

func (r *recorder) applied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.committed)
}

func newQueue(t *testing.T, cfg Config, r *recorder) *Queue[*item] {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = "test: commit"
	}
	q := New(cfg, r.apply)
	t.Cleanup(func() { q.Close() })
	return q
}

// enqueue hands n items named prefix-i, of rows rows each, to q.
func enqueue(t *testing.T, q *Queue[*item], prefix string, n, rows int) []*Request[*item] {
	t.Helper()
	var rs []*Request[*item]
	for i := range n {
		r, err := q.Enqueue(context.Background(), &item{name: fmt.Sprintf("%s-%d", prefix, i), bad: strings.HasPrefix(prefix, "bad")}, rows)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func waitAll(t *testing.T, rs []*Request[*item]) []error {
	t.Helper()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Wait(context.Background()))
	}
	return errs
}

// TestBatchesWhatWaits: every request waiting when the writer starts goes
// into one Apply, in order, and each caller gets nil.
func TestBatchesWhatWaits(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	rs := enqueue(t, q, "good", 50, 2)
	q.Start()
	for i, err := range waitAll(t, rs) {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if got := rec.batchSizes(); !slices.Equal(got, []int{50}) {
		t.Errorf("batches %v, want one of 50", got)
	}
	if got := rec.applied(); len(got) != 50 || got[0] != "good-0" || got[49] != "good-49" {
		t.Errorf("applied %v, want good-0 .. good-49 in order", got)
	}
	if s := q.Stats(); s != (Stats{Commits: 50, Batches: 1, Rows: 100}) {
		t.Errorf("stats %+v", s)
	}
}

// TestBatchLimits: a batch stops at MaxBatch requests and once it holds
// MaxRows rows; a single request larger than MaxRows is applied whole.
func TestBatchLimits(t *testing.T) {
	for _, tc := range []struct {
		name              string
		maxBatch, maxRows int
		n, rows           int
		want              []int
	}{
		{"MaxBatch", 4, 20000, 10, 1, []int{4, 4, 2}},
		{"MaxBatch1", 1, 20000, 3, 1, []int{1, 1, 1}},
		{"MaxBatch0CountsAs1", 0, 20000, 2, 1, []int{1, 1}},
		{"MaxRows", 1024, 5, 5, 3, []int{2, 2, 1}},
		{"LargerThanMaxRows", 1024, 5, 2, 100, []int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			q := newQueue(t, Config{MaxBatch: tc.maxBatch, MaxRows: tc.maxRows}, rec)
			rs := enqueue(t, q, "good", tc.n, tc.rows)
			q.Start()
			for _, err := range waitAll(t, rs) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := rec.batchSizes(); !slices.Equal(got, tc.want) {
				t.Errorf("batches %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFailingChangeIsolated: a change that Apply refuses fails alone, with
// Apply's error as it wrote it, and the rest of its batch is applied.
func TestFailingChangeIsolated(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	var rs []*Request[*item]
	rs = append(rs, enqueue(t, q, "good-a", 3, 1)...)
	rs = append(rs, enqueue(t, q, "bad-x", 1, 1)...)
	rs = append(rs, enqueue(t, q, "good-b", 3, 1)...)
	rs = append(rs, enqueue(t, q, "bad-y", 1, 1)...)
	q.Start()
	errs := waitAll(t, rs)
	for i, err := range errs {
		switch i {
		case 3, 7:
			if err == nil || !strings.HasSuffix(err.Error(), " refused") {
				t.Errorf("request %d: %v, want Apply's error", i, err)
			}
		default:
			if err != nil {
				t.Errorf("request %d failed beside a bad one: %v", i, err)
			}
		}
	}
	if got := rec.batchSizes(); !slices.Equal(got, []int{8, 7, 6}) {
		t.Errorf("Apply called with batches %v, want 8, then 7 and 6 as the bad ones are set aside", got)
	}
	if got := len(rec.applied()); got != 6 {
		t.Errorf("%d applied, want the 6 good ones", got)
	}
	if s := q.Stats(); s != (Stats{Commits: 6, Failed: 2, Batches: 1, Rows: 6}) {
		t.Errorf("stats %+v", s)
	}
}

// TestIsolationGivesUp: after maxIsolations changes set aside, a batch that
// still fails fails whole: the failure is the database's.
func TestIsolationGivesUp(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	rs := append(enqueue(t, q, "bad", maxIsolations+2, 1), enqueue(t, q, "good", 2, 1)...)
	q.Start()
	for i, err := range waitAll(t, rs) {
		if err == nil {
			t.Errorf("request %d succeeded", i)
		}
	}
	if n := len(rec.batchSizes()); n != maxIsolations+1 {
		t.Errorf("Apply called %d times, want %d", n, maxIsolations+1)
	}
	if got := rec.applied(); len(got) != 0 {
		t.Errorf("applied %v", got)
	}
	if s := q.Stats(); s.Failed != int64(len(rs)) || s.Commits != 0 || s.Batches != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestWholeBatchFails: when Apply fails as a whole (index -1), every caller
// gets its error and Apply is not called again.
func TestWholeBatchFails(t *testing.T) {
	boom := errors.New("commit failed")
	rec := &recorder{failAll: boom}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	rs := enqueue(t, q, "good", 5, 1)
	q.Start()
	for i, err := range waitAll(t, rs) {
		if !errors.Is(err, boom) {
			t.Errorf("request %d: %v, want Apply's error", i, err)
		}
	}
	if n := len(rec.batchSizes()); n != 1 {
		t.Errorf("Apply called %d times, want once", n)
	}
	if s := q.Stats(); s != (Stats{Failed: 5}) {
		t.Errorf("stats %+v", s)
	}
}

// TestCancelWhileQueued: a caller whose context ends while its request is
// queued gets the context's error, under the prefix, and its item is never
// applied; the writer skips it.
func TestCancelWhileQueued(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	ctx, cancel := context.WithCancel(context.Background())
	answer := make(chan error, 1)
	go func() { answer <- q.Commit(ctx, &item{name: "abandoned"}, 1) }()
	for q.Len() < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	err := <-answer
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "test: commit: ") {
		t.Fatalf("got %v, want the prefixed context error", err)
	}
	rs := enqueue(t, q, "later", 1, 1)
	q.Start()
	if err := rs[0].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.applied(); !slices.Equal(got, []string{"later-0"}) {
		t.Errorf("applied %v, want only later-0", got)
	}
	if s := q.Stats(); s != (Stats{Commits: 1, Batches: 1, Rows: 1}) {
		t.Errorf("stats %+v: the abandoned request counts nowhere", s)
	}
}

// TestCancelWhileClaimed: once the writer has claimed a request, the
// caller's context no longer matters: Wait returns Apply's answer.
func TestCancelWhileClaimed(t *testing.T) {
	rec := &recorder{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	q.Start()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := q.Enqueue(ctx, &item{name: "claimed"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-rec.entered // Apply runs: the request is claimed
	if !r.Claimed() {
		t.Fatal("a request inside Apply is not claimed")
	}
	answer := make(chan error, 1)
	go func() { answer <- r.Wait(ctx) }()
	cancel()
	select {
	case err := <-answer:
		t.Fatalf("Wait returned %v while Apply was still running", err)
	case <-time.After(20 * time.Millisecond):
	}
	rec.gate <- struct{}{}
	if err := <-answer; err != nil {
		t.Fatalf("got %v, want Apply's nil", err)
	}
	if got := rec.applied(); !slices.Equal(got, []string{"claimed"}) {
		t.Errorf("applied %v", got)
	}
}

// TestCancelledBeforehand: a context that already ended fails Commit at
// once, and nothing is queued.
func TestCancelledBeforehand(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Commit(ctx, &item{name: "x"}, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if q.Len() != 0 {
		t.Fatal("a cancelled commit was queued")
	}
}

// TestEmptyItem: an item of no rows is answered nil and never applied,
// and a closed queue refuses it.
func TestEmptyItem(t *testing.T) {
	rec := &recorder{}
	q := newQueue(t, Config{MaxBatch: 1024, MaxRows: 20000}, rec)
	q.Start()
	if err := q.Commit(context.Background(), &item{name: "empty"}, 0); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if n := len(rec.batchSizes()); n != 0 {
		t.Errorf("Apply called %d times for an empty item", n)
	}
	if err := q.Commit(context.Background(), &item{name: "empty"}, 0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("after Close: %v, want store.ErrClosed", err)
	}
}

// TestCloseWhileQueued: Close answers every request queued before it (and
// starts the writer to do so), then Commit fails with store.ErrClosed; a
// second Close reports false.
func TestCloseWhileQueued(t *testing.T) {
	rec := &recorder{}
	q := New(Config{MaxBatch: 1024, MaxRows: 20000, Prefix: "test: commit"}, rec.apply)
	rs := enqueue(t, q, "queued", 5, 1)
	if q.Closed() {
		t.Fatal("closed before Close")
	}
	if !q.Close() {
		t.Fatal("first Close reported false")
	}
	for i, err := range waitAll(t, rs) {
		if err != nil {
			t.Errorf("queued request %d: %v", i, err)
		}
	}
	if got := len(rec.applied()); got != 5 {
		t.Errorf("%d applied, want 5", got)
	}
	if !q.Closed() || q.Close() {
		t.Error("Closed() false or a second Close reported true")
	}
	err := q.Commit(context.Background(), &item{name: "late"}, 1)
	if !errors.Is(err, store.ErrClosed) || !strings.HasPrefix(err.Error(), "test: commit: ") {
		t.Errorf("after Close: %v, want the prefixed store.ErrClosed", err)
	}
}

// TestConcurrentCommitsAndClose (run it with -race): many callers, some
// with contexts that end, race a Close; every caller's answer is the truth:
// nil exactly for the items applied, ErrClosed or a context error for the
// others, and nothing is applied twice.
func TestConcurrentCommitsAndClose(t *testing.T) {
	rec := &recorder{}
	q := New(Config{MaxBatch: 7, MaxRows: 20000, Prefix: "test: commit"}, rec.apply)
	q.Start()
	const callers, each = 16, 50
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		acks = map[string]bool{}
	)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("c%d-%d", c, i)
				ctx, cancel := context.WithCancel(context.Background())
				if i%3 == 0 {
					go cancel()
				}
				err := q.Commit(ctx, &item{name: name}, 1)
				cancel()
				switch {
				case err == nil:
					mu.Lock()
					acks[name] = true
					mu.Unlock()
				case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled):
				default:
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	q.Close()
	wg.Wait()
	applied := rec.applied()
	seen := map[string]bool{}
	for _, n := range applied {
		if seen[n] {
			t.Errorf("%s applied twice", n)
		}
		seen[n] = true
		if !acks[n] {
			t.Errorf("%s applied but its caller got an error", n)
		}
	}
	for n := range acks {
		if !seen[n] {
			t.Errorf("%s acknowledged but never applied", n)
		}
	}
	if s := q.Stats(); s.Commits != int64(len(acks)) {
		t.Errorf("stats %+v, %d acknowledged", s, len(acks))
	}
	for _, n := range rec.batchSizes() {
		if n > 7 {
			t.Errorf("a batch of %d, over MaxBatch 7", n)
		}
	}
	t.Logf("%d of %d acknowledged in %d batches", len(acks), callers*each, len(rec.batchSizes()))
}

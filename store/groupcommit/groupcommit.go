// Package groupcommit is the group-commit queue that the stores (sqlite/,
// postgres/) put in front of their one writing connection, so that
// concurrent durable commits share one transaction and one flush.
//
// A store's Commit encodes its change in the caller's goroutine (encoding
// runs on every core, and an invalid change fails before it is queued) and
// hands the encoded item to Queue.Commit. The queue's one writer goroutine
// takes the first waiting request, then every other one already waiting (up
// to Config.MaxBatch requests or about Config.MaxRows rows), and gives them
// to the store's Apply, which writes them in one transaction. Each caller is
// answered after Apply returned, that is after the store's commit was
// durable. While one batch is being written the next requests queue up, so
// the batch size follows the load without any timer: one caller alone pays
// one flush, and under load dozens share one. When a batch has more than one
// request, the writer also yields the processor a few times
// (runtime.Gosched) while new requests keep arriving, so that callers which
// are runnable but not yet queued join it; a lone caller never waits.
//
// Each caller's change stays atomic: when Apply reports that one item failed,
// that caller gets the error and the batch is tried again without it (at
// most maxIsolations times); when Apply fails as a whole (the begin, the
// commit, the connection), every caller in the batch gets the error.
//
// A request is pending until the writer claims it (it will then be applied
// or answered with an error) or its caller abandons it (its context ended
// while it was queued; the writer then skips it). The claim is one
// compare-and-swap, so a caller's answer is always the truth: an abandoned
// request is never applied, and a claimed one is waited for.
package groupcommit

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"qshare/store"
)

// Request states.
const (
	pending int32 = iota
	claimed
	abandoned
)

// maxIsolations bounds how many failing items one batch sets aside before
// it gives up on the rest: a failure that repeats is the database's, not
// one change's, and retrying would only slow the error down.
const maxIsolations = 3

// yieldRounds bounds how many times the writer yields to let more commits
// join a batch before it writes it.
const yieldRounds = 4

// queueLen is the capacity of the request channel: callers beyond it wait
// to hand their request over (their context still ends the wait).
const queueLen = 4096

// Config sets a Queue's limits and the prefix of its own errors.
type Config struct {
	// MaxBatch bounds how many requests go into one batch; 1 turns
	// grouping off (one Apply per Commit). Less than 1 counts as 1.
	MaxBatch int
	// MaxRows stops a batch from growing once it holds this many rows; a
	// single larger request is still applied whole.
	MaxRows int
	// Prefix starts the errors that the queue itself returns (a context
	// that ended, a closed queue): "sqlite: commit" gives "sqlite: commit:
	// context canceled". Apply's errors go to the callers as Apply wrote
	// them.
	Prefix string
}

// Apply writes the items of batch, in order, in one transaction. It returns
// (-1, nil) when all of them are durable. On failure nothing of batch may be
// applied, and Apply returns the index of the item whose change failed, or
// -1 when the failure was not one item's. Only the writer goroutine calls
// it, one call at a time.
type Apply[T any] func(batch []T) (failed int, err error)

// Stats counts what a Queue has done since it was made.
type Stats struct {
	// Commits is the number of Commit calls that succeeded.
	Commits int64
	// Failed is the number of Commit calls that returned an error from the
	// database (not counting cancelled or invalid ones).
	Failed int64
	// Batches is the number of transactions committed; Commits/Batches is
	// the mean group-commit batch size.
	Batches int64
	// Rows is the number of records put or deleted by successful commits.
	Rows int64
}

// Request is one item handed to the writer; Wait gives its answer.
type Request[T any] struct {
	q     *Queue[T]
	state atomic.Int32
	item  T
	rows  int
	err   chan error // buffered: the writer never blocks on an answer
}

// Queue is a group-commit queue with its writer goroutine. It is safe for
// concurrent use. Make it with New, start its writer with Start and stop it
// with Close.
type Queue[T any] struct {
	cfg   Config
	apply Apply[T]

	// mu guards closed, started and the send side of reqs: Enqueue holds
	// it for reading while it hands a request over, Close takes it for
	// writing before it closes reqs, so no request is ever sent on a
	// closed channel.
	mu      sync.RWMutex
	closed  bool
	started bool
	reqs    chan *Request[T]
	done    chan struct{} // closed when the writer goroutine has exited

	stats struct {
		commits, batches, failed, rows atomic.Int64
	}
}

// New returns a queue that writes through apply. Its writer does not run
// until Start (or Close), so requests enqueued before Start go into one
// batch, within the limits.
func New[T any](cfg Config, apply Apply[T]) *Queue[T] {
	cfg.MaxBatch = max(1, cfg.MaxBatch)
	return &Queue[T]{
		cfg:   cfg,
		apply: apply,
		reqs:  make(chan *Request[T], queueLen),
		done:  make(chan struct{}),
	}
}

// Start starts the writer goroutine. A second Start does nothing.
func (q *Queue[T]) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.startLocked()
}

func (q *Queue[T]) startLocked() {
	if !q.started {
		q.started = true
		go q.run()
	}
}

// Commit hands item, which writes rows rows, to the writer and returns its
// answer: nil once Apply has made it durable, Apply's error, or the
// context's error if ctx ends while the item is still queued (it is then
// never applied). Once the writer has claimed the item, Commit waits for
// its transaction to finish, whatever ctx does, so that its answer is
// always the truth. After Close it fails with an error that wraps
// store.ErrClosed. An item of no rows is not queued: Commit returns nil.
func (q *Queue[T]) Commit(ctx context.Context, item T, rows int) error {
	r, err := q.Enqueue(ctx, item, rows)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// Enqueue is the first half of Commit: it hands item to the writer and
// returns its request, whose Wait is the second half. It returns a nil
// request (whose Wait returns nil) for an item of no rows.
func (q *Queue[T]) Enqueue(ctx context.Context, item T, rows int) (*Request[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, q.fail(err)
	}
	r := &Request[T]{q: q, item: item, rows: rows, err: make(chan error, 1)}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return nil, q.fail(store.ErrClosed)
	}
	if rows == 0 {
		return nil, nil
	}
	select {
	case q.reqs <- r:
		return r, nil
	case <-ctx.Done():
		return nil, q.fail(ctx.Err())
	}
}

// Wait returns the request's answer, as Commit describes.
func (r *Request[T]) Wait(ctx context.Context) error {
	if r == nil {
		return nil
	}
	select {
	case err := <-r.err:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			return r.q.fail(ctx.Err())
		}
		return <-r.err
	}
}

// Claimed reports whether the writer has taken the request into a batch
// (from then on it is applied or answered with an error, never abandoned).
func (r *Request[T]) Claimed() bool { return r.state.Load() == claimed }

// Len returns how many requests wait in the queue, not yet taken by the
// writer.
func (q *Queue[T]) Len() int { return len(q.reqs) }

// Closed reports whether Close has been called.
func (q *Queue[T]) Closed() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.closed
}

// Close stops taking requests, waits until the writer has answered every
// request enqueued before (starting the writer if Start was not called) and
// has exited, and reports true. A second Close does nothing and reports
// false, so that the caller releases its resources once.
func (q *Queue[T]) Close() bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.closed = true
	q.startLocked()
	close(q.reqs)
	q.mu.Unlock()
	<-q.done
	return true
}

// Stats returns the queue's counters. It is safe to call at any time; a
// commit is counted before its caller is answered.
func (q *Queue[T]) Stats() Stats {
	return Stats{
		Commits: q.stats.commits.Load(),
		Failed:  q.stats.failed.Load(),
		Batches: q.stats.batches.Load(),
		Rows:    q.stats.rows.Load(),
	}
}

func (q *Queue[T]) fail(err error) error { return fmt.Errorf("%s: %w", q.cfg.Prefix, err) }

// run is the writer goroutine. It exits when Close has closed q.reqs and
// every request sent before that has been answered.
func (q *Queue[T]) run() {
	defer close(q.done)
	batch := make([]*Request[T], 0, q.cfg.MaxBatch)
	for r := range q.reqs {
		batch = append(batch[:0], r)
		rows := r.rows
		open := true
		drain := func() (added int) {
			for open && len(batch) < q.cfg.MaxBatch && rows < q.cfg.MaxRows {
				select {
				case r, ok := <-q.reqs:
					if !ok {
						open = false
						return added
					}
					batch = append(batch, r)
					rows += r.rows
					added++
				default:
					return added
				}
			}
			return added
		}
		drain()
		// While commits keep arriving, let the goroutines that are about to
		// commit run first (Gosched returns at once when none is runnable,
		// so a lone caller waits for nothing): a transaction's fixed cost
		// (WAL frames, flush, checkpoint) is most of a store's CPU per
		// commit, and under load a few more callers per transaction cut it.
		for range yieldRounds {
			if len(batch) == 1 || !open {
				break
			}
			runtime.Gosched()
			if drain() == 0 {
				break
			}
		}
		q.commitBatch(batch)
		clear(batch) // drop references to answered requests
	}
}

// commitBatch applies the claimable requests of batch in one transaction
// and answers each of them.
func (q *Queue[T]) commitBatch(batch []*Request[T]) {
	live := make([]*Request[T], 0, len(batch))
	items := make([]T, 0, len(batch))
	for _, r := range batch {
		if r.state.CompareAndSwap(pending, claimed) {
			live = append(live, r)
			items = append(items, r.item)
		}
	}
	isolations := 0
	for len(live) > 0 {
		failed, err := q.apply(items)
		// The counters move before the answers, so that a caller who has
		// its answer finds it counted in Stats.
		if err == nil {
			rows := 0
			for _, r := range live {
				rows += r.rows
			}
			q.stats.batches.Add(1)
			q.stats.commits.Add(int64(len(live)))
			q.stats.rows.Add(int64(rows))
			for _, r := range live {
				r.err <- nil
			}
			return
		}
		if failed < 0 || failed >= len(live) || isolations == maxIsolations {
			q.stats.failed.Add(int64(len(live)))
			for _, r := range live {
				r.err <- err
			}
			return
		}
		isolations++
		q.stats.failed.Add(1)
		live[failed].err <- err
		live = append(live[:failed], live[failed+1:]...)
		items = append(items[:failed], items[failed+1:]...)
	}
}

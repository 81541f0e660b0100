package daemon

import (
	"context"
	"time"

	"qshare"
	"qshare/event"
	"qshare/store"
)

// The committer. The loop does not wait for its cycle's commit: finish
// hands the cycle's outcome (its job versions, events, replies and effects)
// to the committer goroutine and the loop goes on to the next cycle, on top
// of its own changes (d.inflight), while the store writes. The committer
// takes every cycle queued, keeps the newest version of each job among
// them (a job scheduled in one cycle and starting in the next is written
// once), commits them in one store commit, and only after that, cycle by
// cycle in order, installs them in d.jobs, appends their events, answers
// their commands and carries out their effects. So the rules of the loop
// hold as before: nothing is acted on, answered or shown by a read before
// it is durable, and the store always holds the changes of a prefix of the
// cycles, which is what a restart recovers from.

// The loop runs at most this far ahead of the committer: it waits while
// more cycles, or more job versions, are queued (not counting the commit
// in flight), so that memory stays bounded while the store is slow or down.
const (
	maxQueuedCycles = 4
	maxQueuedJobs   = 20000
)

// pending is a finished cycle waiting for its commit.
type pending struct {
	jobs    []*qshare.Job // the versions it changed, in the order it changed them
	events  []event.Event
	replies []reply
	effects []func()
}

// enqueue hands a finished cycle to the committer, then holds the loop
// while the queue is full. It returns false when ctx ended meanwhile.
func (d *Daemon) enqueue(ctx context.Context, p *pending) bool {
	d.cmu.Lock()
	d.cq = append(d.cq, p)
	d.cqJobs += len(p.jobs)
	d.cmu.Unlock()
	select {
	case d.cwake <- struct{}{}:
	default:
	}
	for {
		d.cmu.Lock()
		full := len(d.cq) > maxQueuedCycles || d.cqJobs > maxQueuedJobs
		d.cmu.Unlock()
		if !full {
			return true
		}
		select {
		case <-d.cspace:
		case <-ctx.Done():
			return false
		}
	}
}

// take empties the committer's queue and returns what it held.
func (d *Daemon) take() []*pending {
	d.cmu.Lock()
	batch := d.cq
	d.cq, d.cqJobs = nil, 0
	d.cmu.Unlock()
	select {
	case d.cspace <- struct{}{}:
	default:
	}
	return batch
}

// commitLoop is the committer goroutine; it returns when ctx ends.
func (d *Daemon) commitLoop(ctx context.Context) {
	defer close(d.cdone)
	for {
		if batch := d.take(); len(batch) > 0 {
			if !d.commitBatch(ctx, batch) {
				d.failQueued()
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			d.failQueued()
			return
		case <-d.cwake:
		}
	}
}

func errShuttingDown() error {
	return qshare.Errorf(qshare.EINTERNAL, "the server is shutting down; retry the request")
}

// failQueued answers the commands of the cycles still queued at shutdown.
// Their changes are not committed and their effects never run.
func (d *Daemon) failQueued() {
	for _, p := range d.take() {
		for _, r := range p.replies {
			r.ch <- errShuttingDown()
		}
	}
}

// answerQueued answers the commands of the cycles queued behind a commit
// that fails: like those of the failing commit, their changes are kept and
// retried.
func (d *Daemon) answerQueued() {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	for _, p := range d.cq {
		for _, r := range p.replies {
			if r.err == nil {
				r.err = errStoreDown(true)
			}
			r.ch <- r.err
		}
		p.replies = nil
	}
}

// merge returns the change that commits a batch: each job once, at its
// newest version, in the order of its first change in the batch.
func merge(batch []*pending) *store.Change {
	n := 0
	for _, p := range batch {
		n += len(p.jobs)
	}
	if n == 0 {
		return nil
	}
	ch := &store.Change{PutJobs: make([]qshare.Job, 0, n)}
	if len(batch) == 1 {
		for _, j := range batch[0].jobs {
			ch.PutJobs = append(ch.PutJobs, *j)
		}
		return ch
	}
	at := make(map[string]int, n)
	for _, p := range batch {
		for _, j := range p.jobs {
			if i, ok := at[j.ID]; ok {
				ch.PutJobs[i] = *j // a later cycle's version is newer
				continue
			}
			at[j.ID] = len(ch.PutJobs)
			ch.PutJobs = append(ch.PutJobs, *j)
		}
	}
	return ch
}

// commitBatch commits the cycles of a batch as one change, retrying while
// the store fails, and then installs them, appends their events, answers
// their commands and carries out their effects, in order. It returns false
// when ctx ended before the commit succeeded: the batch's commands are then
// answered and nothing else is done.
func (d *Daemon) commitBatch(ctx context.Context, batch []*pending) bool {
	if ch := merge(batch); ch != nil {
		backoff := 10 * time.Millisecond
		for {
			t0 := time.Now()
			err := d.st.Commit(ctx, ch)
			d.obs.StoreCommit(time.Since(t0), err)
			if err == nil {
				d.storeDown.Store(false)
				break
			}
			if ctx.Err() == nil {
				d.log.Error("store commit failed in the control loop; retrying", "jobs", len(ch.PutJobs), "err", err)
				// Clients are not kept waiting for the store: the commands
				// of this batch and of the cycles queued behind it are
				// answered now (their changes are retried with the rest),
				// and commands that come meanwhile are refused.
				d.storeDown.Store(true)
				for _, p := range batch {
					for _, r := range p.replies {
						if r.err == nil {
							r.err = errStoreDown(true)
						}
						r.ch <- r.err
					}
					p.replies = nil
				}
				d.answerQueued()
				d.refuseCommands()
			}
			select {
			case <-ctx.Done():
				for _, p := range batch {
					for _, r := range p.replies {
						r.ch <- errShuttingDown()
					}
				}
				return false
			case <-time.After(backoff):
			}
			if backoff < time.Second {
				backoff *= 2
			}
		}
		d.mu.Lock()
		for _, p := range batch {
			for _, j := range p.jobs {
				d.setJob(j)
				if d.inflight[j.ID] == j {
					delete(d.inflight, j.ID)
				}
			}
		}
		d.mu.Unlock()
		var evs []event.Event
		if len(batch) == 1 {
			evs = batch[0].events
		} else {
			for _, p := range batch {
				evs = append(evs, p.events...)
			}
		}
		d.emitEvents(evs)
	}
	for _, p := range batch {
		for _, r := range p.replies {
			r.ch <- r.err
		}
	}
	for _, p := range batch {
		for _, e := range p.effects {
			e()
		}
	}
	return true
}

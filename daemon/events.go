package daemon

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/event"
	"qshare/store"
)

// The capacity event log (qshare serve --events). Events are derived from
// what each store commit changed, by comparing every committed job with the
// record it replaced, and appended after the commit succeeded, so the log
// follows the store's commit order. A crash between a commit and its append
// loses the append, never invents one: on Start the daemon replays the log,
// compares what it says each job holds with what the store says, and
// appends the events that bring the two together. A job that held capacity
// across a crash therefore keeps holding it in the log until its recovery
// ends the attempt, and never starts twice.
//
// A preemption is logged twice: a stopping line (with "for") in the commit
// that records the decision, against which the checker judges it, and a
// preempt line in the commit that records the attempt's end, when its
// capacity is given back. A failed attempt that is retried, and an attempt
// lost and requeued, give their capacity back as a fail whose reason says
// so; the job's next start follows.

// EventSink is where the daemon appends its capacity event log (see package
// event for the events). event.File keeps it in a file (qshare serve
// --events FILE); a Store may keep it beside its records by implementing
// store.EventSink, which has these methods and this contract, so that the
// history survives a failover to another server on the same store.
//
// The daemon calls a sink from one goroutine at a time: Events once in
// Start, before the first Append; then Append after each commit whose
// changes have events, in the store's commit order.
//
//   - Ordering: the log is the appended batches in the order Append was
//     called, each batch's events in slice order; Events returns them so.
//     The daemon makes T non-decreasing before it appends.
//   - Durability: when Append returns nil, the batch survives a crash of the
//     process. It must reach stable storage soon after (event.File fsyncs
//     within event.SyncEvery), so a crash of the machine loses at most the
//     last moments of the log. After any crash the log is a prefix of the
//     events appended, in order: whole events, never one that was not
//     appended (of a batch cut short by the crash, its first events may
//     remain).
//   - Errors: when Append returns an error, the sink keeps none of that
//     batch. The daemon logs the error, goes on, and sends those events
//     again at the head of its next Append, so that the log stays a prefix
//     of the history (up to maxUnsent waiting events); what a crash loses
//     meanwhile, the next Start appends, comparing the log with the store.
//     A later Append may succeed.
//   - Reading: Events calls fn with every event in the log, oldest first.
//     An event that cannot be read is skipped, the others are still passed
//     to fn, and Events then returns a *event.BadLinesError naming what it
//     skipped (the daemon logs them and starts); any other error means the
//     log could not be read, and Start fails with it.
//
// store.EventSink restates this interface for the stores; the assertions
// below keep the two, and the file sink, in step.
type EventSink interface {
	// Events calls fn with every event already in the log, oldest first.
	Events(fn func(event.Event)) error
	// Append appends evs, in order, as one batch, and makes them survive a
	// crash of the process before it returns nil.
	Append(evs []event.Event) error
}

var (
	_ EventSink       = (*event.File)(nil)
	_ EventSink       = store.EventSink(nil)
	_ store.EventSink = EventSink(nil)
)

// loggedJob is what the event log says about one job.
type loggedJob struct {
	done bool
	// failT is the time of the job's last line when that line is a fail:
	// its end, or a requeue after which the job went on (waited, started
	// again, ended) while its lines were lost.
	failT    float64
	holding  qshare.Capacity // nil when it holds nothing
	priority int
	// attempt is the attempt of the last start line that names one ("" for
	// a start that reconciliation wrote).
	attempt string
}

// attemptReason is a start line's reason: the attempt's ID, then why it
// started; startedAttempt reads the ID back.
func attemptReason(id, why string) string { return "attempt " + id + ": " + why }

// startedAttempt is the attempt ID that a start line's reason names
// (attemptReason), or "".
func startedAttempt(reason string) string {
	rest, ok := strings.CutPrefix(reason, "attempt ")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ": ")
	if !ok {
		return ""
	}
	return id
}

// eventLog is the daemon's side of the sink: the time of the last line, so
// that lines never go back in time, and the "for" of preemptions decided but
// not yet carried out.
type eventLog struct {
	sink  EventSink
	lastT float64
	// preemptFor maps a preempted job to the job it makes room for, from the
	// decision until the preemption is logged. Loop-owned.
	preemptFor map[string]string
	// decided lists the preemptions decided in the current cycle, for its
	// stopping lines. Loop-owned.
	decided []string
	// unsent are the events of appends that failed, in order, for the
	// next append (emitEvents). Under evMu.
	unsent []event.Event
}

// notePreempt remembers whom a preemption makes room for. Called by the loop.
func (d *Daemon) notePreempt(job, forJob string) {
	if d.evlog == nil {
		return
	}
	if d.evlog.preemptFor == nil {
		d.evlog.preemptFor = map[string]string{}
	}
	d.evlog.preemptFor[job] = forJob
	d.evlog.decided = append(d.evlog.decided, job)
}

// maxUnsent bounds the events kept for the next append after appends
// failed (emitEvents).
const maxUnsent = 100000

// emitEvents appends evs to the log. When an append fails (the sink keeps
// none of it), its events are kept and go first in the next append, so
// that the log never has a hole in its middle (a job's start without its
// submit, which no reconciliation could mend): it is at worst a prefix of
// the history, which the next Start reconciles with the store. Past
// maxUnsent waiting events they are dropped, and the log misses them.
// Callers serialise through evMu.
func (d *Daemon) emitEvents(evs []event.Event) {
	if d.evlog == nil || len(evs) == 0 {
		return
	}
	d.evMu.Lock()
	defer d.evMu.Unlock()
	for i := range evs {
		if evs[i].T < d.evlog.lastT {
			evs[i].T = d.evlog.lastT
		}
		d.evlog.lastT = evs[i].T
	}
	batch := evs
	if len(d.evlog.unsent) > 0 {
		batch = append(d.evlog.unsent, evs...)
	}
	if err := d.evlog.sink.Append(batch); err != nil {
		if len(batch) > maxUnsent {
			d.evlog.unsent = nil
			d.log.Error("event log append failed, and too many events wait for it: the log misses them until the next restart reconciles it", "events", len(batch), "err", err)
			return
		}
		d.evlog.unsent = slices.Clone(batch)
		d.log.Error("event log append failed; its events go with the next append", "events", len(evs), "waiting", len(batch), "err", err)
		return
	}
	d.evlog.unsent = nil
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// baseEvent is an event of job j with every field but the capacity.
func baseEvent(j *qshare.Job, kind event.Kind, t time.Time, reason string) event.Event {
	return event.Event{T: unixSeconds(t), Job: j.ID, Event: kind, Share: j.QuotaShare, Queue: j.JobQueue, Priority: j.Priority, Reason: reason}
}

// submitEvents are the lines of a newly committed job.
func submitEvents(j *qshare.Job) []event.Event {
	e := baseEvent(j, event.Submit, j.CreatedAt, "")
	e.Plan = j.CapacityPlan
	return event.Lines(e, j.Demand)
}

// cycleEvents derives the events of a loop commit: the jobs this cycle
// changed, compared with the records they replace (the loop's view:
// versions of earlier cycles may not be committed yet). Priority changes come
// first, then every release, then the preemptions decided (stopping lines),
// then every start, so that a start never appears to use capacity that the
// same commit gave back, and a preemption is judged against the usage the
// engine decided on. Called by the loop's finish, before the cycle's
// versions replace the older ones in the loop's view; the committer appends
// the events after the commit.
func (c *cycle) cycleEvents() []event.Event {
	d := c.d
	if d.evlog == nil {
		return nil
	}
	var prio, rel, stop, start []event.Event
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, id := range d.evlog.decided {
		old, nu := d.loopJob(id), c.changed[id]
		if old == nil || nu == nil || !old.Status.Active() {
			continue
		}
		e := baseEvent(nu, event.Stopping, c.now, nu.StatusReason)
		e.Priority = old.Priority
		e.For = d.evlog.preemptFor[id]
		stop = append(stop, event.Lines(e, old.Demand)...)
	}
	d.evlog.decided = d.evlog.decided[:0]
	for _, id := range c.order {
		old, nu := d.loopJob(id), c.changed[id]
		if old == nil || nu == nil {
			continue
		}
		if old.Priority != nu.Priority && !old.Status.Terminal() {
			e := baseEvent(nu, event.Priority, c.now, "")
			prio = append(prio, e)
		}
		oldHolds := old.Status.Active()
		oldAttempt := ""
		if a := old.LatestAttempt(); a != nil {
			oldAttempt = a.ID
		}
		newAttempt := ""
		if a := nu.LatestAttempt(); a != nil {
			newAttempt = a.ID
		}
		released := oldHolds && (!nu.Status.Active() || newAttempt != oldAttempt)
		if released {
			rel = append(rel, d.releaseEvents(old, nu, oldAttempt, c.now)...)
		}
		if nu.Status.Active() && (!oldHolds || released) {
			reason := attemptReason(newAttempt, nu.StatusReason)
			start = append(start, event.Lines(baseEvent(nu, event.Start, c.now, reason), nu.Demand)...)
		}
		if !oldHolds && !old.Status.Terminal() && nu.Status == qshare.JobFailed {
			// Failed while waiting (terminated, time-limit action): it leaves the queue holding nothing.
			rel = append(rel, event.Lines(baseEvent(nu, event.Fail, c.now, nu.StatusReason), nil)...)
		}
	}
	return append(append(append(prio, rel...), stop...), start...)
}

// releaseEvents are the lines of a job giving back the capacity of attempt
// (the one old held): a preemption (with whom it made room for, and a
// following fail when it was final), a finish, or a fail: final, or a
// requeue without a preemption (a failed attempt retried, a lost attempt),
// after which the job starts again.
func (d *Daemon) releaseEvents(old, nu *qshare.Job, attempt string, now time.Time) []event.Event {
	a := attemptByID(nu, attempt)
	reason := nu.StatusReason
	if a != nil && a.StatusReason != "" {
		reason = a.StatusReason
	}
	forJob := d.evlog.preemptFor[nu.ID]
	delete(d.evlog.preemptFor, nu.ID)
	var out []event.Event
	switch {
	case a != nil && a.Preempted:
		e := baseEvent(nu, event.Preempt, now, reason)
		e.Priority = old.Priority
		e.For = forJob
		out = append(out, event.Lines(e, old.Demand)...)
		if nu.Status == qshare.JobFailed {
			out = append(out, event.Lines(baseEvent(nu, event.Fail, now, nu.StatusReason), nil)...)
		}
	case nu.Status == qshare.JobSucceeded:
		out = append(out, event.Lines(baseEvent(nu, event.Finish, now, reason), old.Demand)...)
	case nu.Status == qshare.JobFailed:
		out = append(out, event.Lines(baseEvent(nu, event.Fail, now, nu.StatusReason), old.Demand)...)
	default:
		// Requeued: a failed attempt retried, or a lost one. (The job's own
		// reason may already be its next start's, in the same commit.)
		why := reason + "; the job was requeued"
		if a != nil && !strings.HasPrefix(reason, "Attempt lost") {
			why = fmt.Sprintf("attempt %d failed: %s; retrying", a.N, reason)
		}
		out = append(out, event.Lines(baseEvent(nu, event.Fail, now, why), old.Demand)...)
	}
	return out
}

// reconcileEvents replays the log and appends what brings it in line with
// the jobs as the store has them: the commits whose lines a crash lost,
// and a lead line for this server's start of scheduling. A job
// that the store still has holding capacity keeps holding in the log; its
// recovery logs the end of its attempt like any other. Called by Start after
// recovery, before the loop runs.
func (d *Daemon) reconcileEvents() error {
	if d.evlog == nil {
		return nil
	}
	logged := map[string]*loggedJob{}
	var lastT float64
	err := d.evlog.sink.Events(func(e event.Event) {
		if e.T > lastT {
			lastT = e.T
		}
		j := logged[e.Job]
		switch e.Event {
		case event.Submit:
			if j == nil || j.done {
				j = &loggedJob{priority: e.Priority}
				logged[e.Job] = j
			}
		case event.Priority:
			if j != nil {
				j.priority = e.Priority
			}
		case event.Start:
			if j != nil {
				j.done, j.failT = false, 0 // after a fail: a retried attempt
				if j.holding == nil {
					j.holding = qshare.Capacity{}
				}
				if e.Instances > 0 {
					j.holding[e.InstanceType] += e.Instances
				}
				j.attempt = startedAttempt(e.Reason)
			}
		case event.Preempt:
			if j != nil {
				j.holding = nil
			}
		case event.Finish, event.Fail:
			if j != nil {
				j.holding = nil
				j.done, j.failT = true, 0
				if e.Event == event.Fail {
					j.failT = e.T
				}
			}
		}
	})
	var bad *event.BadLinesError
	if errors.As(err, &bad) {
		// The rest of the log was read; the server starts and appends after
		// the bad lines (check-events reports them).
		for _, l := range bad.Lines {
			d.log.Warn("event log: an unreadable line is skipped", "path", bad.Path, "line", l.Line, "err", l.Err)
		}
	} else if err != nil {
		return err
	}
	d.evlog.lastT = lastT
	now := d.now()
	d.mu.RLock()
	jobs := make([]*qshare.Job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	d.mu.RUnlock()
	sort.Slice(jobs, func(a, b int) bool {
		if !jobs[a].CreatedAt.Equal(jobs[b].CreatedAt) {
			return jobs[a].CreatedAt.Before(jobs[b].CreatedAt)
		}
		return jobs[a].ID < jobs[b].ID
	})
	const why = "the event log is reconciled with the store after a restart"
	var subs, prio, rel, ran, start []event.Event
	for _, j := range jobs {
		l := logged[j.ID]
		if l == nil {
			if j.Status.Terminal() {
				continue // finished before the log was started, or its lines were lost with it
			}
			subs = append(subs, submitEvents(j)...)
			l = &loggedJob{priority: j.Priority}
		}
		if l.done && (l.failT == 0 || (j.Status == qshare.JobFailed && unixSeconds(j.StoppedAt) <= l.failT)) {
			// Finished, or failed at its last line (a fail line is
			// written at the commit's time, the job's StoppedAt, or
			// later). A job whose last line is a requeue goes on.
			continue
		}
		if l.priority != j.Priority && !j.Status.Terminal() {
			prio = append(prio, baseEvent(j, event.Priority, now, why))
		}
		holds := j.Status.Active()
		if l.holding != nil && holds && l.attempt != "" && j.LatestAttempt() != nil && j.LatestAttempt().ID != l.attempt {
			// The logged attempt ended and another started while their
			// lines were lost: its release comes with the others, and the
			// new start after them, or the log would hold the job's
			// capacity through what ran meanwhile.
			kind := event.Fail
			for _, a := range j.Attempts {
				if a.ID == l.attempt && a.Preempted {
					kind = event.Preempt
				}
			}
			rel = append(rel, event.Lines(baseEvent(j, kind, now, why), l.holding)...)
			start = append(start, event.Lines(baseEvent(j, event.Start, now, why), j.Demand)...)
			continue
		}
		switch {
		case l.holding != nil && !holds:
			kind := event.Fail // failed, or requeued after a failed or lost attempt
			if j.Status == qshare.JobSucceeded {
				kind = event.Finish
			} else if a := j.LatestAttempt(); a != nil && a.Preempted && j.Status != qshare.JobFailed {
				kind = event.Preempt
			}
			e := baseEvent(j, kind, now, why)
			rel = append(rel, event.Lines(e, l.holding)...)
		case l.holding == nil && holds:
			start = append(start, event.Lines(baseEvent(j, event.Start, now, why), j.Demand)...)
		case l.holding == nil && j.Status.Terminal():
			// A job that ran and ended while its lines were lost (two lost
			// batches or more, a failed append; or, after a logged requeue,
			// a crash) starts and ends right after the releases, when the
			// most capacity is free.
			a := j.LatestAttempt()
			switch {
			case j.Status == qshare.JobSucceeded:
				ran = append(ran, event.Lines(baseEvent(j, event.Start, now, why), j.Demand)...)
				ran = append(ran, event.Lines(baseEvent(j, event.Finish, now, why), j.Demand)...)
			case l.attempt != "" && a != nil && a.ID != l.attempt:
				ran = append(ran, event.Lines(baseEvent(j, event.Start, now, why), j.Demand)...)
				ran = append(ran, event.Lines(baseEvent(j, event.Fail, now, why), j.Demand)...)
			default:
				rel = append(rel, event.Lines(baseEvent(j, event.Fail, now, why), nil)...)
			}
		}
	}
	if n := len(subs) + len(prio) + len(rel) + len(ran) + len(start); n > 0 {
		d.log.Info("event log reconciled with the store", "events", n)
	}
	// The lead line marks where this server's scheduling begins, after the
	// submits the log missed (which keep their own times) and before what
	// changed at this instant: a head job that fitted while no server led
	// waited for a leader, and check-events counts its wait from here.
	lead := event.Event{T: unixSeconds(now), Event: event.Lead}
	d.emitEvents(slices.Concat(subs, []event.Event{lead}, prio, rel, ran, start))
	return nil
}

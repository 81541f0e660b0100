package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/executor"
	"qshare/store"
)

// recover rebuilds memory and the engine from the store, then asks the
// executor about every attempt that was in flight. What it learns is posted
// to the inbox (d.post, under the lock: the attempts recovered first are
// already waited on by goroutines that post their ends meanwhile), so the
// first cycle records it like any other report. lctx is the loop's
// context, for the goroutines that wait on recovered attempts.
func (d *Daemon) recover(ctx, lctx context.Context, s *store.State) error {
	if err := d.checkStoredExecutors(s.Environments, s.Jobs); err != nil {
		return err
	}
	for i := range s.Environments {
		e := s.Environments[i]
		d.envs[e.Name] = &e
		if err := d.eng.SetEnvironment(engine.EnvironmentOf(&e)); err != nil {
			return fmt.Errorf("daemon: restore environment %s: %w", e.Name, err)
		}
	}
	for i := range s.Policies {
		p := s.Policies[i]
		d.policies[p.Name] = &p
	}
	for i := range s.Queues {
		q := s.Queues[i]
		d.queues[q.Name] = &q
	}
	for _, q := range d.queues {
		if err := d.eng.SetQueue(engine.QueueOf(q)); err != nil {
			return fmt.Errorf("daemon: restore job queue %s: %w", q.Name, err)
		}
		if !d.isQuotaQueue(q) {
			if err := d.eng.SetShare(d.fifoShare(q)); err != nil {
				return fmt.Errorf("daemon: restore job queue %s: %w", q.Name, err)
			}
		}
	}
	for i := range s.Shares {
		sh := s.Shares[i]
		d.shares[store.ShareKey{Queue: sh.JobQueue, Name: sh.Name}] = &sh
		if err := d.eng.SetShare(engine.ShareOf(&sh)); err != nil {
			return fmt.Errorf("daemon: restore quota share %s/%s: %w", sh.JobQueue, sh.Name, err)
		}
	}
	for i := range s.Plans {
		p := s.Plans[i]
		d.plans[p.Name] = &p
		if err := d.eng.SetPlan(engine.PlanOf(&p)); err != nil {
			return fmt.Errorf("daemon: restore capacity plan %s: %w", p.Name, err)
		}
	}
	if err := d.settleRecovered(ctx); err != nil {
		return fmt.Errorf("daemon: recovery commit of resources: %w", err)
	}

	var fixes []qshare.Job
	counts := map[string]int{}
	keep := map[string]bool{} // the attempts of unfinished jobs, for the sweep
	live := map[string]bool{} // the unfinished jobs, for the sweep of what is kept per job
	for i := range s.Jobs {
		j := &s.Jobs[i]
		d.installJob(j)
		if !j.Status.Terminal() {
			live[j.ID] = true
			if a := j.LatestAttempt(); a != nil {
				keep[a.ID] = true
			}
		}
		if j.ClientToken != "" {
			e := &tokenEntry{done: make(chan struct{}), hash: j.RequestHash, job: j.ID, at: j.CreatedAt}
			close(e.done)
			d.tokens[j.ClientToken] = e
		}
		if j.Status.Terminal() {
			continue
		}
		counts[string(j.Status)]++
		switch j.Status {
		case qshare.JobSubmitted, qshare.JobPending, qshare.JobRunnable:
			if j.IsTerminated {
				f := *cloneJob(j)
				f.Version++
				f.Status = qshare.JobFailed
				f.StoppedAt = d.now()
				fixes = append(fixes, f)
				continue
			}
			if j.Status != qshare.JobRunnable {
				f := *cloneJob(j)
				f.Version++
				f.Status = qshare.JobRunnable
				fixes = append(fixes, f)
			}
			if err := d.eng.Submit(d.spec(j)); err != nil {
				d.log.Error("recovery: engine refused job", "job", j.ID, "err", err)
			}
		default:
			d.recoverAttempt(ctx, lctx, j, &fixes)
		}
	}
	d.rebuildFairUsage(s.Jobs)
	if len(fixes) > 0 {
		if err := d.st.Commit(ctx, &store.Change{PutJobs: fixes}); err != nil {
			return fmt.Errorf("daemon: recovery commit: %w", err)
		}
		for i := range fixes {
			d.setJob(&fixes[i])
		}
	}
	d.sweep(lctx, keep, live)
	d.log.Info("recovered from store", "environments", len(s.Environments), "policies", len(s.Policies), "queues", len(s.Queues),
		"shares", len(s.Shares), "plans", len(s.Plans), "jobs", len(s.Jobs), "unfinished", counts)
	return nil
}

// recoverAttempt re-attaches to the attempt of a job that held capacity when
// the server stopped. The job keeps its capacity in the engine until the
// attempt is known to have ended.
func (d *Daemon) recoverAttempt(ctx, lctx context.Context, j *qshare.Job, fixes *[]qshare.Job) {
	a := j.LatestAttempt()
	if a == nil {
		// Never happens with a store written by this daemon: requeue it.
		f := cloneJob(j)
		f.Version++
		f.Status = qshare.JobRunnable
		*fixes = append(*fixes, *f)
		if err := d.eng.Submit(d.spec(j)); err != nil {
			d.log.Error("recovery: engine refused job", "job", j.ID, "err", err)
		}
		return
	}
	at := a.StartedAt
	if at.IsZero() {
		at = a.ScheduledAt
	}
	if err := d.eng.Restore(d.spec(j), at); err != nil {
		d.log.Error("recovery: engine refused running job", "job", j.ID, "err", err)
		return
	}
	r := &run{job: j.ID, attempt: a.ID, n: a.N, exec: a.ExecutorName}
	d.runs[j.ID] = r
	d.recoverStop(j, a, r)
	if j.Status == qshare.JobScheduled || j.Status == qshare.JobStarting {
		// SCHEDULED: STARTING was never persisted, so Start was never called.
		// STARTING: Start may have launched it, but its handle was never
		// persisted. Either way, start it (again): Start is idempotent by
		// attempt ID and re-attaches to an attempt already launched, so the
		// job never runs twice.
		r.phase = phasePending
		r.mustStart = j.Status == qshare.JobStarting
		d.post(op{kind: opBeginStart, id: j.ID, attempt: a.ID})
		d.log.Info("recovery: starting the attempt (again)", "job", j.ID, "attempt", a.ID, "status", j.Status)
		return
	}
	h := executor.Handle{AttemptID: a.ID, StartedAt: a.StartedAt, LogPath: a.LogPath, State: a.Executor}
	rec, err := d.execs.Get(r.exec).Recover(ctx, h)
	r.phase = phaseRunning
	d.pendingDirty = true
	if limit := d.runtimeLimit(j); limit > 0 && !a.StartedAt.IsZero() {
		r.deadline = a.StartedAt.Add(limit)
	}
	if err != nil {
		// The attempt's fate is unknown, and requeueing it could run the job
		// twice at once: keep it holding its capacity and keep asking.
		d.log.Warn("recovery: executor could not recover attempt; the job keeps its capacity and recovery is retried", "job", j.ID, "attempt", a.ID, "err", err)
		d.bg.Go(func() {
			d.retryRecover(lctx, r.exec, j.ID, h)
		})
		return
	}
	switch rec {
	case executor.Running, executor.Exited:
		d.bg.Go(func() {
			d.waitAttempt(lctx, r.exec, j.ID, a.ID)
		})
		if r.stop != stopNone {
			d.post(op{kind: opCommand, reply: make(chan error, 1), fn: func(c *cycle) error {
				if cur := c.d.runs[j.ID]; cur == r {
					c.stopRun(r)
				}
				return nil
			}})
		}
		d.log.Info("recovery: attempt re-attached", "job", j.ID, "attempt", a.ID, "outcome", map[executor.Recovery]string{executor.Running: "running", executor.Exited: "exited"}[rec])
	default:
		d.post(op{kind: opExited, id: j.ID, attempt: a.ID, lost: true,
			exit: executor.Exit{AttemptID: a.ID, ExitCode: -1, Reason: "the server restarted and the executor could not find the attempt", At: d.now()}})
		d.log.Warn("recovery: attempt lost, requeueing", "job", j.ID, "attempt", a.ID)
	}
}

// resumeDeletions carries on the deletions of queues and shares that were
// DELETING when the server stopped.
func (d *Daemon) resumeDeletions() {
	d.mu.RLock()
	var shares []store.ShareKey
	for k, s := range d.shares {
		if s.Status == qshare.StatusDeleting {
			shares = append(shares, k)
		}
	}
	var queues []string
	for n, q := range d.queues {
		if q.Status == qshare.StatusDeleting {
			queues = append(queues, n)
		}
	}
	d.mu.RUnlock()
	for _, key := range shares {
		d.drainShare(key)
	}
	for _, name := range queues {
		d.drainQueue(name)
	}
}

// recoverStop restores a stop that was decided before the restart: a
// termination (Job.IsTerminated), or a preemption or timeout (the running
// attempt's StatusReason). The stop is issued again once the attempt runs.
func (d *Daemon) recoverStop(j *qshare.Job, a *qshare.Attempt, r *run) {
	switch {
	case a.StoppedAt.IsZero() && strings.HasPrefix(a.StatusReason, preemptPrefix):
		r.stop, r.reason = stopPreempt, a.StatusReason
		r.final = j.PreemptionRetries != nil && j.Preemptions-planStops(j) >= *j.PreemptionRetries
		if end, ok := planStopEnd(a.StatusReason); ok {
			// A capacity plan's end: never final, and still timed to be
			// over by the end.
			r.final, r.grace = false, end.Sub(d.now())
		}
	case a.StoppedAt.IsZero() && strings.HasPrefix(a.StatusReason, timeoutPrefix):
		r.stop, r.reason = stopTimeout, a.StatusReason
	case j.IsTerminated:
		r.stop, r.reason = stopTerminate, j.StatusReason
	default:
		return
	}
	r.recoveredStop = true
	if err := d.eng.Stopping(j.ID); err != nil {
		d.log.Error("recovery: engine stopping failed", "job", j.ID, "err", err)
	}
	d.log.Info("recovery: a stop was decided before the restart; carrying it out", "job", j.ID, "attempt", a.ID, "reason", r.reason)
}

// retryRecover asks the executor to recover an attempt until it answers,
// backing off up to 30 s, then follows the attempt as recovery would have.
func (d *Daemon) retryRecover(ctx context.Context, exec, job string, h executor.Handle) {
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		rec, err := d.execs.Get(exec).Recover(ctx, h)
		if err != nil {
			d.log.Warn("recovery: executor still cannot recover attempt", "job", job, "attempt", h.AttemptID, "err", err)
			continue
		}
		if rec == executor.Lost {
			d.post(op{kind: opExited, id: job, attempt: h.AttemptID, lost: true,
				exit: executor.Exit{AttemptID: h.AttemptID, ExitCode: -1, Reason: "the server restarted and the executor could not find the attempt", At: d.now()}})
			return
		}
		d.log.Info("recovery: attempt re-attached after retrying", "job", job, "attempt", h.AttemptID)
		d.waitAttempt(ctx, exec, job, h.AttemptID)
		return
	}
}

// rebuildFairUsage gives the engine the usage of every fair-share queue's
// share identifiers, which it keeps in memory only: rebuilt from the
// attempts of the stored jobs (each from its ScheduledAt to its StoppedAt,
// or to now for one still running), weighted and decayed as the engine
// counts them. Jobs the store no longer has (deleted by retention) are not
// counted; their usage had decayed for at least the retention period.
func (d *Daemon) rebuildFairUsage(jobs []qshare.Job) {
	spans := map[string][]engine.FairInterval{}
	for i := range jobs {
		j := &jobs[i]
		if j.ShareIdentifier == "" || j.QuotaShare != "" {
			continue
		}
		for _, a := range j.Attempts {
			if !a.ScheduledAt.IsZero() {
				spans[j.JobQueue] = append(spans[j.JobQueue], engine.FairInterval{ShareIdentifier: j.ShareIdentifier,
					Instances: j.Demand.Total(), From: a.ScheduledAt, To: a.StoppedAt})
			}
		}
	}
	now := d.now()
	for q, sp := range spans {
		if err := d.eng.RebuildFairUsage(q, sp, now); err != nil {
			d.log.Warn("recovery: fair-share usage not rebuilt", "queue", q, "err", err)
		}
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/executor"
	"qshare/trainingjob"
)

// The control loop. Each cycle takes the inbox (submits, commands, reports
// from executors), feeds it to the engine, lets the engine schedule, and
// gathers every resulting job change into one store commit, which the
// committer makes (commit.go) while the loop goes on. Only after the commit
// are the changes installed in memory, the commands answered, and the
// actions taken: start, stop, wait. A crash between deciding and acting
// therefore leaves a store that Start can recover from, and every executor
// action is keyed by attempt ID, so acting twice is harmless.

type opKind int

const (
	opSubmit     opKind = iota + 1 // a job was committed RUNNABLE; give it to the engine
	opBeginStart                   // a SCHEDULED attempt: persist STARTING, then start it
	opStarted                      // executor.Start returned
	opExited                       // the attempt ended (Wait returned, or it never ran)
	opCommand                      // run fn in the loop and answer reply
)

type op struct {
	kind    opKind
	id      string // job ID
	attempt string
	handle  executor.Handle
	exit    executor.Exit
	lost    bool // opExited: the attempt's fate is unknown; requeue without using a retry
	err     error
	fn      func(*cycle) error
	reply   chan error
	client  bool // opCommand: a client's request (command), refused while the store cannot write
}

type phase int

const (
	phasePending  phase = iota + 1 // SCHEDULED, Start not called yet
	phaseStarting                  // STARTING, Start in flight
	phaseRunning                   // Start returned (or recovered); Wait in flight
)

type stopKind int

const (
	stopNone stopKind = iota
	stopPreempt
	stopTerminate
	stopTimeout
)

// run is the loop's view of a job that holds capacity.
type run struct {
	job      string
	attempt  string
	n        int
	phase    phase
	stop     stopKind
	final    bool   // a preemption that fails the job
	reason   string // why it is being stopped
	stopSent bool
	deadline time.Time
	// mustStart: the attempt may have been launched before a restart (it was
	// STARTING), so it is started again (Start is idempotent by attempt ID
	// and adopts a launched attempt) even if it is to be stopped at once.
	mustStart bool
	// recoveredStop: the stop was decided before a restart (recoverStop).
	recoveredStop bool
	// ownStart: the attempt was started within its share's own limit
	// (nothing borrowed); false for an attempt recovered after a restart.
	ownStart bool
	// pending is the executor's last reason why the attempt waits in its
	// own scheduler, "" while it runs; pendingSeen is false until the
	// first look (see pendingReasons).
	pending     string
	pendingSeen bool
	// grace is the stop's grace period when it is not the configured one:
	// a capacity plan's end stops the attempt to have stopped by then.
	grace time.Duration
	// exec names the executor that runs the attempt
	// (qshare.Attempt.ExecutorName, "" for the default).
	exec string
}

// waitInfo remembers since when a RUNNABLE head has waited for one reason.
type waitInfo struct {
	reason string
	since  time.Time
}

// command runs fn in the next loop cycle and returns its error once the
// cycle's changes are durable.
func (d *Daemon) command(ctx context.Context, fn func(*cycle) error) error {
	if !d.started {
		return qshare.Errorf(qshare.EINTERNAL, "the server is starting; retry the request")
	}
	if d.storeDown.Load() {
		return errStoreDown(false)
	}
	reply := make(chan error, 1)
	d.post(op{kind: opCommand, fn: fn, reply: reply, client: true})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return qshare.Errorf(qshare.EINTERNAL, "the request timed out before it was applied; it may still take effect, so check before retrying")
	case <-d.done:
		return qshare.Errorf(qshare.EINTERNAL, "the server is shutting down; retry the request")
	}
}

func (d *Daemon) loop(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	// wake fires when the engine asked for a pass (a minimum run time
	// ends: see engine.NextWake), so that the job waiting for it starts
	// then, not at the next tick.
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	defer wake.Stop()
	for {
		select {
		case <-ctx.Done():
			d.failPending()
			<-d.cdone
			d.failQueued() // what the loop queued after the committer's last look
			return
		case <-d.kick:
		case <-t.C:
		case <-wake.C:
		}
		d.runCycle(ctx)
		if !d.wakeAt.IsZero() {
			wake.Reset(max(d.wakeAt.Sub(d.now()), 0))
		} else {
			wake.Stop()
		}
	}
}

// errStoreDown is the ServerException of a command while the loop's commit
// fails: applied says whether the command is part of the commit being
// retried (it then takes effect once the store writes again). The store's
// own error stays in the server's log (the commit logs it): it can name
// the database's file, host or user, which a client is not told.
func errStoreDown(applied bool) error {
	if applied {
		return qshare.Errorf(qshare.EINTERNAL, "the store cannot write (the server's log says why): the change is kept and retried, so it may still take effect; check before retrying")
	}
	return qshare.Errorf(qshare.EINTERNAL, "the store cannot write (the server's log says why): the change was not applied; retry when the store writes again")
}

// refuseCommands answers the clients' commands waiting in the inbox with
// a ServerException, without applying them: the loop is retrying a commit
// that the store refuses.
func (d *Daemon) refuseCommands() {
	d.mu.Lock()
	keep := d.inbox[:0]
	var refused []op
	for _, o := range d.inbox {
		if o.kind == opCommand && o.client {
			refused = append(refused, o)
			continue
		}
		keep = append(keep, o)
	}
	clear(d.inbox[len(keep):])
	d.inbox = keep
	d.mu.Unlock()
	for _, o := range refused {
		o.reply <- errStoreDown(false)
	}
}

// failPending answers the commands left in the inbox at shutdown.
func (d *Daemon) failPending() {
	d.mu.Lock()
	ops := d.inbox
	d.inbox = nil
	d.mu.Unlock()
	for _, o := range ops {
		if o.reply != nil {
			o.reply <- qshare.Errorf(qshare.EINTERNAL, "the server is shutting down; retry the request")
		}
	}
}

// cycle gathers the changes of one loop cycle.
type cycle struct {
	d       *Daemon
	ctx     context.Context
	now     time.Time
	changed map[string]*qshare.Job
	order   []string
	replies []reply
	effects []func()
	// posts are ops for the next cycles that need not wait for this
	// cycle's commit (they only change the loop's own view).
	posts []op
}

type reply struct {
	ch  chan error
	err error
}

func (d *Daemon) runCycle(ctx context.Context) {
	if d.storeDown.Load() {
		// The committer is retrying a commit that the store refuses: the
		// clients' commands are refused, as d.command does, not queued
		// behind it.
		d.refuseCommands()
	}
	d.mu.Lock()
	ops := d.inbox
	d.inbox, d.spare = d.spare, nil
	d.mu.Unlock()
	defer func() {
		clear(ops) // drop what the ops refer to
		d.mu.Lock()
		d.spare = ops[:0]
		d.mu.Unlock()
	}()

	c := &cycle{d: d, ctx: ctx, now: d.now(), changed: map[string]*qshare.Job{}}
	d.engMu.Lock()
	for _, o := range ops {
		c.apply(o)
	}
	c.timers()
	c.pendingReasons()
	t0 := time.Now()
	decisions := d.eng.AppendSchedule(d.decisions[:0], c.now)
	d.obs.SchedulingPass(time.Since(t0))
	d.wakeAt = time.Time{}
	if at, ok := d.eng.NextWake(); ok {
		d.wakeAt = at
	}
	for _, dec := range decisions {
		c.decide(dec)
	}
	clear(decisions) // drop what the decisions refer to
	d.decisions = decisions[:0]
	d.engMu.Unlock()
	c.finish()
}

// job returns the job as this cycle sees it: its own change, else the
// newest version an earlier cycle changed (committed or not).
func (c *cycle) job(id string) *qshare.Job {
	if j := c.changed[id]; j != nil {
		return j
	}
	c.d.mu.RLock()
	defer c.d.mu.RUnlock()
	return c.d.loopJob(id)
}

// loopJob is the loop's view of a job: the version in flight to the store,
// else the durable one. Callers hold d.mu.
func (d *Daemon) loopJob(id string) *qshare.Job {
	if j := d.inflight[id]; j != nil {
		return j
	}
	return d.jobs[id]
}

// edit returns a copy of the job that this cycle may change and will commit.
func (c *cycle) edit(id string) *qshare.Job {
	if j := c.changed[id]; j != nil {
		return j
	}
	c.d.mu.RLock()
	old := c.d.loopJob(id)
	c.d.mu.RUnlock()
	j := cloneJob(old)
	j.Version++
	c.changed[id] = j
	c.order = append(c.order, id)
	return j
}

func (c *cycle) apply(o op) {
	d := c.d
	switch o.kind {
	case opSubmit:
		j := c.job(o.id)
		if j == nil || j.Status != qshare.JobRunnable {
			return
		}
		if err := d.eng.Submit(d.spec(j)); err != nil {
			j = c.edit(o.id)
			c.fail(j, fmt.Sprintf("The job could not be queued: %s", qshare.ErrorMessageOf(err)))
			d.log.Error("engine refused job", "job", o.id, "err", err)
		}
	case opBeginStart:
		r := d.runs[o.id]
		if r == nil || r.attempt != o.attempt || r.phase != phasePending {
			return
		}
		if r.stop != stopNone && !r.mustStart {
			c.finishAttempt(r, executor.Exit{AttemptID: r.attempt, ExitCode: -1, Stopped: true, Reason: "Stopped before the attempt started", At: c.now}, false)
			return
		}
		j := c.edit(o.id)
		reason := fmt.Sprintf("Starting attempt %d", r.n)
		if j.IsTerminated {
			reason = j.StatusReason
		}
		c.transition(j, qshare.JobStarting, reason)
		r.phase = phaseStarting
		spec := executor.Spec{JobID: j.ID, JobName: j.Name, AttemptID: r.attempt, Attempt: r.n, Queue: j.JobQueue,
			Share: j.QuotaShare, Demand: j.Demand, Payload: j.Payload, RunAs: j.Tags[qshare.TagRunAs], Executor: r.exec}
		if a := attemptByID(j, r.attempt); a != nil {
			spec.ResourceARN = a.ResourceARN
		}
		c.effects = append(c.effects, func() { d.startAttempt(c.ctx, spec) })
	case opStarted:
		r := d.runs[o.id]
		if r == nil || r.attempt != o.attempt || r.phase == phaseRunning {
			return
		}
		if o.err != nil {
			c.finishAttempt(r, executor.Exit{AttemptID: r.attempt, ExitCode: -1, Reason: "CannotStartAttempt: " + o.err.Error(), At: c.now}, false)
			return
		}
		r.phase = phaseRunning
		d.pendingDirty = true
		j := c.edit(o.id)
		a := attemptByID(j, r.attempt)
		started := o.handle.StartedAt
		if started.IsZero() {
			started = c.now
		}
		if a != nil {
			a.StartedAt = started
			a.LogPath = o.handle.LogPath
			a.Executor = o.handle.State
		}
		j.StartedAt = started
		reason := fmt.Sprintf("Attempt %d is running", r.n)
		if j.IsTerminated {
			reason = j.StatusReason // the termination's reason, kept for the end
		}
		c.transition(j, qshare.JobRunning, reason)
		if limit := d.runtimeLimit(j); limit > 0 {
			r.deadline = started.Add(limit)
		}
		if r.stop != stopNone {
			c.stopRun(r)
		}
	case opExited:
		r := d.runs[o.id]
		if r == nil || r.attempt != o.attempt {
			return
		}
		c.finishAttempt(r, o.exit, o.lost)
	case opCommand:
		err := o.fn(c)
		c.replies = append(c.replies, reply{o.reply, err})
	}
}

// transition sets a job's status and reason and logs it.
func (c *cycle) transition(j *qshare.Job, to qshare.JobStatus, reason string) {
	from := j.Status
	j.Status, j.StatusReason = to, reason
	if c.d.infoLog() {
		c.d.log.Info("job transition", "job", j.ID, "name", j.Name, "from", from, "to", to, "reason", reason)
	}
}

func (c *cycle) fail(j *qshare.Job, reason string) {
	c.transition(j, qshare.JobFailed, reason)
	j.StoppedAt = c.now
	c.d.dropMeta(j.ID)
	c.jobFinished(j.ID)
}

// jobFinished tells an executor that keeps something per job
// (executor.JobFinisher: a checkpoint volume) that the job is done, once
// the cycle's changes are committed.
func (c *cycle) jobFinished(id string) {
	// Any executor may keep something for the job (it ran attempts on
	// one, and its environment may have moved to another since); each
	// ignores a job it knows nothing of.
	c.d.execs.Each(func(_ string, ex executor.Executor) {
		if f, ok := ex.(executor.JobFinisher); ok {
			c.effects = append(c.effects, func() { f.JobFinished(id) })
		}
	})
}

func attemptByID(j *qshare.Job, id string) *qshare.Attempt {
	for i := len(j.Attempts) - 1; i >= 0; i-- {
		if j.Attempts[i].ID == id {
			return &j.Attempts[i]
		}
	}
	return nil
}

// The beginnings of the reasons of stops that qshare decides; an attempt
// that is still running carries one in its StatusReason once the stop is
// decided, which is how a restarted server knows (recoverStop).
const (
	preemptPrefix = "Preempted by quota management"
	timeoutPrefix = "Job attempt duration exceeded timeout"
)

// payloadMeta is what the loop reads from a job's payload, parsed once.
// It keeps these two facts and not the parsed payload: a waiting job would
// otherwise hold the parse (600 B in 4 objects for a small payload, 1.5 KB
// in 26 for the SageMaker SDK's) for as long as it waits, which with many
// jobs waiting was a quarter of the daemon's memory per job and of the
// garbage collector's marking. The executor parses the payload again when
// it starts an attempt, on the attempt's own goroutine (a few
// microseconds: go test ./trainingjob -bench Parse).
type payloadMeta struct {
	trainingJobName string
	maxRuntime      int64
}

func metaOf(r *trainingjob.Request) payloadMeta {
	return payloadMeta{trainingJobName: r.TrainingJobName, maxRuntime: r.MaxRuntimeSeconds()}
}

// payloadMeta returns the job's payload facts, from the cache Submit fills
// or by parsing the payload (after a restart).
func (d *Daemon) payloadMeta(j *qshare.Job) payloadMeta {
	d.metaMu.Lock()
	m, ok := d.meta[j.ID]
	d.metaMu.Unlock()
	if ok {
		return m
	}
	if r, err := trainingjob.ParseAccepted(j.Payload); err == nil { // accepted at submit, perhaps by an older version
		m = metaOf(r)
	}
	if !j.Status.Terminal() {
		d.setMeta(j.ID, m)
	}
	return m
}

// runtimeLimit is the shorter of timeoutConfig.attemptDurationSeconds and
// the payload's StoppingCondition.MaxRuntimeInSeconds, or 0 for none.
func (d *Daemon) runtimeLimit(j *qshare.Job) time.Duration {
	secs := j.AttemptDurationSeconds
	if m := d.payloadMeta(j).maxRuntime; m > 0 && (secs == 0 || m < secs) {
		secs = m
	}
	return time.Duration(secs) * time.Second
}

// finishAttempt records how an attempt ended and what becomes of its job,
// and releases the job's capacity in the engine.
func (c *cycle) finishAttempt(r *run, exit executor.Exit, lost bool) {
	d := c.d
	delete(d.runs, r.job)
	j := c.edit(r.job)
	at := exit.At
	if at.IsZero() {
		at = c.now
	}
	reason := exit.Reason
	if reason == "" {
		switch {
		case exit.Signal != "":
			reason = "Essential process was ended by " + exit.Signal
		default:
			reason = fmt.Sprintf("Essential process exited with code %d", exit.ExitCode)
		}
	}
	a := attemptByID(j, r.attempt)
	if a == nil {
		j.Attempts = append(j.Attempts, qshare.Attempt{N: r.n, ID: r.attempt, ScheduledAt: at, ExecutorName: storedExecutor(r.exec)})
		a = &j.Attempts[len(j.Attempts)-1]
	}
	a.StoppedAt = at
	if !lost && exit.Signal == "" && !exit.Stopped {
		code := exit.ExitCode
		a.ExitCode = &code
	}
	requeue := false
	switch {
	case j.IsTerminated:
		a.StatusReason = reason
		c.fail(j, j.StatusReason)
	case exit.Succeeded():
		a.StatusReason = reason
		c.transition(j, qshare.JobSucceeded, reason)
		j.StoppedAt = c.now
		c.jobFinished(j.ID)
	case r.stop == stopPreempt:
		a.Preempted = true
		a.StatusReason = r.reason
		j.Preemptions++
		if r.final {
			limit := 0
			if j.PreemptionRetries != nil {
				limit = *j.PreemptionRetries
			}
			c.fail(j, fmt.Sprintf("%s; the job has no preemption retries left (preemptionRetriesBeforeTermination %d)", r.reason, limit))
		} else {
			requeue = true
			c.transition(j, qshare.JobRunnable, r.reason)
		}
	case lost:
		a.StatusReason = "Attempt lost: " + reason
		requeue = true
		c.transition(j, qshare.JobRunnable, a.StatusReason+"; the job was requeued")
	default:
		if r.stop == stopTimeout {
			reason = r.reason
		}
		a.StatusReason = reason
		j.FailedAttempts++
		if retry, why := shouldRetry(j, reason); retry {
			requeue = true
			c.transition(j, qshare.JobRunnable, fmt.Sprintf("%s; retrying (%s)", reason, why))
		} else {
			c.fail(j, fmt.Sprintf("%s (%s)", reason, why))
		}
	}
	if requeue {
		j.RunnableSince = c.now
	} else {
		d.dropMeta(j.ID)
	}
	attempt, ex := r.attempt, d.execs.Get(r.exec)
	end := AttemptEnd{JobID: j.ID, JobName: j.Name, Queue: j.JobQueue, Share: j.QuotaShare, Payload: j.Payload, Attempt: *a}
	c.effects = append(c.effects, func() { ex.Forget(attempt); d.obs.AttemptCommitted(end) })
	if d.infoLog() {
		d.log.Info("attempt ended", "job", j.ID, "attempt", r.attempt, "n", r.n, "exitCode", exit.ExitCode, "signal", exit.Signal,
			"stopped", exit.Stopped, "lost", lost, "reason", a.StatusReason, "status", j.Status)
	}
	if requeue && r.recoveredStop && a.Preempted {
		// The engine did not decide this preemption (the server that did was
		// restarted), so it would not count it: give it the job again with
		// its count, in the same place (same priority and creation time).
		if err := d.eng.Release(j.ID, false); err != nil {
			d.log.Error("engine release failed", "job", j.ID, "err", err)
		}
		if err := d.eng.Submit(d.spec(j)); err != nil {
			d.log.Error("engine refused the requeued job", "job", j.ID, "err", err)
		}
		return
	}
	if err := d.eng.Release(j.ID, requeue); err != nil {
		d.log.Error("engine release failed", "job", j.ID, "requeue", requeue, "err", err)
	}
}

// shouldRetry applies the retry strategy to a failed attempt: the first
// evaluateOnExit rule whose glob matches the reason decides; with no match
// the job is retried while attempts remain.
func shouldRetry(j *qshare.Job, reason string) (bool, string) {
	attempts := 1
	if j.RetryStrategy != nil {
		attempts = j.RetryStrategy.Attempts
	}
	if j.FailedAttempts >= attempts {
		return false, fmt.Sprintf("attempt %d of %d", j.FailedAttempts, attempts)
	}
	if j.RetryStrategy == nil {
		return true, fmt.Sprintf("attempt %d of %d", j.FailedAttempts+1, attempts)
	}
	for i, rule := range j.RetryStrategy.EvaluateOnExit {
		if rule.OnStatusReason == "" || globMatch(rule.OnStatusReason, reason) {
			if strings.EqualFold(rule.Action, "EXIT") {
				return false, fmt.Sprintf("evaluateOnExit rule %d says EXIT", i+1)
			}
			return true, fmt.Sprintf("evaluateOnExit rule %d says RETRY; attempt %d of %d", i+1, j.FailedAttempts+1, attempts)
		}
	}
	return true, fmt.Sprintf("attempt %d of %d", j.FailedAttempts+1, attempts)
}

// globMatch reports whether s matches pattern, where * matches any run of
// characters and everything else matches itself.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// decide turns one engine decision into job changes and effects.
func (c *cycle) decide(dec engine.Decision) {
	d := c.d
	switch dec.Kind {
	case engine.DecisionStart:
		if c.job(dec.Job) == nil {
			d.log.Error("engine started an unknown job", "job", dec.Job)
			return
		}
		j := c.edit(dec.Job)
		n := len(j.Attempts) + 1
		r := &run{job: j.ID, attempt: fmt.Sprintf("%s-%d", j.ID, n), n: n, phase: phasePending, ownStart: len(dec.Borrowed) == 0,
			exec: d.queueExecutor(j.JobQueue)}
		if n == 1 {
			d.obs.JobStarted(j.JobQueue, j.QuotaShare, c.now.Sub(j.CreatedAt))
		}
		// The executor is recorded with the attempt, before Start (habit
		// 2), so that a restart recovers it through the same one.
		j.Attempts = append(j.Attempts, qshare.Attempt{N: n, ID: r.attempt, ResourceARN: d.trainingJobARN(j, n), ScheduledAt: c.now,
			ExecutorName: storedExecutor(r.exec)})
		j.ScheduledAt = c.now
		j.StartedAt = time.Time{}
		reason := "Capacity is available in quota share " + j.QuotaShare
		if j.QuotaShare == "" {
			reason = "Capacity is available in job queue " + j.JobQueue
		}
		if dec.Reason != "" {
			reason += ": " + dec.Reason
		}
		c.transition(j, qshare.JobScheduled, reason)
		d.runs[j.ID] = r
		delete(d.waits, j.ID)
		// The next cycle makes it STARTING without waiting for this commit:
		// the commits are made in order, so STARTING is never durable
		// before SCHEDULED, and the attempt is started only once STARTING
		// is (an effect of that cycle). Under load both land in one commit.
		c.posts = append(c.posts, op{kind: opBeginStart, id: r.job, attempt: r.attempt})
		if d.infoLog() {
			d.log.Info("decision: start", "job", j.ID, "queue", dec.Queue, "share", dec.Share, "attempt", n, "borrowed", dec.Borrowed.String(), "reason", dec.Reason)
		}
	case engine.DecisionPreempt:
		r := d.runs[dec.Job]
		if r == nil {
			d.log.Error("engine preempted a job that holds nothing here", "job", dec.Job)
			return
		}
		kind := "in-share"
		if dec.CrossShare {
			kind = "cross-share"
		}
		d.observePreempt(c, dec, r)
		r.stop, r.final = stopPreempt, dec.Final
		if !dec.StopBy.IsZero() {
			// A capacity plan ends: stop gracefully, killed by its end.
			r.grace = dec.StopBy.Sub(c.now)
		}
		d.notePreempt(dec.Job, dec.For)
		r.reason = fmt.Sprintf("%s (%s): %s", preemptPrefix, kind, dec.Reason)
		j := c.edit(dec.Job)
		j.StatusReason = r.reason
		if a := attemptByID(j, r.attempt); a != nil {
			a.StatusReason = r.reason // the decision, persisted for a restart (see recoverStop)
		}
		d.log.Info("decision: preempt", "job", dec.Job, "for", dec.For, "crossShare", dec.CrossShare, "final", dec.Final, "reason", dec.Reason)
		c.stopRun(r)
	case engine.DecisionWait:
		j := c.job(dec.Job)
		if j == nil || j.Status != qshare.JobRunnable {
			return
		}
		if w, ok := d.waits[dec.Job]; !ok || w.reason != dec.Reason {
			d.waits[dec.Job] = waitInfo{reason: dec.Reason, since: c.now}
		}
		if j.StatusReason != dec.Reason {
			j = c.edit(dec.Job)
			j.StatusReason = dec.Reason
			if d.infoLog() {
				d.log.Info("decision: wait", "job", dec.Job, "queue", dec.Queue, "share", dec.Share, "reason", dec.Reason)
			}
		}
	}
}

// trainingJobARN names attempt n of j's training job: the payload's
// TrainingJobName (or the job name), cut to fit SageMaker's 63 characters
// around the job ID and the attempt's number (trainingjob.AttemptName).
func (d *Daemon) trainingJobARN(j *qshare.Job, n int) string {
	name := j.Name
	if tn := d.payloadMeta(j).trainingJobName; tn != "" {
		name = tn
	}
	return trainingjob.AttemptARN(d.cfg.Region, d.cfg.AccountID, trainingjob.AttemptName(name, j.ID, n))
}

// stopRun arranges for an attempt to stop, according to how far it got.
func (c *cycle) stopRun(r *run) {
	d := c.d
	switch r.phase {
	case phasePending:
		if r.mustStart {
			return // opStarted stops it once Start has re-attached
		}
		attempt := r.attempt
		c.effects = append(c.effects, func() {
			d.post(op{kind: opExited, id: r.job, attempt: attempt,
				exit: executor.Exit{AttemptID: attempt, ExitCode: -1, Stopped: true, Reason: "Stopped before the attempt started", At: d.now()}})
		})
	case phaseStarting:
		// opStarted stops it once Start returns.
	case phaseRunning:
		if r.stopSent {
			return
		}
		r.stopSent = true
		attempt, job, exec := r.attempt, r.job, r.exec
		grace := d.cfg.StopGrace
		if r.grace > 0 {
			grace = r.grace
		}
		// Stop runs on its own, as Start does (startAttempt), not in the
		// committer that carries out the effects: an executor whose
		// service is slow to answer (scancel while slurmctld is down, an
		// API server or engine that hangs) would otherwise hold every
		// commit, of every executor's jobs, until it returned.
		c.effects = append(c.effects, func() {
			d.bg.Go(func() {
				if err := d.execs.Get(exec).Stop(c.ctx, attempt, grace); err != nil {
					if errors.Is(err, executor.ErrUnknownAttempt) {
						d.post(op{kind: opExited, id: job, attempt: attempt, lost: true,
							exit: executor.Exit{AttemptID: attempt, ExitCode: -1, Reason: "the executor does not know the attempt", At: d.now()}})
						return
					}
					d.log.Error("executor stop failed", "job", job, "attempt", attempt, "err", err)
				}
			})
		})
	}
}

// terminate ends a job for reason: at once if it holds nothing, else by
// stopping its attempt.
func (c *cycle) terminate(id, reason string) {
	d := c.d
	j := c.job(id)
	if j == nil || j.Status.Terminal() || j.IsTerminated {
		return
	}
	j = c.edit(id)
	j.IsTerminated = true
	if r := d.runs[id]; r != nil {
		j.StatusReason = reason
		if r.stop == stopNone {
			r.stop = stopTerminate
			r.reason = reason
			if err := d.eng.Stopping(id); err != nil {
				d.log.Error("engine stopping failed", "job", id, "err", err)
			}
		}
		d.log.Info("job terminating", "job", id, "reason", reason)
		c.stopRun(r)
		return
	}
	if _, ok := d.eng.Job(id); ok {
		if err := d.eng.Stopping(id); err != nil {
			d.log.Error("engine stopping failed", "job", id, "err", err)
		}
	}
	delete(d.waits, id)
	c.fail(j, reason)
}

// timers stops attempts that ran out of time and applies the job queues'
// jobStateTimeLimitActions to blocked heads.
func (c *cycle) timers() {
	d := c.d
	for _, r := range d.runs {
		if r.phase == phaseRunning && r.stop == stopNone && !r.deadline.IsZero() && !c.now.Before(r.deadline) {
			r.stop = stopTimeout
			j := c.edit(r.job)
			r.reason = fmt.Sprintf("%s (%s)", timeoutPrefix, d.runtimeLimit(j))
			if a := attemptByID(j, r.attempt); a != nil {
				a.StatusReason = r.reason // the decision, persisted for a restart (see recoverStop)
			}
			if err := d.eng.Stopping(r.job); err != nil {
				d.log.Error("engine stopping failed", "job", r.job, "err", err)
			}
			d.log.Info("attempt timed out", "job", r.job, "attempt", r.attempt)
			c.stopRun(r)
		}
	}
	d.mu.RLock()
	var queues []*qshare.JobQueue
	for _, q := range d.queues {
		if len(q.JobStateTimeLimitActions) > 0 {
			queues = append(queues, q)
		}
	}
	d.mu.RUnlock()
	for _, q := range queues {
		for _, sv := range d.eng.Shares(q.Name) {
			if sv.Head == "" || sv.HeadReason == "" {
				continue
			}
			since := c.now
			if w, ok := d.waits[sv.Head]; ok && w.reason == sv.HeadReason {
				since = w.since
			} else if j := c.job(sv.Head); j != nil {
				since = j.RunnableSince
				d.waits[sv.Head] = waitInfo{reason: sv.HeadReason, since: since}
			}
			for _, a := range q.JobStateTimeLimitActions {
				if a.State == "RUNNABLE" && strings.HasPrefix(sv.HeadReason, a.Reason) &&
					c.now.Sub(since) >= time.Duration(a.MaxTimeSeconds)*time.Second {
					c.terminate(sv.Head, "Terminated by JobStateTimeLimit action due to reason: "+a.Reason)
					break
				}
			}
		}
	}
}

// finish hands the cycle's changes, with their events, replies and effects,
// to the committer, after making them the loop's view of the jobs
// (d.inflight) for the next cycles.
func (c *cycle) finish() {
	d := c.d
	p := &pending{replies: c.replies, effects: c.effects}
	if len(c.order) > 0 {
		p.events = c.cycleEvents()
		p.jobs = make([]*qshare.Job, len(c.order))
		d.mu.Lock()
		for i, id := range c.order {
			j := c.changed[id]
			p.jobs[i] = j
			d.inflight[id] = j
		}
		d.mu.Unlock()
	}
	if len(c.posts) > 0 {
		d.post(c.posts...)
	}
	if len(p.jobs) == 0 && len(p.replies) == 0 && len(p.effects) == 0 {
		return
	}
	// A cycle without changes is queued too when it answers or acts: what
	// it answered or decided may rest on changes of earlier cycles that
	// are not durable yet.
	d.enqueue(c.ctx, p)
}

// startAttempt starts an attempt and then waits for it, reporting both to the loop.
func (d *Daemon) startAttempt(ctx context.Context, spec executor.Spec) {
	d.bg.Go(func() {
		t0 := time.Now()
		h, err := d.execs.Get(spec.Executor).Start(ctx, spec)
		d.obs.ExecutorStart(nameOrDefault(spec.Executor), time.Since(t0), err)
		if ctx.Err() != nil {
			return
		}
		d.post(op{kind: opStarted, id: spec.JobID, attempt: spec.AttemptID, handle: h, err: err})
		if err != nil {
			return
		}
		d.waitAttempt(ctx, spec.Executor, spec.JobID, spec.AttemptID)
	})
}

// waitAttempt blocks until the attempt ends and reports it to the loop. The
// caller has added to d.bg.
func (d *Daemon) waitAttempt(ctx context.Context, exec, job, attempt string) {
	exit, err := d.execs.Get(exec).Wait(ctx, attempt)
	if ctx.Err() != nil {
		return
	}
	d.obs.AttemptEnded(nameOrDefault(exec), attemptOutcome(exit, err))
	if err != nil {
		d.post(op{kind: opExited, id: job, attempt: attempt, lost: true,
			exit: executor.Exit{AttemptID: attempt, ExitCode: -1, Reason: "waiting for the attempt failed: " + err.Error(), At: d.now()}})
		return
	}
	d.post(op{kind: opExited, id: job, attempt: attempt, lost: exit.Lost, exit: exit})
}

// spec describes a job to the engine.
func (d *Daemon) spec(j *qshare.Job) engine.JobSpec {
	share := j.QuotaShare
	if share == "" {
		share = engine.QueueShare
	}
	retries := -1
	if j.PreemptionRetries != nil {
		retries = *j.PreemptionRetries
	}
	return engine.JobSpec{ID: j.ID, Queue: j.JobQueue, Share: share, Priority: j.Priority, Created: j.CreatedAt,
		Demand: j.Demand, PreemptionRetries: retries, Preemptions: j.Preemptions - planStops(j), ShareIdentifier: j.ShareIdentifier, Plan: j.CapacityPlan}
}

// planStops counts the job's attempts that were preempted because a
// capacity plan's capacity ended: they are preemptions in its summary, but
// do not count against its preemption retries (engine.Decision.StopBy).
func planStops(j *qshare.Job) int {
	n := 0
	for i := range j.Attempts {
		if a := &j.Attempts[i]; a.Preempted {
			if _, ok := planStopEnd(a.StatusReason); ok {
				n++
			}
		}
	}
	return n
}

// planStopEnd reads the reason of a preemption because a capacity plan
// ends ("... capacity plan P ... ends at TIME: ..."), and returns that end.
func planStopEnd(reason string) (time.Time, bool) {
	if !strings.Contains(reason, ": capacity plan ") {
		return time.Time{}, false
	}
	_, rest, ok := strings.Cut(reason, " ends at ")
	if !ok {
		return time.Time{}, false
	}
	at, _, _ := strings.Cut(rest, ": ")
	t, err := time.Parse(time.RFC3339, at)
	return t, err == nil
}

package daemon

import (
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/executor"
	"qshare/trainingjob"
)

// Observer receives the daemon's measurements as they happen, for a metrics
// exporter (package metrics). Its methods are called from the control
// loop, the committer, submitting requests and the executor's goroutines:
// they must be safe for concurrent use, cheap, and must not call back into
// the daemon.
type Observer interface {
	// SchedulingPass is the time one engine pass (AppendSchedule) took.
	SchedulingPass(elapsed time.Duration)
	// StoreCommit is the time one store commit took, and its error.
	StoreCommit(elapsed time.Duration, err error)
	// ExecutorStart is the time the executor took to start an attempt, and
	// its error; executor names it (executor.DefaultName on a server with
	// one).
	ExecutorStart(executor string, elapsed time.Duration, err error)
	// AttemptEnded is the end of an attempt that the named executor ran,
	// as Wait reported it: one of the AttemptOutcome values.
	AttemptEnded(executor string, outcome AttemptOutcome)
	// JobStarted is a job's first start decision: its queue, its quota
	// share ("" in a queue without quota shares) and the time from its
	// submission to that decision.
	JobStarted(queue, share string, wait time.Duration)
	// Preempted is one preemption decision.
	Preempted(p Preemption)
	// AttemptCommitted is the end of one attempt, once it is committed:
	// how it ended and the job it belongs to.
	AttemptCommitted(e AttemptEnd)
}

// AttemptEnd is one attempt's end, as an Observer receives it.
type AttemptEnd struct {
	JobID, JobName, Queue, Share string
	// Payload is the job's serviceRequestPayload.
	Payload string
	// Attempt is the ended attempt, its StoppedAt and StatusReason set.
	Attempt qshare.Attempt
}

// AttemptOutcome is how an attempt ended, as an Observer receives it: a
// fixed set, so that a metric labelled by it stays small.
type AttemptOutcome string

// The outcomes of an attempt.
const (
	// AttemptSucceeded: it exited with code 0 on its own.
	AttemptSucceeded AttemptOutcome = "succeeded"
	// AttemptFailed: it exited with another code, or a signal, on its own.
	AttemptFailed AttemptOutcome = "failed"
	// AttemptStopped: it ended after a stop (a preemption, a cancel or
	// terminate, a timeout).
	AttemptStopped AttemptOutcome = "stopped"
	// AttemptLost: the executor could not say how it ended, or waiting for
	// it failed; the job is requeued.
	AttemptLost AttemptOutcome = "lost"
)

// attemptOutcome is the outcome of an attempt whose Wait returned exit and
// err.
func attemptOutcome(exit executor.Exit, err error) AttemptOutcome {
	switch {
	case err != nil || exit.Lost:
		return AttemptLost
	case exit.Stopped:
		return AttemptStopped
	case exit.Succeeded():
		return AttemptSucceeded
	}
	return AttemptFailed
}

// PreemptionKind says why a job was preempted.
type PreemptionKind string

// The kinds of preemption.
const (
	// PreemptCrossShare: another share reclaims its own capacity from a
	// share that borrowed it.
	PreemptCrossShare PreemptionKind = "cross-share"
	// PreemptInShare: a higher-priority job of the same share takes the
	// victim's place.
	PreemptInShare PreemptionKind = "in-share"
	// PreemptLimitChange: a cross-share preemption of a job that started
	// within its share's own limit, so that only a lowered limit can have
	// put it above that limit. A job recovered after a restart is counted
	// as cross-share, since whether it borrowed is not kept.
	PreemptLimitChange PreemptionKind = "limit-change"
)

// Preemption is one preemption decision, as an Observer receives it.
type Preemption struct {
	Kind  PreemptionKind
	Queue string
	// By is the preempting job's quota share, Share the victim's.
	By, Share string
}

type noObserver struct{}

func (noObserver) SchedulingPass(time.Duration)               {}
func (noObserver) StoreCommit(time.Duration, error)           {}
func (noObserver) ExecutorStart(string, time.Duration, error) {}
func (noObserver) AttemptEnded(string, AttemptOutcome)        {}
func (noObserver) JobStarted(string, string, time.Duration)   {}
func (noObserver) Preempted(Preemption)                       {}
func (noObserver) AttemptCommitted(AttemptEnd)                {}

// statusKey is one count of MetricsState.Jobs.
type statusKey struct {
	queue, share string
	status       qshare.JobStatus
}

// setJob makes j the record of its job in d.jobs, and keeps the per-share
// counts of jobs by status (d.counts) equal to what d.jobs holds, so that a
// scrape reads them without walking the jobs. Callers hold d.mu.
func (d *Daemon) setJob(j *qshare.Job) {
	k := statusKey{j.JobQueue, j.QuotaShare, j.Status}
	d.indexLegacy(j)
	if old := d.jobs[j.ID]; old != nil {
		ok := statusKey{old.JobQueue, old.QuotaShare, old.Status}
		if ok == k {
			d.jobs[j.ID] = j
			return
		}
		d.uncount(ok)
		d.countSubmitter(old, -1)
	}
	d.counts[k]++
	d.countSubmitter(j, 1)
	d.jobs[j.ID] = j
}

// indexLegacy adds to d.legacy the names of j's attempts that have the
// older form: only jobs stored before the current form have any, so the
// index stays as small as they are. Callers hold d.mu.
func (d *Daemon) indexLegacy(j *qshare.Job) {
	for _, a := range j.Attempts {
		if name := legacyName(a); name != "" {
			d.legacy[name] = j.ID
		}
	}
}

// legacyName is the lower-case training job name of a, when it has the
// older form (trainingjob.LegacyAttemptName), else "".
func legacyName(a qshare.Attempt) string {
	name := trainingjob.NameOfARN(a.ResourceARN)
	if name == "" || !trainingjob.LegacyAttemptName(name) {
		return ""
	}
	if _, _, ok := trainingjob.ParseAttemptName(name); ok {
		return ""
	}
	return strings.ToLower(name)
}

// countSubmitter adds delta to the count of unfinished jobs of j's
// submitter, when j has one and is unfinished. Callers hold d.mu.
func (d *Daemon) countSubmitter(j *qshare.Job, delta int) {
	by := j.Tags[qshare.TagSubmittedBy]
	if by == "" || j.Status.Terminal() {
		return
	}
	if n := d.unfinished[by] + delta; n > 0 {
		d.unfinished[by] = n
	} else {
		delete(d.unfinished, by)
	}
}

// dropJob removes a job from d.jobs and from the counts. Callers hold d.mu.
func (d *Daemon) dropJob(id string) {
	if old := d.jobs[id]; old != nil {
		d.uncount(statusKey{old.JobQueue, old.QuotaShare, old.Status})
		d.countSubmitter(old, -1)
		for _, a := range old.Attempts {
			if name := legacyName(a); name != "" && d.legacy[name] == id {
				delete(d.legacy, name)
			}
		}
		delete(d.jobs, id)
	}
}

func (d *Daemon) uncount(k statusKey) {
	if d.counts[k] <= 1 {
		delete(d.counts, k)
	} else {
		d.counts[k]--
	}
}

// JobCount is how many jobs of a queue and quota share have one status.
type JobCount struct {
	Queue, Share string
	Status       qshare.JobStatus
	N            int
}

// QueueWaiting is engine.Waiting of one job queue.
type QueueWaiting struct {
	Queue  string
	Shares []engine.ShareWaiting
}

// MetricsState is what a metrics scrape reads of the daemon: who lends to
// whom in every job queue with quota shares (as Lending("") answers),
// why their jobs wait, how many jobs each queue and share has per
// status, and each executor's health; each Lending names its
// environment's executor. Its cost grows with the shares and queues, not with the jobs.
type MetricsState struct {
	Lending []qshare.Lending
	Waiting []QueueWaiting
	// Jobs has a count per queue, share and status with at least one job,
	// in that order.
	Jobs []JobCount
	// Executors has each of the server's executors, in name order, with
	// what it says of its service now.
	Executors []ExecutorHealth
}

// ExecutorHealth is one executor and its health: "" while its service
// answers (or it has none to answer), else what is wrong.
type ExecutorHealth struct {
	Name, Health string
}

// MetricsState returns the daemon's state for a metrics scrape. The
// lending and waiting figures are read under one hold of the engine's
// lock, so they agree with each other; the counts are read under d.mu.
func (d *Daemon) MetricsState() MetricsState {
	var st MetricsState
	d.mu.RLock()
	queues := make([]*qshare.JobQueue, 0, len(d.queues))
	for _, q := range d.queues {
		queues = append(queues, q)
	}
	st.Jobs = make([]JobCount, 0, len(d.counts))
	for k, n := range d.counts {
		st.Jobs = append(st.Jobs, JobCount{Queue: k.queue, Share: k.share, Status: k.status, N: n})
	}
	d.mu.RUnlock()
	var names []string
	for _, q := range queues {
		if d.isQuotaQueue(q) { // takes d.mu itself
			names = append(names, q.Name)
		}
	}
	sort.Strings(names)
	sort.Slice(st.Jobs, func(i, j int) bool {
		a, b := st.Jobs[i], st.Jobs[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Share != b.Share {
			return a.Share < b.Share
		}
		return a.Status < b.Status
	})
	d.engMu.Lock()
	for _, n := range names {
		if l, ok := d.eng.Lending(n); ok {
			st.Lending = append(st.Lending, l)
			st.Waiting = append(st.Waiting, QueueWaiting{Queue: n, Shares: d.eng.Waiting(n)})
		}
	}
	d.engMu.Unlock()
	d.withExecutors(st.Lending)
	for _, n := range d.execs.Names() {
		st.Executors = append(st.Executors, ExecutorHealth{Name: n, Health: d.executorHealth(n)})
	}
	return st
}

// observePreempt reports a preemption decision to the observer, with the
// preempting job's share as the cycle sees it.
func (d *Daemon) observePreempt(c *cycle, dec engine.Decision, r *run) {
	p := Preemption{Kind: PreemptInShare, Queue: dec.Queue, By: dec.Share, Share: dec.Share}
	if dec.CrossShare {
		p.Kind = PreemptCrossShare
		if r.ownStart {
			p.Kind = PreemptLimitChange
		}
		if j := c.job(dec.For); j != nil {
			p.By = j.QuotaShare
		} else {
			p.By = ""
		}
	}
	d.obs.Preempted(p)
}

// Package sim replays a trace of jobs through qshare's engine under a
// virtual clock, to answer "what happens if?" before an admin changes
// quotas on a fleet that people depend on.
//
// It drives the real engine (package engine) through its public API, the
// way the daemon does: Submit at each job's submit time, Schedule at every
// instant something changed, carry out the decisions (a start runs the job
// for its remaining work; a preemption stops it at once or after a grace
// period, losing the work since its last checkpoint), and Release when a job
// has stopped. sim holds no scheduling rule: every decision is the engine's.
//
// A run is a function of its inputs: the same configuration, trace and
// options give byte-identical reports and event logs. It writes the event
// log of package event, a Report (JSON), SVG plots and an index.html.
package sim

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"qshare"
	"qshare/config"
	"qshare/engine"
	"qshare/event"
)

// Options tune a run. The zero value is a plain run: no checkpoints,
// preempted jobs stop at once, no event log, no timing.
type Options struct {
	// CheckpointInterval is how often a running job checkpoints; a
	// preempted job loses the work since its last checkpoint. 0 means it
	// never does: a preempted job starts over.
	CheckpointInterval time.Duration
	// Grace is how long a preempted job takes to stop; it keeps its
	// capacity (and keeps working) until then.
	Grace time.Duration
	// Events, when set, receives the event log (JSON lines).
	Events io.Writer
	// Progress, when set, is called now and then with the jobs finished
	// (or failed) so far and the total.
	Progress func(done, total int)
	// Timing adds wall-clock figures (engine decisions per second) to the
	// report. They vary from run to run, so they are off by default: a
	// report without them is byte-identical for the same inputs.
	Timing bool
	// Buckets is the resolution of the time series behind the plots
	// (default 400).
	Buckets int

	// Start is the wall time of the trace's t=0, which capacity plans'
	// windows (absolute times) are placed against; zero means
	// 2000-01-01T00:00:00Z. Pass the same to the checker
	// (event.CheckOptions.Origin).
	Start time.Time

	// Outcomes fills Report.Outcomes with each job's fate (for callers
	// that compute their own figures, such as the benchmark harness).
	Outcomes bool

	// verify makes the run compare its capacity account with the engine's
	// view at every instant (tests only: it is slow).
	verify bool
}

// epoch is the instant virtual time 0 maps to when talking to the engine.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// maxPassesPerInstant stops a run whose engine keeps deciding at one
// instant without settling (a bug in the engine: thrashing).
const maxPassesPerInstant = 10000

type jobState int

const (
	jobWaiting jobState = iota
	jobRunning
	jobStopping
	jobDone
)

type run struct {
	job         *Job
	share       *shareAcc
	state       jobState
	remaining   time.Duration // work left, as of the last checkpoint
	startAt     time.Duration
	attempt     int
	first       time.Duration // first start; -1 before it
	held        time.Duration // total time holding capacity
	end         time.Duration // when it finished or failed; -1 before
	preemptions int
	// pending preemption, while stopping
	final      bool
	crossShare bool
	preemptFor string
	reason     string
	failed     bool
}

type itemKind int

const (
	itemFinish itemKind = iota + 1
	itemRelease
	// itemWake is a pass the engine asked for (engine.NextWake: a minimum
	// run time that a waiting job needs ends); it has no run.
	itemWake
)

type item struct {
	at      time.Duration
	seq     uint64
	kind    itemKind
	r       *run
	attempt int
}

type itemHeap []item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].seq < h[b].seq
}
func (h itemHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type simulator struct {
	opts Options
	// origin is the engine's time of the trace's t=0 (Options.Start).
	origin time.Time
	cfg    *config.File
	eng    *engine.Engine
	runs   map[string]*run
	items  itemHeap
	seq    uint64
	now    time.Duration
	ev     *event.Writer
	acct   *accounting
	done   int
	total  int
	engine time.Duration // wall time spent in the engine (Timing only)
	passes int
	// finished holds the jobs that finished at the current instant and
	// that the engine has not been told about yet: they are released in
	// one ReleaseMany call (cheaper than one Release each at many jobs)
	// before the engine is next called, so it sees the same calls in the
	// same order.
	finished []string
	// arriving holds the jobs submitted at the current instant, given to
	// the engine in one SubmitMany call before the pass, in order.
	arriving []engine.JobSpec
	// decisions is the last pass's decisions; each pass appends to it
	// again (engine.AppendSchedule), so that a pass allocates no slice.
	decisions []engine.Decision
	// wakeAt is the last wake-up queued (itemWake).
	wakeAt time.Duration
}

// Run replays jobs against the configuration cfg (which must be valid) and
// returns the report. Jobs must name queues and shares of cfg (ReadTrace
// checks that) and be sorted by Submit; IDs must be unique. A job whose
// share or queue is DISABLED is rejected at submit, as the API would: it
// fails at once. (A DISABLED service environment is not modelled: the
// engine has no such state.) A job that can never fit waits to the end and counts as never
// started. Run stops early with ctx's error if ctx is cancelled.
func Run(ctx context.Context, cfg *config.File, jobs []Job, opts Options) (*Report, error) {
	if opts.Buckets <= 0 {
		opts.Buckets = 400
	}
	s := &simulator{
		opts:   opts,
		cfg:    cfg,
		eng:    engine.New(),
		runs:   make(map[string]*run, len(jobs)),
		total:  len(jobs),
		origin: epoch,
	}
	if !opts.Start.IsZero() {
		s.origin = opts.Start
	}
	if err := cfg.Engine().Load(s.eng); err != nil {
		return nil, fmt.Errorf("loading the configuration into the engine: %w", err)
	}
	s.acct = newAccounting(cfg, opts.Buckets, s.origin)
	var verifyErr error
	if opts.verify {
		s.acct.verify = verifyLent(&verifyErr, func() time.Duration { return s.now })
	}
	if opts.Events != nil {
		s.ev = event.NewWriter(opts.Events)
	}
	for i := range jobs {
		j := &jobs[i]
		if i > 0 && j.Submit < jobs[i-1].Submit {
			return nil, qshare.Errorf(qshare.EINVALID, "jobs are not sorted by submit time: %s (%s) comes after %s (%s)", j.ID, j.Submit, jobs[i-1].ID, jobs[i-1].Submit)
		}
		if _, dup := s.runs[j.ID]; dup {
			return nil, qshare.Errorf(qshare.EINVALID, "job ID %s appears twice", j.ID)
		}
		sh := s.acct.share(j.Queue, j.Share)
		if sh == nil {
			return nil, qshare.Errorf(qshare.EINVALID, "job %s names share %s of queue %s, which the configuration does not have", j.ID, j.Share, j.Queue)
		}
		s.runs[j.ID] = &run{job: j, share: sh, remaining: j.Duration, first: -1, end: -1}
	}
	wall := time.Now()
	if err := s.loop(ctx, jobs); err != nil {
		return nil, err
	}
	if verifyErr != nil {
		return nil, verifyErr
	}
	if s.ev != nil {
		if err := s.ev.Flush(); err != nil {
			return nil, fmt.Errorf("writing events: %w", err)
		}
	}
	rep := s.report(jobs)
	if opts.Timing {
		st := s.eng.Stats()
		rep.Timing = &Timing{
			WallS:     round(time.Since(wall).Seconds()),
			EngineS:   round(s.engine.Seconds()),
			Decisions: st.Decisions,
		}
		if s.engine > 0 {
			rep.Timing.DecisionsPerS = round(float64(st.Decisions) / s.engine.Seconds())
		}
	}
	return rep, nil
}

func (s *simulator) push(at time.Duration, kind itemKind, r *run) {
	s.seq++
	it := item{at: at, seq: s.seq, kind: kind, r: r}
	if r != nil {
		it.attempt = r.attempt
	}
	heap.Push(&s.items, it)
}

func (s *simulator) emit(r *run, kind event.Kind, demand qshare.Capacity, reason, forJob string) {
	if s.ev == nil {
		return
	}
	base := event.Event{
		T: s.now.Seconds(), Job: r.job.ID, Event: kind, Share: r.job.Share, Queue: r.job.Queue,
		Priority: r.job.Priority, Reason: reason, For: forJob,
	}
	if r.share.fair {
		base.Share = "" // the queue's own line, as the checker knows it
	}
	for _, e := range event.Lines(base, demand) {
		s.ev.Write(e) // sticky error, reported at Flush
	}
}

func (s *simulator) at() time.Time { return s.origin.Add(s.now) }

func (s *simulator) loop(ctx context.Context, jobs []Job) error {
	next := 0 // next job to submit
	progressEvery := max(1, s.total/200)
	lastProgress := -1
	for iter := 0; next < len(jobs) || s.items.Len() > 0; iter++ {
		if iter%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		// The next instant: the earliest submit or pending item.
		t := time.Duration(1<<63 - 1)
		if next < len(jobs) {
			t = jobs[next].Submit
		}
		if s.items.Len() > 0 && s.items[0].at < t {
			t = s.items[0].at
		}
		s.now = t
		for settled := false; !settled; {
			// Everything due now: stops and finishes first, then submits.
			for s.items.Len() > 0 && s.items[0].at == t {
				it := heap.Pop(&s.items).(item)
				if err := s.handle(it); err != nil {
					return err
				}
			}
			if err := s.releaseFinished(); err != nil {
				return err
			}
			for next < len(jobs) && jobs[next].Submit == t {
				s.submit(s.runs[jobs[next].ID])
				next++
			}
			if err := s.submitArriving(); err != nil {
				return err
			}
			if err := s.schedule(); err != nil {
				return err
			}
			settled = s.items.Len() == 0 || s.items[0].at > t
		}
		s.acct.planEdges(s.now)
		s.acct.settle(s.now, s.eng)
		if s.opts.Progress != nil && s.done/progressEvery != lastProgress {
			lastProgress = s.done / progressEvery
			s.opts.Progress(s.done, s.total)
		}
	}
	if s.opts.Progress != nil {
		s.opts.Progress(s.done, s.total)
	}
	return nil
}

// submit accepts a job, or rejects it at once; accepted jobs are given to
// the engine by submitArriving.
func (s *simulator) submit(r *run) {
	j := r.job
	s.emit(r, event.Submit, j.Demand, "", "")
	q := s.cfg.Queue(j.Queue)
	reject := ""
	if q.State == qshare.Disabled {
		reject = fmt.Sprintf("job queue %s is DISABLED: it accepts no new jobs", j.Queue)
	} else if !r.share.fair && q.Share(j.Share).State == qshare.Disabled {
		reject = fmt.Sprintf("quota share %s is DISABLED: it accepts no new jobs", j.Share)
	}
	if reject != "" {
		r.state, r.failed, r.end = jobDone, true, s.now
		s.done++
		r.share.rejected++
		s.emit(r, event.Fail, nil, reject, "")
		return
	}
	r.share.submitted++
	spec := engine.JobSpec{
		ID: j.ID, Queue: j.Queue, Share: j.Share, Priority: j.Priority, Created: s.origin.Add(j.Submit),
		Demand: j.Demand, PreemptionRetries: j.PreemptionRetries,
	}
	if r.share.fair {
		spec.Share, spec.ShareIdentifier = engine.QueueShare, j.Share
	}
	s.arriving = append(s.arriving, spec)
}

// submitArriving gives the engine the jobs accepted since it was last
// called, in the order they arrived.
func (s *simulator) submitArriving() error {
	if len(s.arriving) == 0 {
		return nil
	}
	n, err := s.eng.SubmitMany(s.arriving)
	if err != nil {
		return fmt.Errorf("submitting job %s: %w", s.arriving[n].ID, err)
	}
	clear(s.arriving)
	s.arriving = s.arriving[:0]
	return nil
}

// schedule runs passes at the current instant until the engine has nothing
// more to decide, carrying out each decision.
func (s *simulator) schedule() error {
	for pass := 0; ; pass++ {
		if pass == maxPassesPerInstant {
			return fmt.Errorf("the engine kept deciding at t=%s for %d passes without settling", s.now, pass)
		}
		var t0 time.Time
		if s.opts.Timing {
			t0 = time.Now()
		}
		ds := s.eng.AppendSchedule(s.decisions[:0], s.at())
		s.decisions = ds
		if s.opts.Timing {
			s.engine += time.Since(t0)
		}
		s.passes++
		acted := false
		for _, d := range ds {
			r := s.runs[d.Job]
			if r == nil {
				return fmt.Errorf("the engine decided about job %s, which the simulator never submitted", d.Job)
			}
			switch d.Kind {
			case engine.DecisionStart:
				if r.state != jobWaiting {
					return fmt.Errorf("engine bug: job %s started at t=%s while it is not waiting", d.Job, s.now)
				}
				acted = true
				r.state = jobRunning
				r.startAt = s.now
				r.attempt++
				if r.first < 0 {
					r.first = s.now
				}
				s.acct.hold(r, +1)
				s.emit(r, event.Start, r.job.Demand, d.Reason, "")
				s.push(s.now+r.remaining, itemFinish, r)
			case engine.DecisionPreempt:
				if r.state != jobRunning {
					return fmt.Errorf("engine bug: job %s preempted at t=%s while it is not running", d.Job, s.now)
				}
				r.state = jobStopping
				r.final, r.crossShare, r.preemptFor, r.reason = d.Final, d.CrossShare, d.For, d.Reason
				stop := s.now + s.opts.Grace
				if !d.StopBy.IsZero() {
					// A capacity plan ends: the stop is timed to be over
					// by its end.
					stop = min(stop, max(d.StopBy.Sub(s.origin), s.now))
				}
				if stop > s.now {
					// The decision, judged by the checker now; the
					// preempt line follows when the capacity is given back.
					s.emit(r, event.Stopping, r.job.Demand, preemptReason(r), r.preemptFor)
					s.push(stop, itemRelease, r)
					continue
				}
				acted = true
				if err := s.release(r); err != nil {
					return err
				}
			case engine.DecisionWait:
				if strings.HasPrefix(d.Reason, "MISCONFIGURATION") {
					r.share.misconfigured[d.Job] = true
				}
			}
		}
		if !acted {
			s.askedWake()
			return nil
		}
	}
}

// askedWake queues a pass at the time the engine asks to be woken, if it
// asks for one not queued yet.
func (s *simulator) askedWake() {
	at, ok := s.eng.NextWake()
	if !ok {
		return
	}
	if w := at.Sub(s.origin); w > s.now && w != s.wakeAt {
		s.wakeAt = w
		s.push(w, itemWake, nil)
	}
}

func (s *simulator) handle(it item) error {
	if it.kind == itemWake {
		return nil // the instant's pass is all it asks for
	}
	r := it.r
	if it.attempt != r.attempt {
		return nil // an item of an earlier attempt
	}
	switch it.kind {
	case itemFinish:
		if r.state != jobRunning && r.state != jobStopping {
			return nil
		}
		// A job that finishes during its preemption grace just finishes.
		r.state = jobDone
		r.end = s.now
		r.held += s.now - r.startAt
		r.remaining = 0
		s.done++
		r.share.completed++
		s.acct.hold(r, -1)
		s.emit(r, event.Finish, r.job.Demand, "completed", "")
		s.finished = append(s.finished, r.job.ID)
	case itemRelease:
		if r.state != jobStopping {
			return nil
		}
		return s.release(r)
	}
	return nil
}

// releaseFinished tells the engine about the jobs that have finished since
// it was last called, in the order they finished.
func (s *simulator) releaseFinished() error {
	if len(s.finished) == 0 {
		return nil
	}
	n, err := s.eng.ReleaseMany(s.finished, false)
	if err != nil {
		return fmt.Errorf("releasing finished job %s: %w", s.finished[n], err)
	}
	clear(s.finished)
	s.finished = s.finished[:0]
	return nil
}

// release gives back the capacity of a preempted job: it loses the work
// since its last checkpoint and waits again, or fails on a final preemption.
func (s *simulator) release(r *run) error {
	worked := s.now - r.startAt
	saved := time.Duration(0)
	if c := s.opts.CheckpointInterval; c > 0 {
		saved = worked / c * c
	}
	saved = min(saved, r.remaining)
	lost := worked - saved
	r.remaining -= saved
	r.held += worked
	r.preemptions++
	sh := r.share
	inst := float64(r.job.Demand.Total())
	if r.crossShare {
		sh.preemptCross++
	} else {
		sh.preemptInShare++
	}
	sh.lostInstanceS += lost.Seconds() * inst
	s.acct.preempted(s.now, r.crossShare)
	s.acct.hold(r, -1)
	s.emit(r, event.Preempt, r.job.Demand, preemptReason(r), r.preemptFor)
	r.attempt++ // any pending finish of this attempt is void
	// Jobs that finished earlier at this instant are released first.
	if err := s.releaseFinished(); err != nil {
		return err
	}
	if err := s.eng.Release(r.job.ID, !r.final); err != nil {
		return fmt.Errorf("releasing preempted job %s: %w", r.job.ID, err)
	}
	if r.final {
		r.state, r.failed, r.end = jobDone, true, s.now
		s.done++
		sh.failed++
		s.emit(r, event.Fail, nil, "preempted more times than its preemption retries allow", "")
		return nil
	}
	r.state = jobWaiting
	return nil
}

// preemptReason is the reason of a preemption's lines: the engine's, saying
// whether it was cross-share or in-share.
func preemptReason(r *run) string {
	reason := r.reason
	if !strings.Contains(reason, "cross-share") && !strings.Contains(reason, "in-share") {
		if r.crossShare {
			reason = "cross-share: " + reason
		} else {
			reason = "in-share: " + reason
		}
	}
	return reason
}

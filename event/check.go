package event

import (
	"container/heap"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/config"
	"qshare/engine"
)

// Rules the checker enforces: the guarantees of the engine (issue 2, rule 9)
// that can be seen in a capacity log, and the consistency of the log itself.
const (
	// RuleEnvironmentCapacity: usage of a type never exceeds the environment's limit.
	RuleEnvironmentCapacity = "environment-capacity"
	// RuleShareLimit: a LEND or RESERVE share never exceeds its own maxCapacity.
	RuleShareLimit = "share-limit"
	// RuleBorrowCap: a LEND_AND_BORROW share never exceeds maxCapacity plus its borrow limit.
	RuleBorrowCap = "borrow-cap"
	// RuleBorrowSource: nobody uses a RESERVE share's idle capacity: what
	// shares borrow never exceeds the idle capacity of lending shares plus
	// the environment capacity that no share owns.
	RuleBorrowSource = "borrow-source"
	// RuleHeadWaits: no share's head job waits while it fits its share's own
	// maxCapacity and the environment has free room for it. Capacity held by
	// a stopping job is not free, and neither is the idle capacity of a
	// RESERVE share that borrowers would then be using. A wait counts from
	// the last lead line (a server's takeover): before it, no server
	// scheduled.
	RuleHeadWaits = "head-waits"
	// RuleReservePreempted: a job of a RESERVE share with in-share
	// preemption DISABLED is never preempted (the configuration is fixed).
	RuleReservePreempted = "reserve-preempted"
	// RuleInSharePriority: an in-share preemption takes only jobs of
	// strictly lower priority than the job it makes room for.
	RuleInSharePriority = "in-share-priority"
	// RuleReclaimVictim: a cross-share victim belongs to a share that uses
	// more than its own maxCapacity of a type the victim holds, when the
	// preemption is decided (its stopping line, or its preempt line when it
	// has none).
	RuleReclaimVictim = "reclaim-victim"
	// RulePreemptedForNothing: a job preempted to make room for another is
	// followed by that job's start, unless that job left the system
	// (terminated) between the victim's stopping line and its preempt.
	RulePreemptedForNothing = "preempted-for-nothing"
	// RuleMinRunTime: a job is not chosen as a victim (its stopping line,
	// or its preempt line when it has none) before it has held its
	// capacity for its share's minimum run time (the quota-share tag
	// qshare:minRunTimeSeconds in the configuration), counted from its
	// last start line. Old logs of shares without the tag have nothing
	// to break.
	RuleMinRunTime = "min-run-time"
	// RuleProtectionWait: a head job that waits for a victim protected by
	// its minimum run time waits no longer than the protection. When the
	// protection of job J ends and no line follows at that instant (or
	// within Settle), no head job that fits its own share's maxCapacity
	// may be left waiting while preempting jobs of other shares that use
	// more than their own maxCapacity, J among them, none of them still
	// protected, would give it the room it lacks. The checker counts
	// the room conservatively (RESERVE shares' idle capacity is never
	// counted as free, capacity promised to reserved jobs is not free), and
	// flags only a wait that J's protection explains: without J the room
	// would not be there. Cross-share reclaim only; in-share preemption
	// waits are checked by the engine's property test.
	RuleProtectionWait = "protection-wait"
	// RulePlan: capacity plans (the configuration's capacityPlans, a qshare
	// extension). Their capacity counts in the environment's and their
	// share's limits while they are open, from the start to the end less
	// the warning, and not after: the other rules use those limits. A job
	// of a plan (its submit line names the plan) starts only while its
	// plan is open, and its plan's jobs never hold more than the plan has;
	// once the plan's end has passed (and Settle), no job of the plan
	// holds capacity, and the environment uses no more of the plan's type
	// than its limit. head-waits is not judged for a share while a job of
	// one of its plans waits (such a job waits for its window, or for its
	// plan's room, by design).
	RulePlan = "capacity-plan"
	// RuleDoubleHold: a job never holds capacity twice at once.
	RuleDoubleHold = "double-hold"
	// RuleLog: the log is consistent: every line reads, time never goes
	// back, a job gives back only what it holds, it is submitted before it
	// starts, and it names a share (or, with no share, a queue) the
	// configuration has.
	RuleLog = "log"
)

// Violation is one broken guarantee.
type Violation struct {
	// T is the time of the event at which it was seen.
	T float64 `json:"t"`
	// Line is the log line of that event (0 when found at the end).
	Line int    `json:"line,omitempty"`
	Rule string `json:"rule"`
	// Jobs are the jobs involved, the one whose event revealed it first.
	Jobs    []string `json:"jobs"`
	Message string   `json:"message"`
}

// String renders the violation on one line.
func (v Violation) String() string {
	loc := ""
	if v.Line > 0 {
		loc = fmt.Sprintf(" (line %d)", v.Line)
	}
	return fmt.Sprintf("t=%s%s [%s] %s", formatT(v.T), loc, v.Rule, v.Message)
}

func formatT(t float64) string { return string(appendFloat(nil, t)) }

// CheckOptions tune a Checker.
type CheckOptions struct {
	// Settle is how long, in seconds, a head job may wait while it fits
	// before that counts as a violation. 0 (a simulation, where every pass
	// runs at the instant of the change) flags it at the end of the
	// instant; a server's log, whose pass runs a moment after the change,
	// needs a little.
	Settle float64
	// MaxViolations bounds how many violations are kept (the rest are
	// counted); 0 means 10,000.
	MaxViolations int
	// Origin is the instant t=0 of the log: a simulation's start (sim's
	// Options.Start), or, when zero, the Unix epoch (a server's log, whose
	// t is Unix seconds). Capacity plans' windows are placed with it.
	Origin time.Time
}

// Summary counts what a Checker saw.
type Summary struct {
	Lines    int `json:"lines"`
	Jobs     int `json:"jobs"`
	Starts   int `json:"starts"`
	Preempts int `json:"preempts"`
	Finishes int `json:"finishes"`
	Fails    int `json:"fails"`
	// Retries counts the starts of jobs after a fail: retried attempts.
	Retries    int `json:"retries,omitempty"`
	Violations int `json:"violations"`
}

// Checker replays an event log against a configuration and records every
// violation of the engine's guarantees. Feed it lines in log order with Add,
// then call Close. A Checker is not safe for concurrent use.
type Checker struct {
	opts   CheckOptions
	envs   map[string]*envState
	shares map[string]*shareState // "queue\x00share"; "queue\x00" for a queue's jobs without a share
	jobs   map[string]*jobState

	group     []Event
	groupLine int
	now       float64
	started   bool
	touched   map[*envState]bool
	pending   map[*shareState]pendingHead
	reported  map[string]bool // head jobs already reported waiting
	forJobs   map[string]*forState
	// stoppingBy maps a job to the victims still stopping for it.
	stoppingBy map[string]map[string]bool
	// protEnds holds the ends of the protections of holding jobs of
	// shares with a minimum run time, earliest first.
	protEnds heapOf[protEnd]
	// plans are the configuration's capacity plans by ARN.
	plans     map[string]*planState
	planOrder []*planState
	summary   Summary
	violation []Violation
}

type envState struct {
	name    string
	limits  qshare.Capacity
	usage   qshare.Capacity
	unowned qshare.Capacity // limit minus the sum of the shares' limits, at least 0
	shares  []*shareState
}

type shareState struct {
	queue, name string
	env         *envState
	limits      qshare.Capacity
	strategy    qshare.Strategy
	borrowLimit int64
	inShare     bool
	// minRun is the share's minimum run time in seconds (0: none).
	minRun float64
	// holders are the share's jobs that hold capacity now.
	holders map[*jobState]bool
	// noQuota: the jobs of a queue without quota shares (a plain FIFO
	// queue). Only the environment's capacity applies to them.
	noQuota bool
	// planWaiting counts the share's waiting jobs of capacity plans.
	planWaiting int
	usage       qshare.Capacity
	waiting     heapOf[waitEntry]
}

type jobState struct {
	id       string
	share    *shareState
	priority int
	submitT  float64
	want     qshare.Capacity // its demand, from its submit lines
	demand   qshare.Capacity // what it holds; nil when it holds nothing
	waiting  bool
	version  int
	done     bool
	// mayRetry: its last event was a fail that gave capacity back, which is
	// final only if no start of the job follows.
	mayRetry bool
	// stopping: a preemption of its current hold was decided (a stopping
	// line) for stoppingFor, and judged then.
	stopping    bool
	stoppingFor string
	// stoppingLine and startLine are the lines of its stopping decision
	// and of its last start; startT is the time of that start.
	stoppingLine, startLine int
	startT                  float64
	// plan is the capacity plan the job runs on, or nil.
	plan *planState
}

// planState is a capacity plan as the checker follows it: n of type typ
// for share, open from start until close (end less the warning).
type planState struct {
	arn, name         string
	share             *shareState
	typ               string
	n                 int64
	start, close, end float64
	open, ended       bool
	used              int64
}

// inSystem reports whether j can still have events: it is not done, or its
// fail may be followed by a retry.
func (j *jobState) inSystem() bool { return j != nil && (!j.done || j.mayRetry) }

type pendingHead struct {
	job   string
	since float64
}

type forState struct {
	victims []string
	t       float64
	line    int
}

// NewChecker returns a Checker for the configuration cfg (which must be
// valid: see config.Parse).
func NewChecker(cfg *config.File, opts CheckOptions) *Checker {
	if opts.MaxViolations <= 0 {
		opts.MaxViolations = 10000
	}
	c := &Checker{
		opts:       opts,
		envs:       map[string]*envState{},
		shares:     map[string]*shareState{},
		jobs:       map[string]*jobState{},
		touched:    map[*envState]bool{},
		pending:    map[*shareState]pendingHead{},
		reported:   map[string]bool{},
		forJobs:    map[string]*forState{},
		stoppingBy: map[string]map[string]bool{},
	}
	ec := cfg.Engine()
	for _, e := range ec.Environments {
		c.envs[e.Name] = &envState{name: e.Name, limits: e.Limits.Clone(), usage: qshare.Capacity{}}
	}
	queueEnv := map[string]*envState{}
	for _, q := range ec.Queues {
		queueEnv[q.Name] = c.envs[q.Environment]
	}
	for _, q := range cfg.JobQueues {
		// Jobs submitted without a share (a queue without quota shares,
		// which the engine's configuration leaves out).
		if env := c.envs[q.EnvironmentName()]; env != nil {
			c.shares[q.Name+"\x00"] = &shareState{queue: q.Name, env: env, noQuota: true, usage: qshare.Capacity{}}
		}
	}
	for _, s := range ec.Shares {
		env := queueEnv[s.Queue]
		if env == nil || s.Name == engine.QueueShare {
			continue // queues without quota shares are modelled above
		}
		st := &shareState{queue: s.Queue, name: s.Name, env: env, limits: s.Limits.Clone(), strategy: s.Strategy,
			borrowLimit: s.BorrowLimit, inShare: s.InSharePreemption, usage: qshare.Capacity{}, minRun: s.MinRunTime.Seconds(),
			holders: map[*jobState]bool{}}
		c.shares[s.Queue+"\x00"+s.Name] = st
		env.shares = append(env.shares, st)
	}
	origin := opts.Origin
	if origin.IsZero() {
		origin = time.Unix(0, 0)
	}
	c.plans = map[string]*planState{}
	for _, p := range ec.Plans {
		s := c.shares[p.Queue+"\x00"+p.Share]
		if s == nil {
			continue
		}
		sec := func(t time.Time) float64 { return t.Sub(origin).Seconds() }
		ps := &planState{arn: p.Name, name: p.Label, share: s, typ: p.InstanceType, n: p.Count,
			start: sec(p.Start), close: sec(p.End.Add(-p.Warning)), end: sec(p.End)}
		c.plans[p.Name] = ps
		c.planOrder = append(c.planOrder, ps)
	}
	sort.Slice(c.planOrder, func(a, b int) bool { return c.planOrder[a].arn < c.planOrder[b].arn })
	for _, env := range c.envs {
		env.unowned = qshare.Capacity{}
		for t, n := range env.limits {
			owned := int64(0)
			for _, s := range env.shares {
				owned += s.limits[t]
			}
			env.unowned[t] = max(0, n-owned)
		}
	}
	return c
}

// Check reads a whole log from r and checks it against cfg. A line that is
// not an event is a violation (RuleLog, with its line number), and the
// check goes on with the next; the error is for input that cannot be read.
func Check(cfg *config.File, r io.Reader, opts CheckOptions) ([]Violation, Summary, error) {
	c := NewChecker(cfg, opts)
	if err := NewReader(r).each(c.Add, c.BadLine); err != nil {
		return nil, Summary{}, err
	}
	v, s := c.Close()
	return v, s, nil
}

// BadLine records a line of the log that could not be read as a violation,
// at the time of the last line read.
func (c *Checker) BadLine(le *LineError) {
	c.summary.Lines++
	c.fail(c.now, le.Line, RuleLog, nil, "line %d cannot be read: %v", le.Line, le.Err)
}

// Add feeds one line of the log; line is its line number (for messages).
func (c *Checker) Add(e Event, line int) {
	c.summary.Lines++
	if len(c.group) > 0 {
		g := c.group[0]
		if g.Job == e.Job && g.Event == e.Event && g.T == e.T && e.Event != Priority {
			c.group = append(c.group, e)
			return
		}
		c.flushGroup()
	}
	if c.started && e.T < c.now {
		c.fail(e.T, line, RuleLog, []string{e.Job}, "time goes back from %s to %s", formatT(c.now), formatT(e.T))
	}
	if c.started && e.T > c.now {
		c.endInstant()
		c.protectionEnds(e.T, true)
	}
	if !c.started || e.T > c.now {
		c.planEdges(e.T)
	}
	if !c.started || e.T > c.now {
		c.now = e.T
	}
	c.started = true
	c.group = append(c.group[:0], e)
	c.groupLine = line
}

// Close ends the log: it checks the last instant and the preemptions whose
// job never started, and returns every violation found, in order, with a
// summary.
func (c *Checker) Close() ([]Violation, Summary) {
	if len(c.group) > 0 {
		c.flushGroup()
	}
	c.endInstant()
	c.protectionEnds(0, false)
	for _, p := range c.planOrder {
		if !p.ended && c.now >= p.end+c.opts.Settle {
			c.planEnded(p, c.now)
		}
	}
	var late []string
	for job := range c.forJobs {
		late = append(late, job)
	}
	sort.Strings(late)
	for _, job := range late {
		f := c.forJobs[job]
		c.fail(f.t, f.line, RulePreemptedForNothing, append([]string{job}, f.victims...),
			"%s were preempted for job %s, which never started", strings.Join(f.victims, ", "), job)
	}
	c.summary.Jobs = len(c.jobs)
	return c.violation, c.summary
}

func (c *Checker) fail(t float64, line int, rule string, jobs []string, format string, args ...any) {
	c.summary.Violations++
	if len(c.violation) < c.opts.MaxViolations {
		c.violation = append(c.violation, Violation{T: t, Line: line, Rule: rule, Jobs: jobs, Message: fmt.Sprintf(format, args...)})
	}
}

// flushGroup applies the lines of one job's event (one per instance type).
func (c *Checker) flushGroup() {
	g := c.group
	e := g[0]
	line := c.groupLine
	c.group = c.group[:0]
	demand := qshare.Capacity{}
	for _, x := range g {
		if x.Instances < 0 {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s has %d instances of %s: counts are never negative", e.Job, x.Instances, x.InstanceType)
			continue
		}
		if x.Instances > 0 {
			demand[x.InstanceType] += x.Instances
		}
	}
	if e.Event == Lead {
		// No server scheduled before this line: every head's wait
		// starts again now (endInstant keeps the new since).
		for s, p := range c.pending {
			p.since = e.T
			c.pending[s] = p
		}
		return
	}
	j := c.jobs[e.Job]
	switch e.Event {
	case Submit:
		s := c.shares[e.Queue+"\x00"+e.Share]
		if s == nil {
			if e.Share == "" {
				c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s is submitted to queue %s, which the configuration does not have", e.Job, e.Queue)
			} else {
				c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s is submitted to share %s of queue %s, which the configuration does not have", e.Job, e.Share, e.Queue)
			}
			return
		}
		if j != nil && !j.done {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s is submitted again while it is still in the system", e.Job)
			return
		}
		j = &jobState{id: e.Job, share: s, priority: e.Priority, submitT: e.T, want: demand}
		if e.Plan != "" {
			if j.plan = c.plans[e.Plan]; j.plan == nil || j.plan.share != s {
				c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s of share %s names capacity plan %s, which the configuration does not give that share", e.Job, e.Share, e.Plan)
			}
		}
		c.jobs[e.Job] = j
		c.wait(j)
		c.touched[s.env] = true
	case Priority:
		if !j.inSystem() {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "priority of job %s changes, but it is not in the system", e.Job)
			return
		}
		j.priority = e.Priority
		if j.waiting {
			c.wait(j) // re-queue at its new place
		}
		c.touched[j.share.env] = true
	case Start:
		c.summary.Starts++
		if !j.inSystem() {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s starts without having been submitted", e.Job)
			return
		}
		if j.done {
			// Its fail was a failed attempt, retried (or a lost one, requeued).
			c.summary.Retries++
			j.done, j.mayRetry = false, false
		}
		if j.demand != nil {
			c.fail(e.T, line, RuleDoubleHold, []string{e.Job}, "job %s starts while it already holds %s", e.Job, j.demand)
			return
		}
		if len(demand) == 0 {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s starts holding nothing", e.Job)
		}
		c.unwait(j)
		j.demand = demand
		j.startLine = line
		j.startT = e.T
		s := j.share
		if s.holders != nil {
			s.holders[j] = true
		}
		if s.minRun > 0 {
			heap.Push(&c.protEnds, protEnd{t: e.T + s.minRun, job: j.id, line: line})
		}
		s.usage.Add(demand)
		s.env.usage.Add(demand)
		c.touched[s.env] = true
		delete(c.reported, j.id)
		delete(c.forJobs, j.id)
		c.checkStart(e.T, line, j)
		if p := j.plan; p != nil {
			p.used += demand[p.typ]
			if !p.open {
				c.fail(e.T, line, RulePlan, []string{j.id}, "job %s of capacity plan %s starts while the plan is not open (it is from t=%s to t=%s, its end less its warning)", j.id, p.name, formatT(p.start), formatT(p.close))
			} else if p.used > p.n {
				c.fail(e.T, line, RulePlan, []string{j.id}, "job %s starts and the jobs of capacity plan %s hold %d %s, more than its %d", j.id, p.name, p.used, p.typ, p.n)
			}
		}
	case Stopping:
		if !j.inSystem() || j.done {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s is stopping, but it is not in the system", e.Job)
			return
		}
		if j.demand == nil {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s is stopping but holds nothing", e.Job)
			return
		}
		if j.stopping {
			return // decided again (a restarted server): judged the first time
		}
		j.stopping, j.stoppingFor, j.stoppingLine = true, e.For, line
		if e.For != "" {
			if c.stoppingBy[e.For] == nil {
				c.stoppingBy[e.For] = map[string]bool{}
			}
			c.stoppingBy[e.For][j.id] = true
		}
		c.judgePreempt(e, line, j)
	case Preempt, Finish, Fail:
		switch e.Event {
		case Preempt:
			c.summary.Preempts++
		case Finish:
			c.summary.Finishes++
		default:
			c.summary.Fails++
		}
		if !j.inSystem() {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s ends (%s), but it is not in the system", e.Job, e.Event)
			return
		}
		if j.demand == nil {
			if e.Event == Fail && len(demand) == 0 {
				// A job that held nothing fails: it leaves the queue.
				c.unwait(j)
				j.done, j.mayRetry = true, false
				c.touched[j.share.env] = true
				if f := c.forJobs[j.id]; f != nil {
					delete(c.forJobs, j.id)
					c.fail(e.T, line, RulePreemptedForNothing, append([]string{j.id}, f.victims...),
						"%s were preempted for job %s, which failed without starting", strings.Join(f.victims, ", "), j.id)
				}
				return
			}
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s gives back %s (%s) but holds nothing", e.Job, demand, e.Event)
			return
		}
		if !sameCapacity(demand, j.demand) {
			c.fail(e.T, line, RuleLog, []string{e.Job}, "job %s gives back %s (%s) but holds %s", e.Job, demand, e.Event, j.demand)
		}
		if e.Event == Preempt {
			c.checkPreempt(e, line, j)
		}
		s := j.share
		for t, n := range j.demand {
			s.usage[t] -= n
			s.env.usage[t] -= n
		}
		if j.plan != nil {
			j.plan.used -= j.demand[j.plan.typ]
		}
		j.demand = nil
		delete(s.holders, j)
		if v := c.stoppingBy[j.stoppingFor]; v != nil {
			delete(v, j.id)
			if len(v) == 0 {
				delete(c.stoppingBy, j.stoppingFor)
			}
		}
		j.stopping, j.stoppingFor = false, ""
		c.touched[s.env] = true
		switch e.Event {
		case Preempt:
			c.wait(j) // back in its original place; a final preemption is followed by a fail
		case Fail:
			// Final unless the job starts again (a retried attempt). Until
			// then the checker does not know whether it waits, so it is not
			// taken for a waiting head.
			j.done, j.mayRetry = true, true
		default:
			j.done = true
		}
	}
}

func sameCapacity(a, b qshare.Capacity) bool {
	for t, n := range a {
		if b[t] != n {
			return false
		}
	}
	for t, n := range b {
		if a[t] != n {
			return false
		}
	}
	return true
}

// maxUsage returns the most share s may use of type t, and false for no bound.
func (s *shareState) maxUsage(t string) (int64, bool) {
	own := s.limits[t]
	if s.noQuota {
		return 0, false
	}
	if s.strategy != qshare.StrategyLendAndBorrow {
		return own, true
	}
	if s.borrowLimit < 0 {
		return 0, false
	}
	return own + own*s.borrowLimit/100, true
}

func (c *Checker) checkStart(t float64, line int, j *jobState) {
	s := j.share
	env := s.env
	for _, typ := range j.demand.Types() {
		if u, lim := env.usage[typ], env.limits[typ]; u > lim {
			c.fail(t, line, RuleEnvironmentCapacity, c.holders(env, typ, j.id),
				"job %s starts and environment %s uses %d %s, above its limit of %d", j.id, env.name, u, typ, lim)
		}
		if m, bounded := s.maxUsage(typ); bounded && s.usage[typ] > m {
			rule, what := RuleShareLimit, "its own maxCapacity"
			if s.strategy == qshare.StrategyLendAndBorrow {
				rule, what = RuleBorrowCap, "its borrow cap"
			}
			c.fail(t, line, rule, []string{j.id},
				"job %s starts and %s share %s uses %d %s, above %s of %d", j.id, s.strategy, s.name, s.usage[typ], typ, what, m)
		}
		// What borrowers use must come from lenders' idle capacity or from
		// capacity no share owns, never from a RESERVE share's idle part.
		var borrowed, lendable int64
		for _, o := range env.shares {
			u, l := o.usage[typ], o.limits[typ]
			if u > l {
				borrowed += u - l
			} else if o.strategy.Lends() {
				lendable += l - u
			}
		}
		if avail := env.unowned[typ] + lendable; borrowed > avail {
			var reserve []string
			for _, o := range env.shares {
				if o.strategy == qshare.StrategyReserve && o.usage[typ] < o.limits[typ] {
					reserve = append(reserve, fmt.Sprintf("%s (%d idle)", o.name, o.limits[typ]-o.usage[typ]))
				}
			}
			c.fail(t, line, RuleBorrowSource, []string{j.id},
				"job %s starts and shares of %s borrow %d %s, but lenders' idle capacity and unowned capacity come to %d: the rest is RESERVE capacity of %s",
				j.id, env.name, borrowed, typ, avail, strings.Join(reserve, ", "))
		}
	}
}

// holders lists the jobs that hold typ in env, first the one named.
func (c *Checker) holders(env *envState, typ, first string) []string {
	out := []string{first}
	var ids []string
	for id, j := range c.jobs {
		if id != first && j.demand != nil && j.demand[typ] > 0 && j.share.env == env {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) > 20 {
		ids = ids[:20]
	}
	return append(out, ids...)
}

// checkPreempt checks a preempt line: its legitimacy, unless its stopping
// line was judged, and that the job it made room for starts.
func (c *Checker) checkPreempt(e Event, line int, j *jobState) {
	if j.stopping {
		if e.For == "" {
			e.For = j.stoppingFor // a restarted server no longer knew it
		}
	} else if !c.judgePreempt(e, line, j) {
		return
	}
	f := c.jobs[e.For]
	if e.For == "" || !f.inSystem() {
		// Nobody named, or the job decided for left the system while this
		// one stopped (terminated): judged at the stopping line, nothing
		// remains to start. (Without a stopping line, judgePreempt has
		// refused a job not in the system.)
		return
	}
	if f.demand != nil || (j.stopping && f.startLine > j.stoppingLine) {
		return // it started already (in room freed meanwhile)
	}
	fs := c.forJobs[e.For]
	if fs == nil {
		fs = &forState{t: e.T, line: line}
		c.forJobs[e.For] = fs
	}
	fs.victims = append(fs.victims, j.id)
}

// judgePreempt checks that preempting j for e.For is allowed in the state
// the log is in now (the decision's). It returns false when e.For is not a
// job in the system.
func (c *Checker) judgePreempt(e Event, line int, j *jobState) bool {
	s := j.share
	if s.noQuota {
		return c.jobs[e.For].inSystem() || e.For == ""
	}
	if s.strategy == qshare.StrategyReserve && !s.inShare {
		c.fail(e.T, line, RuleReservePreempted, []string{j.id, e.For},
			"job %s of RESERVE share %s (in-share preemption DISABLED) is preempted for %s", j.id, s.name, orUnknown(e.For))
	}
	// A server's log may write a start a moment after the pass that
	// decided it (Settle allows for that); a simulation's, never.
	if ran := e.T - j.startT; s.minRun > 0 && ran+c.opts.Settle < s.minRun {
		c.fail(e.T, line, RuleMinRunTime, []string{j.id, e.For},
			"job %s of share %s is preempted for %s after running %ss (since t=%s), less than the share's minimum run time of %ss",
			j.id, s.name, orUnknown(e.For), formatT(ran), formatT(j.startT), formatT(s.minRun))
	}
	if e.For == "" {
		return true
	}
	f := c.jobs[e.For]
	if !f.inSystem() {
		c.fail(e.T, line, RuleLog, []string{j.id, e.For}, "job %s is preempted for job %s, which is not in the system", j.id, e.For)
		return false
	}
	if f.share == s {
		if j.priority >= f.priority {
			c.fail(e.T, line, RuleInSharePriority, []string{j.id, e.For},
				"job %s (priority %d) is preempted in share %s for job %s of priority %d: only strictly lower priorities may be", j.id, j.priority, s.name, f.id, f.priority)
		}
	} else {
		// The share's usage counts what is promised to its reserved jobs
		// (their demand, as in fitsNow): the engine counts it too, so a
		// share whose reserved job borrows is above its limit although
		// its started jobs alone are not.
		commit, _ := c.reservedCommitments(s.env, nil)
		over := false
		for t, n := range j.demand {
			if n > 0 && s.usage[t]+commit[s][t] > s.limits[t] {
				over = true
			}
		}
		if !over {
			promised := ""
			if len(commit[s]) > 0 {
				promised = fmt.Sprintf(", and %s promised to its reserved jobs", commit[s])
			}
			c.fail(e.T, line, RuleReclaimVictim, []string{j.id, e.For},
				"job %s of share %s is preempted for job %s of share %s, but share %s uses no more than its own maxCapacity (%s of %s%s)",
				j.id, s.name, f.id, f.share.name, s.name, s.usage, s.limits, promised)
		}
	}
	return true
}

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed job"
	}
	return s
}

// endInstant checks, once every event of the instant has been applied, that
// no head job waits while it fits its own share and the environment.
func (c *Checker) endInstant() {
	check := map[*shareState]bool{}
	for env := range c.touched {
		for _, s := range env.shares {
			check[s] = true
		}
	}
	for s := range c.pending {
		check[s] = true
	}
	clear(c.touched)
	// Visit shares in a fixed order so the violations come out the same way.
	order := make([]*shareState, 0, len(check))
	for s := range check {
		order = append(order, s)
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].queue != order[b].queue {
			return order[a].queue < order[b].queue
		}
		return order[a].name < order[b].name
	})
	for _, s := range order {
		h := c.head(s)
		if h == nil || c.reported[h.id] || s.planWaiting > 0 || !c.fitsNow(s, c.jobs[h.id]) {
			delete(c.pending, s)
			continue
		}
		p, ok := c.pending[s]
		if !ok || p.job != h.id {
			p = pendingHead{job: h.id, since: c.now}
			c.pending[s] = p
		}
		if c.now-p.since >= c.opts.Settle {
			delete(c.pending, s)
			c.reported[h.id] = true
			j := c.jobs[h.id]
			c.fail(c.now, 0, RuleHeadWaits, []string{h.id},
				"job %s, head of share %s, waits (since t=%s) although it fits: it needs %s, the share uses %s of %s and environment %s has %s free",
				h.id, s.name, formatT(p.since), c.demandOf(j), s.usage, s.limits, s.env.name, free(s.env))
		}
	}
}

func free(env *envState) qshare.Capacity {
	out := qshare.Capacity{}
	for t, n := range env.limits {
		out[t] = n - env.usage[t]
	}
	return out
}

// demandOf returns the demand a waiting job will take: the checker learns it
// from the job's submit lines.
func (c *Checker) demandOf(j *jobState) qshare.Capacity { return j.want }

// fitsNow reports whether j fits its share's own maxCapacity and the
// environment's free room. Room that RESERVE shares keep idle is not free
// for others: taking it would leave what borrowers use without a lender
// (the borrow-source rule), so j has room only if, once started, borrowed
// capacity is still covered by unowned capacity and lenders' idle capacity.
//
// Capacity promised to a reserved job (one that others were preempted for
// and that has not started yet) is not free either: the engine counts the
// reserved job's demand in its share's usage, and holds at once, out of the
// environment's free room, the part its stopping victims do not hold. The
// log has no line for that holding, so the checker derives it.
func (c *Checker) fitsNow(s *shareState, j *jobState) bool {
	d := c.demandOf(j)
	if len(d) == 0 {
		return false
	}
	env := s.env
	shareCommit, envCommit := c.reservedCommitments(env, j)
	for t, n := range d {
		if s.usage[t]+shareCommit[s][t]+n > s.limits[t] || env.usage[t]+envCommit[t]+n > env.limits[t] {
			return false
		}
		var borrowed, lendable int64
		for _, o := range env.shares {
			u, l := o.usage[t]+shareCommit[o][t], o.limits[t]
			if o == s {
				u += n
			}
			if u > l {
				borrowed += u - l
			} else if o.strategy.Lends() {
				lendable += l - u
			}
		}
		if borrowed > env.unowned[t]+lendable {
			return false
		}
	}
	return true
}

// reservedCommitments returns, for the reserved jobs of env (jobs that
// others were preempted for and that have not started), their demand per
// share, and the part of it that their still-stopping victims do not hold.
// The job being judged, except, is left out: what is promised to it is
// room for it.
func (c *Checker) reservedCommitments(env *envState, except *jobState) (map[*shareState]qshare.Capacity, qshare.Capacity) {
	var shares map[*shareState]qshare.Capacity
	var free qshare.Capacity
	add := func(id string) {
		r := c.jobs[id]
		if r == nil || r == except || r.share.env != env || r.demand != nil || !r.inSystem() || r.done {
			return
		}
		if shares == nil {
			shares, free = map[*shareState]qshare.Capacity{}, qshare.Capacity{}
		}
		if shares[r.share] == nil {
			shares[r.share] = qshare.Capacity{}
		}
		for t, n := range r.want {
			shares[r.share][t] += n
			for v := range c.stoppingBy[id] {
				n -= c.jobs[v].demand[t]
			}
			free[t] += max(n, 0)
		}
	}
	for id := range c.forJobs {
		add(id)
	}
	for id := range c.stoppingBy {
		if c.forJobs[id] == nil {
			add(id)
		}
	}
	return shares, free
}

// The waiting jobs of a share, best first: priority descending, then
// submission time, then ID (the engine's order).
type waitEntry struct {
	priority int
	t        float64
	id       string
	version  int
}

func (e waitEntry) before(o waitEntry) bool {
	if e.priority != o.priority {
		return e.priority > o.priority
	}
	if e.t != o.t {
		return e.t < o.t
	}
	return e.id < o.id
}

func (c *Checker) wait(j *jobState) {
	if j.plan != nil && !j.waiting {
		j.share.planWaiting++
	}
	j.version++
	j.waiting = true
	heap.Push(&j.share.waiting, waitEntry{priority: j.priority, t: j.submitT, id: j.id, version: j.version})
}

func (c *Checker) unwait(j *jobState) {
	if j.plan != nil && j.waiting {
		j.share.planWaiting--
	}
	j.version++
	j.waiting = false
}

// head returns the share's first waiting job, dropping stale entries.
func (c *Checker) head(s *shareState) *waitEntry {
	for s.waiting.Len() > 0 {
		top := &s.waiting[0]
		if j := c.jobs[top.id]; j != nil && j.waiting && j.version == top.version {
			return top
		}
		heap.Pop(&s.waiting)
	}
	return nil
}

// protEnd is when the protection of the hold that job started at its start
// line line ends.
type protEnd struct {
	t    float64
	job  string
	line int
}

func (p protEnd) before(o protEnd) bool {
	if p.t != o.t {
		return p.t < o.t
	}
	return p.line < o.line
}

// heapOf is a container/heap of Ts, the first of them (h[0]) the one
// before all others: the checker's heaps of waiting jobs and of the ends
// of protections.
type heapOf[T interface{ before(T) bool }] []T

func (h heapOf[T]) Len() int           { return len(h) }
func (h heapOf[T]) Less(a, b int) bool { return h[a].before(h[b]) }
func (h heapOf[T]) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *heapOf[T]) Push(x any)        { *h = append(*h, x.(T)) }
func (h *heapOf[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// protectionEnds judges, once every event of the instant has been applied,
// the protections that end from now until the next line's time next (the
// log's state holds meanwhile): RuleProtectionWait. Without a next line
// (the end of the log) only those ending now are judged, and only when
// Settle is 0: a server's log may have been cut short.
func (c *Checker) protectionEnds(next float64, hasNext bool) {
	for c.protEnds.Len() > 0 {
		p := c.protEnds[0]
		if hasNext && p.t >= next || !hasNext && (p.t > c.now || c.opts.Settle > 0) {
			return
		}
		heap.Pop(&c.protEnds)
		j := c.jobs[p.job]
		if j == nil || j.demand == nil || j.startLine != p.line || j.stopping {
			continue // it no longer holds that capacity
		}
		at := max(p.t, c.now)
		if hasNext && next-at <= c.opts.Settle {
			continue // the server may act at the next line
		}
		c.judgeProtectionEnd(j, at)
	}
}

// judgeProtectionEnd checks, at time at when the protection of j ends, every
// head of j's environment (RuleProtectionWait).
func (c *Checker) judgeProtectionEnd(j *jobState, at float64) {
	env := j.share.env
	shareCommit, envCommit := c.reservedCommitments(env, nil)
	order := append([]*shareState(nil), env.shares...)
	sort.Slice(order, func(a, b int) bool { return order[a].name < order[b].name })
	for _, s := range order {
		if s == j.share {
			continue
		}
		e := c.head(s)
		if e == nil || c.reported[e.id] {
			continue
		}
		h := c.jobs[e.id]
		if c.forJobs[h.id] != nil || c.stoppingBy[h.id] != nil {
			continue // reserved: its victims were chosen
		}
		if c.reclaimable(s, h, j, at, shareCommit, envCommit, true) && !c.reclaimable(s, h, j, at, shareCommit, envCommit, false) {
			c.reported[h.id] = true
			c.fail(at, 0, RuleProtectionWait, []string{h.id, j.id},
				"job %s, head of share %s, waits at t=%s although the protection of job %s (share %s, minimum run time %ss, started t=%s) ended then: preempting unprotected jobs above their shares' own maxCapacity would make room for it (it needs %s, the share uses %s of %s; environment %s has %s free)",
				h.id, s.name, formatT(at), j.id, j.share.name, formatT(j.share.minRun), formatT(j.startT), c.demandOf(h), s.usage, s.limits, env.name, free(env))
		}
	}
}

// reclaimable reports whether head h of share s fits its share's own
// maxCapacity and would get the room it lacks by a reclaim at time at from
// the jobs of other shares above their own maxCapacity that are no longer
// protected; withJ says whether job j (whose protection ends at at) counts.
// It is a sufficient condition, conservative where the log leaves a doubt:
// for each type t that h lacks, the engine's victim selection takes, from
// each share o whose future usage (held, less its stopping jobs, plus what
// its reserved jobs are promised) is above its own limit, unprotected jobs
// holding t until o is no longer above it or they run out, so it gets at
// least the smaller of the two.
func (c *Checker) reclaimable(s *shareState, h, j *jobState, at float64, shareCommit map[*shareState]qshare.Capacity, envCommit qshare.Capacity, withJ bool) bool {
	d := c.demandOf(h)
	if len(d) == 0 {
		return false
	}
	env := s.env
	short := false
	for t, n := range d {
		if n > env.limits[t] || s.usage[t]+shareCommit[s][t]+n > s.limits[t] {
			return false // misconfigured, or it must borrow
		}
		// Free room, less every RESERVE share's idle capacity (counted on
		// its held usage: more idle than the engine counts, never less).
		room := env.limits[t] - env.usage[t] - envCommit[t]
		for _, o := range env.shares {
			if o != s && o.strategy == qshare.StrategyReserve && o.limits[t] > o.usage[t] {
				room -= o.limits[t] - o.usage[t]
			}
		}
		if n > max(room, 0) {
			short = true
		}
	}
	if !short {
		return false // the head-waits rule's case
	}
	for t, n := range d {
		room := env.limits[t] - env.usage[t] - envCommit[t]
		for _, o := range env.shares {
			if o != s && o.strategy == qshare.StrategyReserve && o.limits[t] > o.usage[t] {
				room -= o.limits[t] - o.usage[t]
			}
		}
		need := n - max(room, 0)
		if need <= 0 {
			continue
		}
		var got int64
		for _, o := range env.shares {
			if o == s {
				continue
			}
			future := o.usage[t] + shareCommit[o][t]
			var unprotected int64
			for k := range o.holders {
				if k.stopping {
					future -= k.demand[t]
					continue
				}
				if k.demand[t] == 0 {
					continue
				}
				if k == j {
					if withJ {
						unprotected += k.demand[t]
					}
					continue
				}
				if o.minRun == 0 || at-k.startT >= o.minRun+1e-3 {
					unprotected += k.demand[t]
				}
			}
			if over := future - o.limits[t]; over > 0 {
				got += min(over, unprotected)
			}
		}
		if got < need {
			return false
		}
	}
	return true
}

// planEdges applies the window edges of the capacity plans that time t
// has reached: an opening adds the plan's capacity to its environment's
// and its share's limits, a close takes it away; and at the first instant
// after a plan's end (and Settle), nothing of the plan may still hold
// capacity (the lines at the end itself may still give it back).
func (c *Checker) planEdges(t float64) {
	for _, p := range c.planOrder {
		s := p.share
		if want := t >= p.start && t < p.close; want != p.open {
			sign := int64(1)
			if !want {
				sign = -1
			}
			s.limits[p.typ] += sign * p.n
			s.env.limits[p.typ] += sign * p.n
			p.open = want
			c.touched[s.env] = true
		}
		if !p.ended && t > p.end+c.opts.Settle {
			c.planEnded(p, t)
		}
	}
}

// planEnded checks, at time t after plan p's end (and Settle), that
// nothing of the plan still holds capacity.
func (c *Checker) planEnded(p *planState, t float64) {
	s := p.share
	p.ended = true
	var held []string
	for id, j := range c.jobs {
		if j.plan == p && j.demand != nil {
			held = append(held, id)
		}
	}
	sort.Strings(held)
	if len(held) > 0 {
		c.fail(t, 0, RulePlan, held, "capacity plan %s ended at t=%s, and its jobs %s still hold capacity", p.name, formatT(p.end), strings.Join(held, ", "))
	}
	if u, l := s.env.usage[p.typ], s.env.limits[p.typ]; u > l {
		c.fail(t, 0, RulePlan, c.holders(s.env, p.typ, "")[1:], "capacity plan %s ended at t=%s, and environment %s still uses %d %s, above its limit of %d", p.name, formatT(p.end), s.env.name, u, p.typ, l)
	}
}

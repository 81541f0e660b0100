package engine

// Capacity plans (issue 21, part 2): capacity of one instance type that a
// quota share has for a window of time, like a SageMaker training plan.
// While the plan is open its capacity is added to its environment's limit
// and to its share's own limit: the share's other jobs use it as the
// share's own, and the share's strategy decides whether it is lent. The
// plan's own jobs (JobSpec.Plan) run only on it: at most Count instances of
// its type among them, only while it is open, and never on borrowed
// capacity. Outside the window they are parked in the plan's own run queue,
// so that they block nothing in their share.
//
// The engine keeps no clock: Schedule applies the window's edges that its
// now has passed before it schedules, and NextWake names the next edge.

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"qshare"
)

// PlanConfig is a capacity plan as the engine sees it.
type PlanConfig struct {
	// Name identifies the plan in the engine (the daemon uses its ARN).
	Name string
	// Label is how reasons name the plan (its name as the user gave it);
	// empty means Name.
	Label string
	// Queue and Share are the quota share the plan's capacity goes to.
	Queue string
	Share string
	// InstanceType and Count are the capacity the plan adds.
	InstanceType string
	Count        int64
	// Start and End are the window [Start, End).
	Start time.Time
	End   time.Time
	// Warning is how long before End the plan stops taking new starts and
	// what runs on its capacity is asked to stop, by End (Decision.StopBy).
	// 0 means at End itself; it must be below End-Start.
	Warning time.Duration
}

// plan is a capacity plan's state.
type plan struct {
	cfg   PlanConfig
	idx   int32 // its index in Engine.planList, plus 1 (job.plan)
	sh    *share
	t     int32
	n     int64
	start int64
	close int64 // End - Warning: when its capacity goes
	end   int64
	// open says its capacity is in its share's and environment's limits;
	// restored says Restore gave it a holding job while it was not open
	// (a restart), which the next look at the plans stops if it is closed.
	open     bool
	restored bool
	// used is what the plan's jobs hold or are reserved, of type t.
	used int64
	// jobs counts the engine's jobs that name the plan.
	jobs int
	// rq parks the plan's RUNNABLE jobs while it is not open.
	rq runQueue
	// announce lists jobs parked since the last pass, which get their wait
	// reason then (each entry holds a reference, see jobStore.unref).
	announce []*job
	// waitText is the reason of a parked job.
	waitText string
}

func (p *plan) label() string {
	if p.cfg.Label != "" {
		return p.cfg.Label
	}
	return p.cfg.Name
}

// SetPlan creates or updates a capacity plan. Its window is applied at the
// next Schedule, by the time that Schedule is given. A plan that has jobs
// cannot move to another share or instance type (ECONFLICT).
func (e *Engine) SetPlan(c PlanConfig) error {
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "capacity plan name must not be empty")
	}
	var s *share
	if q := e.queues[c.Queue]; q != nil {
		s = q.shares[c.Share]
	}
	if s == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "capacity plan %s: quota share %s of job queue %s does not exist", c.Name, c.Share, c.Queue)
	}
	if s.fair != nil {
		return qshare.Errorf(qshare.EINVALID, "capacity plan %s: share %s is scheduled by fair share; a plan gives capacity to a quota share", c.Name, c.Share)
	}
	if c.InstanceType == "" {
		return qshare.Errorf(qshare.EINVALID, "capacity plan %s: instance type must not be empty", c.Name)
	}
	if c.Count <= 0 {
		return qshare.Errorf(qshare.EINVALID, "capacity plan %s: instance count %d must be at least 1", c.Name, c.Count)
	}
	if !c.End.After(c.Start) {
		return qshare.Errorf(qshare.EINVALID, "capacity plan %s: end %s is not after start %s", c.Name, c.End.UTC().Format(time.RFC3339), c.Start.UTC().Format(time.RFC3339))
	}
	if c.Warning < 0 || c.Warning >= c.End.Sub(c.Start) {
		return qshare.Errorf(qshare.EINVALID, "capacity plan %s: warning %s must be at least 0 and shorter than the window (%s)", c.Name, c.Warning, c.End.Sub(c.Start))
	}
	if e.plans == nil {
		e.plans = map[string]*plan{}
	}
	p := e.plans[c.Name]
	if p != nil && p.jobs > 0 && (p.sh != s || p.cfg.InstanceType != c.InstanceType) {
		return qshare.Errorf(qshare.ECONFLICT, "capacity plan %s has %d job(s); it cannot move to another share or instance type until they are gone", c.Name, p.jobs)
	}
	if p == nil {
		p = &plan{}
		p.rq.st = &e.jobs
		e.planList = append(e.planList, p)
		p.idx = int32(len(e.planList))
		e.plans[c.Name] = p
		i, _ := slices.BinarySearchFunc(e.planOrder, c.Name, func(x *plan, n string) int { return strings.Compare(x.cfg.Name, n) })
		e.planOrder = slices.Insert(e.planOrder, i, p)
	}
	old := p.sh
	if old != nil && old != s {
		old.plans = removePlan(old.plans, p)
		if p.open {
			p.open = false
			e.applyLimits(old.q.env)
		}
		e.markDirty(old.q.env)
	}
	if old != s {
		s.plans = append(s.plans, p)
		sort.Slice(s.plans, func(i, j int) bool { return s.plans[i].cfg.Name < s.plans[j].cfg.Name })
	}
	p.cfg = c
	p.sh = s
	p.t = e.intern(c.InstanceType)
	p.n = c.Count
	p.start = c.Start.UnixNano()
	p.end = c.End.UnixNano()
	p.close = p.end - int64(c.Warning)
	e.setPlanText(p)
	e.applyLimits(s.q.env)
	e.markDirty(s.q.env)
	e.planCheck = true
	return nil
}

// RemovePlan forgets a capacity plan; its capacity leaves its share and
// environment at once, which preempts nothing (as a lowered limit). It
// fails with ECONFLICT while jobs name it.
func (e *Engine) RemovePlan(name string) error {
	p := e.plans[name]
	if p == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "capacity plan %s does not exist", name)
	}
	if p.jobs > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "capacity plan %s still has %d job(s); terminate them first", name, p.jobs)
	}
	delete(e.plans, name)
	e.planList[p.idx-1] = nil
	e.planOrder = removePlan(e.planOrder, p)
	p.sh.plans = removePlan(p.sh.plans, p)
	p.open = false
	for _, j := range p.announce {
		e.jobs.unref(j)
	}
	p.announce = nil
	e.planAnnounce = removePlan(e.planAnnounce, p)
	e.applyLimits(p.sh.q.env)
	e.markDirty(p.sh.q.env)
	e.planCheck = true
	return nil
}

func removePlan(ps []*plan, p *plan) []*plan {
	for i, x := range ps {
		if x == p {
			return append(ps[:i], ps[i+1:]...)
		}
	}
	return ps
}

// Plan returns a plan's configuration and whether its capacity is open
// (as of the last Schedule) and how much of it its jobs hold or are
// reserved. ok is false for an unknown plan.
func (e *Engine) Plan(name string) (c PlanConfig, open bool, used int64, ok bool) {
	p := e.plans[name]
	if p == nil {
		return PlanConfig{}, false, 0, false
	}
	return p.cfg, p.open, p.used, true
}

// setPlanText sets the reason of the plan's parked jobs: the window has
// not opened yet, or has closed.
func (e *Engine) setPlanText(p *plan) {
	if !p.open && e.planTime >= p.close {
		p.waitText = "waiting for capacity plan " + p.label() + ", which ended at " + time.Unix(0, p.end).UTC().Format(time.RFC3339) + " (the job runs only on the plan's capacity)"
		return
	}
	p.waitText = "waiting for capacity plan " + p.label() + ", which starts at " + time.Unix(0, p.start).UTC().Format(time.RFC3339)
}

// planOf returns the plan job j names, or nil. It reads j's plan index
// only when its share has plans, so that shares without plans pay one
// comparison.
func (e *Engine) planOf(j *job) *plan {
	if j.sh.plans == nil || j.plan == 0 {
		return nil
	}
	return e.planList[j.plan-1]
}

// planByIdx returns the plan of s with index i (job.plan), or nil.
func (s *share) planByIdx(i int32) *plan {
	for _, p := range s.plans {
		if p.idx == i {
			return p
		}
	}
	return nil
}

// planOK reports whether h may start as far as its plan is concerned: it
// names none, or it fits what is left of its plan.
func (e *Engine) planOK(h *job) bool {
	p := e.planOf(h)
	return p == nil || planFit(p, h)
}

// planFit reports whether h, a job of plan p, fits what is left of the
// plan's capacity.
func planFit(p *plan, h *job) bool {
	return p.open && p.used+h.demandOf(p.t) <= p.n
}

// planHold counts j's demand into its plan's use (sign +1) or out of it
// (-1).
func (e *Engine) planHold(j *job, sign int64) {
	if p := e.planOf(j); p != nil {
		p.used += sign * j.demandOf(p.t)
	}
}

// planParked notes that j, of a plan that is not open, was parked: its
// reason is set at the next pass.
func (e *Engine) planParked(j *job) {
	p := e.planOf(j)
	if p == nil || p.open {
		return
	}
	j.refs++
	if len(p.announce) == 0 {
		e.planAnnounce = append(e.planAnnounce, p)
	}
	p.announce = append(p.announce, j)
}

// announcePlans gives the jobs parked since the last pass their wait
// reason, plan by plan in the order their first job was parked.
func (e *Engine) announcePlans() {
	for _, p := range e.planAnnounce {
		for _, j := range p.announce {
			if j.state == JobRunnable && !p.open && j.reason != p.waitText {
				j.reason = p.waitText
				e.out = append(e.out, Decision{Kind: DecisionWait, Job: j.id, Queue: p.sh.q.name, Share: p.sh.name, Reason: j.reason})
			}
			e.jobs.unref(j)
		}
		clear(p.announce)
		p.announce = p.announce[:0]
	}
	clear(e.planAnnounce)
	e.planAnnounce = e.planAnnounce[:0]
}

// applyLimits sets the limits of env and its shares: what they were
// configured with plus the plans that are open.
func (e *Engine) applyLimits(env *environment) {
	env.limit = append(env.limit[:0], env.base...)
	for _, s := range env.shares {
		e.shareLimits(s)
		for _, p := range s.plans {
			if p.open {
				env.limit.add(p.t, p.n)
			}
		}
	}
	e.reindex(env)
}

// shareLimits sets s's own limit and what it may ever use from its
// configuration and its open plans.
func (e *Engine) shareLimits(s *share) {
	c := &s.cfg
	s.limit = e.toVec(c.Limits)
	for _, p := range s.plans {
		if p.open {
			s.limit.add(p.t, p.n)
		}
	}
	s.unlimited = c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit == qshare.BorrowUnlimited
	s.maxUse = make(vec, len(s.limit))
	for i, l := range s.limit {
		s.maxUse[i] = l
		if c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit > 0 {
			s.maxUse[i] = l + l*c.BorrowLimit/100
		}
	}
}

// applyPlans applies the window edges that now has reached and sets
// planWake to the next edge.
func (e *Engine) applyPlans(now int64) {
	e.planTime = now
	e.planCheck = false
	e.planWake = 0
	// Plans in name order: the decisions of an edge do not depend on map
	// iteration.
	for _, p := range e.planOrder {
		want := now >= p.start && now < p.close
		switch {
		case want && !p.open:
			e.openPlan(p)
		case !want && (p.open || p.restored && now >= p.close):
			// Also after a restart that restored the plan's attempts
			// past its close.
			e.closePlan(p, now)
		}
		p.restored = false
		e.setPlanText(p)
		for _, edge := range [2]int64{p.start, p.close} {
			if edge > now && (e.planWake == 0 || edge < e.planWake) {
				e.planWake = edge
			}
		}
	}
}

// openPlan adds p's capacity and moves its parked jobs into its share's
// run queue, so that the pass that follows can start them.
func (e *Engine) openPlan(p *plan) {
	s := p.sh
	p.open = true
	e.applyLimits(s.q.env)
	for {
		j := p.rq.head()
		if j == nil {
			break
		}
		j.refs++ // kept alive across the move
		p.rq.drop(j)
		j.why = waitWhy{}
		j.reason = ""
		s.runq.push(j)
		e.jobs.unref(j)
	}
	e.markDirty(s.q.env)
}

// closePlan takes p's capacity away at its close (End - Warning): its
// RUNNABLE jobs are parked again, its reserved jobs go back to waiting, and
// what runs beyond the capacity left is preempted gracefully, to stop by
// End: first the plan's jobs, then, while the environment is above its
// limit of the type, jobs of shares above their own limit of it (the
// plan's share first, then the others in share order; lowest priority,
// most recently started first). Minimum run times do not protect them:
// the capacity ends.
func (e *Engine) closePlan(p *plan, now int64) {
	s := p.sh
	env := s.q.env
	// The plan's RUNNABLE jobs leave the share's queue while rq still
	// finds them there (the plan is open).
	var moved []*job
	for _, en := range s.runq.h {
		if !s.runq.valid(&en) {
			continue
		}
		if j := e.jobs.at(en.slot); j.plan == p.idx && j.state == JobRunnable {
			moved = append(moved, j)
		}
	}
	for _, j := range moved {
		j.refs++
		s.runq.drop(j)
	}
	// Reserved jobs of the plan give back what they hold; their victims
	// go on stopping and give their capacity to nobody.
	nrun := len(moved)
	for _, j := range env.resv {
		if j.state == JobReserved && j.plan == p.idx && j.sh == s {
			e.cancelReservation(j)
			j.refs++
			moved = append(moved, j)
		}
	}
	e.stats.Runnable += len(moved) - nrun
	p.open = false
	e.applyLimits(env)
	for _, j := range moved {
		j.state = JobRunnable
		j.why = waitWhy{}
		j.reason = ""
		p.rq.push(j)
		e.planParked(j)
		e.jobs.unref(j)
	}
	// The stops.
	stopBy := time.Unix(0, p.end)
	why := "capacity plan " + p.label() + " ends at " + stopBy.UTC().Format(time.RFC3339) + ": stopped to end by then, requeued"
	for _, h := range append([]held(nil), s.holding...) {
		if j := h.j; j.state == JobHolding && j.plan == p.idx {
			e.planStop(j, why, stopBy)
		}
	}
	// Then, while the environment is above its capacity of the type
	// (stopping jobs counted as gone), the jobs of shares above their own
	// limit of it: the plan's share first, then the others in share order
	// (borrowers of what the plan's share lent), each lowest priority and
	// most recently started first.
	envOver := func() bool {
		var claimed int64
		for _, o := range env.shares {
			claimed += o.claimed.at(p.t)
		}
		return env.used.at(p.t)-claimed > env.limit.at(p.t)
	}
	order := append(e.touched[:0], s)
	for _, o := range env.shares {
		if o != s {
			order = append(order, o)
		}
	}
	e.touched = order
	for _, o := range order {
		why = "capacity plan " + p.label() + " of share " + s.name + " ends at " + stopBy.UTC().Format(time.RFC3339) + ": share " + e.relName(s, o) + " runs above its own limit of " + strconv.FormatInt(o.limit.at(p.t), 10) + " " + p.cfg.InstanceType + ", and the environment above its capacity without the plan; stopped to end by then, requeued"
		for _, h := range append([]held(nil), o.holding...) {
			if !envOver() || o.future(p.t) <= o.limit.at(p.t) {
				break
			}
			if j := h.j; j.state == JobHolding && j.demandOf(p.t) > 0 {
				e.planStop(j, why, stopBy)
			}
		}
	}
	clear(order)
	e.touched = order[:0]
	e.markDirty(env)
}

// planStop preempts holding job j because a plan's capacity ends: a
// graceful stop that neither counts as a preemption against its retries
// nor is Final.
func (e *Engine) planStop(j *job, why string, stopBy time.Time) {
	j.state = JobStopping
	for _, a := range j.demand() {
		j.sh.claimed.add(a.t, a.n)
	}
	j.reserver = nil
	e.out = append(e.out, Decision{Kind: DecisionPreempt, Job: j.id, Queue: j.sh.q.name, Share: j.sh.name, CrossShare: true, StopBy: stopBy, Reason: why})
	e.stats.Preempts++
}

// planJobFits checks that a job of share s with demand dem may name plan
// p: it exists, is of the share, and the job needs only its instance type,
// at most its count.
func planJobFits(p *plan, j JobSpec, s *share, dem []amount) error {
	if p == nil {
		return qshare.Errorf(qshare.EINVALID, "job %s: capacity plan %s does not exist", j.ID, j.Plan)
	}
	if p.sh != s {
		return qshare.Errorf(qshare.EINVALID, "job %s: capacity plan %s gives capacity to quota share %s of job queue %s, not to %s of %s", j.ID, p.label(), p.sh.name, p.sh.q.name, s.name, s.q.name)
	}
	for _, a := range dem {
		if a.t != p.t {
			return qshare.Errorf(qshare.EINVALID, "job %s: it needs instance types other than %s, the only one capacity plan %s has", j.ID, p.cfg.InstanceType, p.label())
		}
		if a.n > p.n {
			return qshare.Errorf(qshare.EINVALID, "job %s: it needs %d %s; capacity plan %s has %d", j.ID, a.n, p.cfg.InstanceType, p.label(), p.n)
		}
	}
	return nil
}

package engine

// Jobs entering the engine: Submit and SubmitMany (RUNNABLE), Restore (a
// job that already holds its demand after a restart), the start of a hold,
// and SetPriority.

import (
	"time"

	"qshare"
)

func (e *Engine) newJob(j JobSpec) (*job, error) {
	return e.newJobHash(j, hashID(j.ID), nil)
}

// newJobHash is newJob for a spec whose ID hashes to hash, and whose share
// is s when the caller has already found it (nil: look it up).
func (e *Engine) newJobHash(j JobSpec, hash uint32, s *share) (*job, error) {
	if j.ID == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "job ID must not be empty")
	}
	if old, _ := e.jobs.lookupHash(j.ID, hash); old != nil {
		return nil, qshare.Errorf(qshare.ECONFLICT, "job %s already exists", j.ID)
	}
	if s == nil {
		q := e.queues[j.Queue]
		if q == nil {
			return nil, qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist", j.Queue)
		}
		s = q.shares[j.Share]
		if s == nil {
			return nil, qshare.Errorf(qshare.ENOTFOUND, "quota share %s does not exist in job queue %s", j.Share, j.Queue)
		}
	}
	if j.Priority < qshare.MinPriority || j.Priority > qshare.MaxPriority {
		return nil, qshare.Errorf(qshare.EINVALID, "job %s: schedulingPriority %d is outside %d..%d", j.ID, j.Priority, qshare.MinPriority, qshare.MaxPriority)
	}
	if j.PreemptionRetries < -1 {
		return nil, qshare.Errorf(qshare.EINVALID, "job %s: preemption retries %d is below -1 (-1 means unlimited)", j.ID, j.PreemptionRetries)
	}
	var dem0 [2]amount
	dem := dem0[:0]
	// Types are interned in name order, so that type numbers (and so
	// every order that follows them) do not depend on map iteration.
	var one [1]string // a demand of one type allocates no name list
	names := one[:0]
	if len(j.Demand) > 1 {
		names = j.Demand.Types()
	} else {
		for t := range j.Demand {
			names = append(names, t)
		}
	}
	for _, t := range names {
		n := j.Demand[t]
		if n < 0 {
			return nil, qshare.Errorf(qshare.EINVALID, "job %s: demand of %s is %d; it must be positive", j.ID, t, n)
		}
		if n == 0 {
			continue
		}
		a := amount{e.intern(t), n}
		// Insertion sort by type: demands name one to five types.
		dem = append(dem, a)
		for k := len(dem) - 1; k > 0 && dem[k-1].t > a.t; k-- {
			dem[k], dem[k-1] = dem[k-1], dem[k]
		}
	}
	if len(dem) == 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "job %s demands no capacity; a job needs at least one instance of one instance type", j.ID)
	}
	// The record comes zeroed from the store, but for the counters a slot
	// keeps (ver, epoch), so fields are set one by one.
	jb := e.jobs.add(j.ID, hash)
	jb.id = j.ID
	jb.sh = s
	jb.prio = j.Priority
	jb.created = j.Created.UnixNano()
	jb.preemptions = j.Preemptions
	jb.retries = j.PreemptionRetries
	jb.ndem = uint8(min(len(dem), 255))
	jb.ident = 0
	jb.plan = 0
	if j.Plan != "" {
		p := e.plans[j.Plan]
		if err := planJobFits(p, j, s, dem); err != nil {
			e.jobs.remove(jb)
			return nil, err
		}
		jb.plan = p.idx
		p.jobs++
	}
	if s.fair != nil {
		if j.ShareIdentifier == "" {
			e.jobs.remove(jb)
			return nil, qshare.Errorf(qshare.EINVALID, "job %s: shareIdentifier must be specified.", j.ID)
		}
		jb.ident = s.fair.ident(j.ShareIdentifier, &e.jobs)
	}
	if len(dem) <= len(jb.dem0) {
		jb.dem0 = dem0
	} else {
		if jb.resState == nil {
			jb.resState = &resState{}
		}
		jb.resState.dem = append(jb.resState.dem[:0], dem...)
	}
	return jb, nil
}

// Submit adds a RUNNABLE job. It fails with ENOTFOUND for an unknown queue
// or share and ECONFLICT for a job ID the engine already has.
func (e *Engine) Submit(j JobSpec) error {
	jb, err := e.newJob(j)
	if err != nil {
		return err
	}
	e.enqueue(jb)
	return nil
}

// SubmitMany submits the jobs in order, each as Submit(spec) would, with
// the same effect as those calls one after the other. It stops at the
// first job that cannot be submitted and returns how many it submitted and
// that job's error.
//
// It is cheaper than one Submit per job when many jobs arrive at once:
// the engine asks for the index entries of a group of IDs, the free
// records they will get and the run-queue entries each new job is
// compared with first while it adds the group before, so that their cache
// misses overlap with each other and with that work instead of coming one
// after the other.
func (e *Engine) SubmitMany(specs []JobSpec) (int, error) {
	hashes, shares := e.hashes[:0], e.shareBuf[:0]
	for k := range specs {
		sp := &specs[k]
		hashes = append(hashes, hashID(sp.ID))
		var s *share
		if q := e.queues[sp.Queue]; q != nil {
			s = q.shares[sp.Share]
		}
		shares = append(shares, s)
	}
	e.hashes, e.shareBuf = hashes, shares
	// Each group's memory is asked for while the group before it is
	// added (see prefetchSubmits).
	free0 := len(e.jobs.free)
	e.prefetchSubmits(specs, 0, free0)
	for i := 0; i < len(specs); i += releaseGroup {
		e.prefetchSubmits(specs, i+releaseGroup, free0)
		for k := i; k < min(i+releaseGroup, len(specs)); k++ {
			jb, err := e.newJobHash(specs[k], hashes[k], shares[k])
			if err != nil {
				clear(e.shareBuf)
				return k, err
			}
			e.enqueue(jb)
		}
	}
	clear(e.shareBuf)
	return len(specs), nil
}

// enqueue makes a new job RUNNABLE in its share.
func (e *Engine) enqueue(jb *job) {
	jb.state = JobRunnable
	jb.sh.rq(jb).push(jb)
	e.stats.Runnable++
	if jb.sh.plans != nil {
		e.planParked(jb)
	}
	e.markDirty(jb.sh.q.env)
}

// Restore adds a job that already holds its demand, started at startedAt:
// the caller rebuilding the engine after a restart uses it for attempts that
// are still running. Limits are not checked: the job holds what it holds.
func (e *Engine) Restore(j JobSpec, startedAt time.Time) error {
	jb, err := e.newJob(j)
	if err != nil {
		return err
	}
	e.hold(jb, startedAt.UnixNano())
	if p := e.planOf(jb); p != nil && !p.open {
		p.restored = true
		e.planCheck = true
	}
	e.markDirty(jb.sh.q.env)
	return nil
}

// hold makes a job hold its whole demand (the caller has already taken it
// out of the queue or reservation).
func (e *Engine) hold(j *job, now int64) {
	s := j.sh
	if j.state != JobReserved { // a reserved job already holds everything
		env := s.q.env
		for _, a := range j.demand() {
			s.used.add(a.t, a.n)
			env.used.add(a.t, a.n)
		}
		if s.plans != nil {
			e.planHold(j, +1)
		}
	}
	if s.fair != nil {
		s.fairHold(j, +1)
	}
	j.state = JobHolding
	j.started = now
	e.startSeq++
	j.startSeq = e.startSeq
	s.insertHolding(j)
	j.why = waitWhy{}
	j.reason = ""
	e.stats.Holding++
}

func (e *Engine) unhold(j *job) {
	if j.sh.plans != nil {
		e.planHold(j, -1)
	}
	if j.sh.fair != nil {
		j.sh.fairHold(j, -1)
	}
	j.sh.removeHolding(j)
	e.stats.Holding--
}

// SetPriority changes a job's schedulingPriority. A RUNNABLE job moves to its
// new place; the change can trigger preemption at the next Schedule.
func (e *Engine) SetPriority(id string, priority int) error {
	j := e.jobs.get(id)
	if j == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job %s does not exist", id)
	}
	if priority < qshare.MinPriority || priority > qshare.MaxPriority {
		return qshare.Errorf(qshare.EINVALID, "job %s: schedulingPriority %d is outside %d..%d", id, priority, qshare.MinPriority, qshare.MaxPriority)
	}
	if j.prio == priority {
		return nil
	}
	switch j.state {
	case JobRunnable:
		j.sh.rq(j).drop(j)
		j.prio = priority
		j.sh.rq(j).push(j)
	case JobHolding, JobStopping:
		j.sh.removeHolding(j)
		j.prio = priority
		j.sh.insertHolding(j)
	default:
		j.prio = priority
	}
	e.markDirty(j.sh.q.env)
	return nil
}

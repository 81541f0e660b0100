package engine

// Jobs leaving the engine, or their capacity: Stopping, Release and
// ReleaseMany. A released victim's capacity goes to the reserved job it
// was preempted for.

import (
	"qshare"
)

// Stopping tells the engine that the caller is stopping a job that holds
// capacity for its own reasons (termination, timeout). The job keeps holding
// its capacity until Release, but is no longer a preemption candidate. For a
// RUNNABLE or reserved job, Stopping removes it at once and it holds nothing.
func (e *Engine) Stopping(id string) error {
	j := e.jobs.get(id)
	if j == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job %s does not exist", id)
	}
	// Read before forget: a forgotten job's slot may be cleared at once.
	env := j.sh.q.env
	switch j.state {
	case JobRunnable:
		j.sh.rq(j).drop(j)
		e.stats.Runnable--
		e.forget(j)
	case JobReserved:
		e.cancelReservation(j)
		e.forget(j)
	case JobHolding:
		j.state = JobStopping
		for _, a := range j.demand() {
			j.sh.claimed.add(a.t, a.n)
		}
	case JobStopping:
	}
	e.markDirty(env)
	return nil
}

// forget drops j from the engine. Its record is cleared at once when no
// lazy list names it, so callers read what they need from j first.
func (e *Engine) forget(j *job) {
	if p := e.planOf(j); p != nil {
		p.jobs--
	}
	j.state = 0
	e.jobs.remove(j)
}

// cancelReservation gives back what a reserved job holds; its victims, when
// released, give their capacity to nobody.
func (e *Engine) cancelReservation(j *job) {
	s := j.sh
	env := s.q.env
	if s.plans != nil {
		e.planHold(j, -1)
	}
	for i, a := range j.demand() {
		s.used.add(a.t, -j.got[i])
		env.used.add(a.t, -j.got[i]-j.kept[i])
		s.pending.add(a.t, -(a.n - j.got[i]))
	}
	j.got = j.got[:0]
	j.kept = j.kept[:0]
	j.waitFor = 0
	j.epoch++
	s.reserved--
	// It may sit in env.ready; startReady skips jobs no longer reserved.
	j.state = 0
	j.startWhy = ""
	j.borrowed = j.borrowed[:0]
}

// Release reports that the job's attempt has really stopped: its capacity is
// free. With requeue the job returns to RUNNABLE in its original place (after
// a preemption with retries left, or a retry after a failure); otherwise the
// engine forgets it. Releasing an unknown job fails with ENOTFOUND.
func (e *Engine) Release(id string, requeue bool) error {
	j := e.jobs.get(id)
	if j == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job %s does not exist", id)
	}
	e.release(j, requeue)
	return nil
}

// ReleaseMany releases the jobs in order, each as Release(id, requeue)
// would, with the same effect as those calls one after the other. It stops
// at the first job that cannot be released and returns how many it
// released and that job's error (ENOTFOUND for an unknown job).
//
// It is cheaper than one Release per job when many jobs stop at once (a
// caller that gathers the attempts that ended since its last pass): the
// engine reads the index entries and records of a group of jobs before
// releasing any of them, so that their cache misses overlap instead of
// coming one after the other.
func (e *Engine) ReleaseMany(ids []string, requeue bool) (int, error) {
	st := &e.jobs
	hashes := e.hashes[:0]
	for _, id := range ids {
		hashes = append(hashes, hashID(id))
	}
	e.hashes = hashes
	// A pipeline of groups: while group g is released, the records of
	// group g+1 are on their way (their index entries were asked for one
	// group earlier) and so are the index entries of group g+2.
	group := func(g int) []uint32 {
		return hashes[min(g*releaseGroup, len(hashes)):min((g+1)*releaseGroup, len(hashes))]
	}
	st.prefetchEntries(group(0))
	st.prefetchEntries(group(1))
	st.prefetchRecords(group(0))
	for g := 0; g*releaseGroup < len(ids); g++ {
		st.prefetchRecords(group(g + 1))
		st.prefetchEntries(group(g + 2))
		for k := g * releaseGroup; k < min((g+1)*releaseGroup, len(ids)); k++ {
			j, _ := st.lookupHash(ids[k], hashes[k])
			if j == nil {
				return k, qshare.Errorf(qshare.ENOTFOUND, "job %s does not exist", ids[k])
			}
			e.release(j, requeue)
		}
	}
	return len(ids), nil
}

// release is Release of a job the engine knows.
func (e *Engine) release(j *job, requeue bool) {
	s := j.sh
	env := s.q.env
	e.markDirty(env)
	switch j.state {
	case JobRunnable:
		if !requeue {
			s.rq(j).drop(j)
			e.stats.Runnable--
			e.forget(j)
		}
		return
	case JobReserved:
		e.cancelReservation(j)
	case JobHolding, JobStopping:
		e.unhold(j)
		r := j.reserver
		live := r != nil && r.state == JobReserved && r.epoch == j.resEpoch
		for _, a := range j.demand() {
			s.used.add(a.t, -a.n)
			env.used.add(a.t, -a.n)
			if j.state == JobStopping {
				s.claimed.add(a.t, -a.n)
			}
			if live {
				for i, ra := range r.demand() {
					if ra.t != a.t {
						continue
					}
					if give := min(a.n, ra.n-r.got[i]-r.kept[i]); give > 0 {
						r.kept[i] += give
						env.used.add(a.t, give)
					}
				}
			}
		}
		j.reserver = nil
		if live {
			r.settle()
			r.waitFor--
			if r.waitFor == 0 {
				r.refs++
				r.sh.q.env.ready = append(r.sh.q.env.ready, r)
				e.markDirty(r.sh.q.env)
			}
		}
	}
	if requeue {
		j.state = JobRunnable
		j.why = waitWhy{}
		j.reason = ""
		s.rq(j).push(j)
		e.stats.Runnable++
		if s.plans != nil {
			e.planParked(j)
		}
	} else {
		e.forget(j)
	}
}

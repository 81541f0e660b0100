package engine

// Reserved jobs: a job that preempted is reserved, collects the capacity
// its victims give back, and starts when the last of them is released
// (startReady) or earlier from capacity freed meanwhile (startEarly).

// startReady starts the reserved jobs whose victims have all been released.
func (e *Engine) startReady(env *environment, now int64) {
	ready := env.ready
	env.ready = e.readyBuf[:0]
	for _, j := range ready {
		if j.state != JobReserved || j.waitFor != 0 {
			continue
		}
		// Its victims are gone: what was kept for it joins its share even
		// if the share's limit was lowered meanwhile (a lowered limit does
		// not undo a decision; the share's jobs above it are reclaimable).
		complete := true
		for i, a := range j.demand() {
			if k := j.kept[i]; k > 0 {
				j.kept[i] = 0
				j.got[i] += k
				j.sh.used.add(a.t, k)
				j.sh.pending.add(a.t, -k)
			}
			if j.got[i] != a.n {
				complete = false
			}
		}
		s := j.sh
		s.reserved--
		if !complete {
			// Cannot happen while the victims' capacity goes to the job;
			// requeue it rather than start it short.
			for i, a := range j.demand() {
				s.used.add(a.t, -j.got[i])
				env.used.add(a.t, -j.got[i]-j.kept[i])
				s.pending.add(a.t, -(a.n - j.got[i]))
			}
			if s.plans != nil {
				e.planHold(j, -1)
			}
			j.state = JobRunnable
			j.got = j.got[:0]
			j.kept = j.kept[:0]
			s.rq(j).push(j)
			e.stats.Runnable++
			if s.plans != nil {
				e.planParked(j)
			}
			continue
		}
		j.got = j.got[:0]
		j.kept = j.kept[:0]
		e.hold(j, now)
		e.emitStart(j, j.borrowed, j.startWhy)
		j.startWhy = ""
		j.borrowed = j.borrowed[:0]
	}
	for _, j := range ready {
		e.jobs.unref(j)
	}
	clear(ready)
	e.readyBuf = ready[:0]
}

// startEarly starts reserved jobs that can take what they still wait for
// from capacity freed in the meantime, without waiting for victims that
// are still stopping; it keeps their share within its limit (its own, or
// its borrow cap) counting what the victims still hold. The victims'
// capacity then becomes free when they are released.
func (e *Engine) startEarly(env *environment, now int64) {
	k := 0
	for _, j := range env.resv {
		if j.state != JobReserved {
			e.jobs.unref(j)
			continue
		}
		if j.waitFor == 0 || !e.fitsNow(env, j) {
			env.resv[k] = j
			k++
			continue
		}
		s := j.sh
		for i, a := range j.demand() {
			if rest := a.n - j.got[i]; rest > 0 {
				s.used.add(a.t, rest)
				env.used.add(a.t, rest-j.kept[i])
				s.pending.add(a.t, -rest)
			}
		}
		j.got = j.got[:0]
		j.kept = j.kept[:0]
		j.waitFor = 0
		j.epoch++ // the victims' capacity now goes back to the pool
		s.reserved--
		e.hold(j, now)
		e.emitStart(j, j.borrowed, j.earlyWhy())
		j.startWhy, j.borrowed = "", j.borrowed[:0]
		e.jobs.unref(j)
	}
	clear(env.resv[k:])
	env.resv = env.resv[:k]
}

// fitsNow reports whether reserved job j can take what it still waits for
// from usable capacity now.
func (e *Engine) fitsNow(env *environment, j *job) bool {
	s := j.sh
	for i, a := range j.demand() {
		rest := a.n - j.got[i] // what its share must still take in
		p := rest - j.kept[i]  // of which from the free pool
		if rest == 0 {
			continue
		}
		// The same test as for a head of its share: within the limit, and
		// from capacity the share may use. For a RESERVE share that is
		// all: its idle capacity is counted on what it holds now, so the
		// capacity promised to j is still its own idle capacity, which
		// usable leaves to it, and its stopping jobs' capacity is not idle.
		// (An extra test, from when idle capacity was counted on future
		// usage, subtracted the share's own idle capacity, the promise
		// included, and left j waiting beside the room it was promised.)
		//
		// The limit is checked on committed usage: it holds j's rest and
		// what the share's other reserved jobs still wait for, which joins
		// the share when their victims are released whatever the share
		// holds then. Checking what the share holds now plus j's rest let
		// j start while an in-share victim still held its part, and the
		// other reserved job then took the share above its limit.
		if s.committed(a.t) > j.resLimit(a.t) || p > e.usable(env, s, a.t) {
			return false
		}
	}
	return true
}

// resLimit is the most the reserved job's share may hold of type t while
// the job waits: its own limit, or its borrow cap for a reservation that
// borrows.
func (j *job) resLimit(t int32) int64 {
	s := j.sh
	if j.resBorrow {
		if m, unl := s.maxUseAt(t); !unl {
			return m
		}
		return 1 << 62
	}
	return s.limit.at(t)
}

// settle moves capacity kept for a reserved job into its share as far as
// the share's limit allows.
func (j *job) settle() {
	s := j.sh
	for i, a := range j.demand() {
		if j.kept[i] == 0 {
			continue
		}
		mv := min(j.kept[i], max(0, j.resLimit(a.t)-s.used.at(a.t)))
		if mv > 0 {
			j.kept[i] -= mv
			j.got[i] += mv
			s.used.add(a.t, mv)
			s.pending.add(a.t, -mv)
		}
	}
}

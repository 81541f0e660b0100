package engine

import (
	"qshare"
)

// A pass over one environment repeats three phases until none of them
// changes anything:
//
//	A. Heads of every share, first come first served by the head's creation
//	   time: a head that fits its share's own limit starts if the capacity
//	   it may use is free (rule 2), or reserves capacity by preempting jobs
//	   of shares above their own limits (rule 5). A head that fits its own
//	   limit but can get neither holds back its demand from borrowers for
//	   the rest of the pass, so that a borrower never takes what a waiting
//	   lender needs (no preempt-after-borrow thrash).
//	B. Heads that must borrow, first come first served (rules 3 and 4).
//	C. Heads still waiting whose share has in-share preemption enabled:
//	   lower-priority jobs of the same share are preempted, together with
//	   jobs of over-quota shares if the head then fits its own limit
//	   (rule 6).
//
// Wait reasons are computed once at the end of the pass.

// usable is what share s may take of type t from the environment's free
// capacity now: free capacity less the idle capacity of other RESERVE shares,
// which nobody else may use.
//
// A RESERVE share's idle capacity is counted on what it holds now, its
// stopping jobs and its reserved jobs' partial holdings included. Counting it
// on its future usage instead goes wrong both ways: capacity the share waits
// to receive from another share's stopping victims would be lent out before
// it arrives (a borrower takes the share's idle capacity), and capacity its
// own stopping jobs will give back would be protected while they still hold
// it (a head that fits waits beside free room). When the shares own more than the
// environment has (oversubscription), the deficit is taken off what is
// protected: capacity owned twice on paper goes to whoever asks first.
func (e *Engine) usable(env *environment, s *share, t int32) int64 {
	u := env.limit.at(t) - env.used.at(t)
	return max(u-e.protected(env, s, t), 0)
}

// protected is the idle capacity of type t that RESERVE shares other than s
// keep for themselves, less the environment's oversubscription deficit.
func (e *Engine) protected(env *environment, s *share, t int32) int64 {
	var idle int64
	for _, r := range env.reserves {
		if r == s {
			continue
		}
		if i := r.limit.at(t) - r.used.at(t); i > 0 {
			idle += i
		}
	}
	if idle == 0 {
		return 0
	}
	if deficit := env.owned.at(t) - env.limit.at(t); deficit > 0 {
		idle -= deficit
	}
	return max(idle, 0)
}

// misconfigured reports whether h can never fit: its demand exceeds the
// environment's limit, or what its share may ever use (rule 10).
func (e *Engine) misconfigured(env *environment, s *share, h *job) (waitWhy, bool) {
	for _, a := range h.demand() {
		if a.n > env.limit.at(a.t) {
			return waitWhy{kind: whyEnvMax, t: a.t, a: a.n, b: env.limit.at(a.t)}, true
		}
	}
	for _, a := range h.demand() {
		if m, unl := s.maxUseAt(a.t); !unl && a.n > m {
			return waitWhy{kind: whyShareMax, t: a.t, a: a.n, b: m}, true
		}
	}
	return waitWhy{}, false
}

// ownFit reports whether h fits its share's own limit, counting what the
// share holds and what its reservations will receive, less removed.
func ownFit(s *share, h *job, removed vec) bool {
	for _, a := range h.demand() {
		if s.committed(a.t)-removed.at(a.t)+a.n > s.limit.at(a.t) {
			return false
		}
	}
	return true
}

// capFit reports whether h fits what s may ever use (own plus borrow cap).
func capFit(s *share, h *job, removed vec) bool {
	if s.strategy != qshare.StrategyLendAndBorrow {
		return false
	}
	for _, a := range h.demand() {
		if m, unl := s.maxUseAt(a.t); !unl && s.committed(a.t)-removed.at(a.t)+a.n > m {
			return false
		}
	}
	return true
}

func (e *Engine) freeFit(env *environment, s *share, h *job, blocked vec) bool {
	for _, a := range h.demand() {
		if a.n > e.usable(env, s, a.t)-blocked.at(a.t) {
			return false
		}
	}
	return true
}

func (e *Engine) resetVec(v *vec) vec {
	n := len(e.typeNames)
	if cap(*v) < n {
		*v = make(vec, n)
	}
	*v = (*v)[:n]
	(*v).clear()
	return *v
}

// pass schedules one environment until nothing changes.
func (e *Engine) pass(env *environment, now int64) {
	if len(env.shares) == 1 && env.shares[0].fair != nil {
		e.fairPass(env, env.shares[0], now)
		return
	}
	blocked := e.resetVec(&e.blocked)
	for {
		progress := false
		blocked.clear()

		// Phase A: own capacity and reclaim.
		work := &e.work
		work.reset(env.shares)
		for _, s := range env.shares {
			if s.top = s.head(); s.top != nil {
				work.push(s)
				// Load every head's record now (see startHead): the
				// misses overlap instead of coming one at a time.
				prefetchJob(s.top)
			}
		}
		failed := e.failed[:0]
		e.failedHead = e.failedHead[:0]
		for work.Len() > 0 {
			s := work.pop()
			h := s.top
			s.protHead = nil
			if _, bad := e.misconfigured(env, s, h); bad {
				continue
			}
			if ownFit(s, h, nil) && e.planOK(h) {
				if e.freeFit(env, s, h, nil) {
					// A start within the own limit adds no victims (its
					// share stays within its limit), and the share's next
					// head is evaluated in this phase. But it takes capacity,
					// so a head that already failed its reclaim in this
					// round may now lack a type it found usable before, and
					// that larger need makes the over-quota shares of that
					// type candidates too: its reclaim can now succeed. So a
					// start of a type some failed head needs (blocked holds
					// their demands) calls for another round; any other
					// start cannot change a failed head's outcome. The
					// reference model, which always rounds again, checks
					// this claim.
					for _, a := range h.demand() {
						if blocked.at(a.t) > 0 {
							progress = true
							break
						}
					}
					e.startHead(env, s, h, now)
					if s.top = s.head(); s.top != nil {
						work.push(s)
					}
					continue
				}
				if e.tryReclaim(env, s, h) {
					progress = true
					if s.top = s.head(); s.top != nil {
						work.push(s)
					}
					continue
				}
				for _, a := range h.demand() {
					blocked[a.t] += a.n
				}
			}
			failed = append(failed, s)
			e.failedHead = append(e.failedHead, h)
		}

		// Phase B: borrowing, first come first served.
		for i, s := range failed {
			// A plan's job never borrows: it runs on the plan's capacity.
			if h := e.failedHead[i]; !ownFit(s, h, nil) && capFit(s, h, nil) && e.planOf(h) == nil {
				s.top = h
				work.push(s)
			}
		}
		for work.Len() > 0 {
			s := work.pop()
			h := s.top
			if !e.freeFit(env, s, h, blocked) {
				continue
			}
			e.startHead(env, s, h, now)
			progress = true
			if n := s.head(); n != nil && !ownFit(s, n, nil) && capFit(s, n, nil) && e.planOf(n) == nil {
				s.top = n
				work.push(s)
			}
		}

		// Phase C: in-share preemption, first come first served, for heads
		// that failed phases A and B; a share whose head changed in phase B
		// waits for the next round.
		for i, s := range failed {
			if !s.cfg.InSharePreemption || s.head() != e.failedHead[i] || e.planOf(e.failedHead[i]) != nil {
				continue
			}
			if e.tryInShare(env, s, e.failedHead[i], blocked) {
				progress = true
			}
		}
		e.failed = failed[:0]
		if !progress {
			break
		}
	}
	// A reservation made in this pass can leave room for an earlier one (a
	// RESERVE share's promised capacity is no longer idle): try them again.
	e.startEarly(env, now)
	for _, s := range env.shares {
		h := s.head()
		if h == nil {
			continue
		}
		w := e.classify(env, s, h, blocked)
		if w != h.why {
			h.why = w
			h.reason = e.reasonText(env, s, h, w)
			e.out = append(e.out, Decision{Kind: DecisionWait, Job: h.id, Queue: s.q.name, Share: s.name, Reason: h.reason})
		}
	}
}

// startHead starts the head job h of s on free capacity.
func (e *Engine) startHead(env *environment, s *share, h *job, now int64) {
	borrowed := e.borrowBuf[:0]
	var why string
	for _, a := range h.demand() {
		c := s.committed(a.t)
		l := s.limit.at(a.t)
		if b := max(0, c+a.n-l) - max(0, c-l); b > 0 {
			borrowed = append(borrowed, amount{a.t, b})
		}
	}
	if len(borrowed) > 0 {
		why = e.borrowText(env, s, borrowed, nil)
	} else {
		why = s.ownWhy
	}
	s.runq.popHead()
	// The share's next head is read soon, and at a million pending jobs
	// its record is usually a cache miss: load it now, so that the miss
	// overlaps with the work of this start instead of stalling later.
	s.runq.prefetchHead()
	e.stats.Runnable--
	e.hold(h, now)
	e.emitStart(h, borrowed, why)
	e.borrowBuf = borrowed[:0]
}

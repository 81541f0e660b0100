package engine

// Preemption: choosing victims (cross-share reclaim of capacity above a
// share's own limit, and in-share by priority) on scratch usage, keeping
// only the victims needed, then reserving capacity for the head.
//
// A victim's share may protect its attempts for a minimum run time
// (ShareConfig.MinRunTime): a protected job is skipped as a candidate. When
// a head fails only because of that (with protected jobs counted as
// candidates it would succeed), it is noted: its wait reason names the
// protected candidate whose protection ends first, and the environment
// asks for a pass then (environment.wake, NextWake).

import (
	"strconv"
)

// selectReclaim chooses victims among jobs of shares other than s that are
// above their own limit of a type h still needs (need[t] > 0), lowest
// priority and most recently started first, then puts back every victim not
// needed. It appends the victims to e.chosen and reports whether they free
// enough. need is modified.
func (e *Engine) selectReclaim(env *environment, s *share, need vec) bool {
	e.chosen = e.chosen[:0]
	needs := false
	for _, n := range need {
		if n > 0 {
			needs = true
		}
	}
	if !needs {
		return true
	}
	// The candidates are the holding jobs of the shares above their own
	// limit of a needed type, merged in victim order from the shares'
	// sorted holding lists.
	over := e.overShares[:0]
	for _, o := range env.shares {
		if o == s {
			continue
		}
		for t, n := range need {
			if n > 0 && o.future(int32(t)) > o.limit.at(int32(t)) {
				o.cursor = 0
				over = append(over, o)
				break
			}
		}
	}
	e.simGen++
	gen := e.simGen
	ok := false
	for {
		var best *held
		for _, o := range over {
			for o.cursor < len(o.holding) && o.holding[o.cursor].j.state != JobHolding {
				o.cursor++
			}
			if o.cursor < len(o.holding) && (best == nil || o.holding[o.cursor].less(best)) {
				best = &o.holding[o.cursor]
			}
		}
		if best == nil {
			break
		}
		c := best.j
		o := c.sh
		o.cursor++
		if o.simGen != gen {
			o.simGen = gen
			o.sim = e.resetVec(&o.sim)
			for t := range o.sim {
				o.sim[t] = o.future(int32(t))
			}
		}
		eligible := false
		for _, a := range c.demand() {
			if need.at(a.t) > 0 && o.sim[a.t] > o.limit.at(a.t) {
				eligible = true
				c.vt, c.vuse, c.vlim = a.t, o.sim[a.t], o.limit.at(a.t)
				break
			}
		}
		if !eligible {
			continue
		}
		if o.minRun > 0 && !e.ignoreProt && c.protectedAt(e.now) {
			e.skipProtected(c, true)
			continue
		}
		e.chosen = append(e.chosen, c)
		for _, a := range c.demand() {
			o.sim[a.t] -= a.n
			need[a.t] -= a.n
		}
		ok = true
		for _, n := range need {
			if n > 0 {
				ok = false
				break
			}
		}
		if ok {
			break
		}
	}
	e.overShares = over[:0]
	if !ok {
		e.chosen = e.chosen[:0]
		return false
	}
	// Fill-back: keep every victim whose capacity is not needed.
	for i := len(e.chosen) - 1; i >= 0; i-- {
		c := e.chosen[i]
		spare := true
		for _, a := range c.demand() {
			if need[a.t]+a.n > 0 {
				spare = false
				break
			}
		}
		if spare {
			for _, a := range c.demand() {
				need[a.t] += a.n
			}
			e.chosen = append(e.chosen[:i], e.chosen[i+1:]...)
		}
	}
	return true
}

// tryReclaim handles a head that fits its share's own limit but lacks free
// capacity: it preempts jobs of over-quota shares (rule 5) and reserves the
// head, or changes nothing.
func (e *Engine) tryReclaim(env *environment, s *share, h *job) bool {
	e.protJob = nil
	if e.reclaimFor(env, s, h) {
		e.reserve(env, s, h, nil, e.chosen, false)
		return true
	}
	if e.protJob != nil {
		// Protected candidates were skipped: does the reclaim fail only
		// because of them?
		e.ignoreProt = true
		ok := e.reclaimFor(env, s, h)
		e.ignoreProt = false
		e.chosen = e.chosen[:0]
		if ok {
			e.noteProtected(env, s, h)
		}
	}
	return false
}

// reclaimFor chooses the cross-share victims that would give h what usable
// capacity lacks, into e.chosen; it reports whether there is such a set, and
// a non-empty one.
func (e *Engine) reclaimFor(env *environment, s *share, h *job) bool {
	need := e.resetVec(&e.need)
	for _, a := range h.demand() {
		need[a.t] = a.n - e.usable(env, s, a.t)
	}
	return e.selectReclaim(env, s, need) && len(e.chosen) > 0
}

// skipProtected records protected candidate c, skipped by victim selection,
// if its protection ends before that of the one recorded. Candidates come
// in victim order, so of those whose protections end together the one
// recorded is the one that would be chosen first. cross says it is of
// another share than the head's.
func (e *Engine) skipProtected(c *job, cross bool) {
	end := c.started + c.sh.minRun
	if e.protJob == nil || end < e.protEnd {
		e.protJob, e.protEnd, e.protCross = c, end, cross
	}
}

// noteProtected records that head h of s waits only because the victims it
// needs are protected: the reason names e.protJob, and the environment
// needs a pass when its protection ends (a pass at that instant may preempt
// it: protection lasts while now < started + minimum run time).
func (e *Engine) noteProtected(env *environment, s *share, h *job) {
	s.protHead, s.protBy, s.protEnd, s.protCross = h, e.protJob, e.protEnd, e.protCross
	if env.wake == 0 || e.protEnd < env.wake {
		env.wake = e.protEnd
	}
	if !env.inWake {
		env.inWake = true
		e.wakeEnvs = append(e.wakeEnvs, env)
	}
}

// fitAfter reports whether h fits once the jobs of its own share summed in
// removed have stopped. It leaves the cross-share victims it needs in
// e.chosen. mode is 1 for own capacity, 2 for own capacity with reclaim,
// 3 for borrowing.
func (e *Engine) fitAfter(env *environment, s *share, h *job, removed, blocked vec) (mode int) {
	if ownFit(s, h, removed) {
		need := e.resetVec(&e.need)
		short := false
		for _, a := range h.demand() {
			need[a.t] = a.n - e.usable(env, s, a.t) - removed.at(a.t)
			if need[a.t] > 0 {
				short = true
			}
		}
		if !short {
			e.chosen = e.chosen[:0]
			return 1
		}
		if e.selectReclaim(env, s, need) {
			return 2
		}
		return 0
	}
	if capFit(s, h, removed) {
		for _, a := range h.demand() {
			if a.n > max(0, e.usable(env, s, a.t)-blocked.at(a.t))+removed.at(a.t) {
				return 0
			}
		}
		e.chosen = e.chosen[:0]
		return 3
	}
	return 0
}

// tryInShare preempts strictly lower-priority jobs of the head's own share,
// lowest priority and most recently started first, if the head then fits
// (rule 6); a minimal set is kept by putting back every victim not needed.
func (e *Engine) tryInShare(env *environment, s *share, h *job, blocked vec) bool {
	// The holding list is in victim order; the candidates are its prefix of
	// lower priority. Fit only gets easier as more jobs are removed, so if
	// removing them all is not enough, no subset is.
	e.protJob = nil
	if !e.inShareAll(env, s, h, blocked) {
		if e.protJob != nil {
			// Protected candidates were skipped, in the share or in the
			// reclaim: would they make room?
			e.ignoreProt = true
			ok := e.inShareAll(env, s, h, blocked)
			e.ignoreProt = false
			e.chosen = e.chosen[:0]
			if ok {
				e.noteProtected(env, s, h)
			}
		}
		return false
	}
	removed := e.removed
	removed.clear()
	in := e.inChosen[:0]
	ok := false
	for k := range s.holding {
		if int(s.holding[k].prio) >= h.prio {
			break
		}
		c := s.holding[k].j
		if c.state != JobHolding || (s.minRun > 0 && c.protectedAt(e.now)) {
			continue
		}
		in = append(in, c)
		for _, a := range c.demand() {
			removed[a.t] += a.n
		}
		if e.fitAfter(env, s, h, removed, blocked) != 0 {
			ok = true
			break
		}
	}
	if !ok {
		e.inChosen = in[:0]
		return false
	}
	for i := len(in) - 1; i >= 0; i-- {
		c := in[i]
		for _, a := range c.demand() {
			removed[a.t] -= a.n
		}
		if e.fitAfter(env, s, h, removed, blocked) != 0 {
			in = append(in[:i], in[i+1:]...)
			continue
		}
		for _, a := range c.demand() {
			removed[a.t] += a.n
		}
	}
	mode := e.fitAfter(env, s, h, removed, blocked)
	e.inChosen = in
	if mode == 0 { // cannot happen: the set fitted before fill-back ended
		return false
	}
	e.reserve(env, s, h, in, e.chosen, mode == 3)
	e.inChosen = in[:0]
	return true
}

// inShareAll reports whether h fits once every candidate of in-share
// preemption has stopped (protected ones left out unless e.ignoreProt),
// with a reclaim from other shares if needed; skipped protected candidates
// are recorded (skipProtected).
func (e *Engine) inShareAll(env *environment, s *share, h *job, blocked vec) bool {
	removed := e.resetVec(&e.removed)
	any := false
	for k := range s.holding {
		if int(s.holding[k].prio) >= h.prio {
			break
		}
		if j := s.holding[k].j; j.state == JobHolding {
			if s.minRun > 0 && !e.ignoreProt && j.protectedAt(e.now) {
				e.skipProtected(j, false)
				continue
			}
			any = true
			for _, a := range j.demand() {
				removed[a.t] += a.n
			}
		}
	}
	return any && e.fitAfter(env, s, h, removed, blocked) != 0
}

// reserve preempts the victims for h and reserves h: h leaves its share's
// queue, takes at once the part of its demand its victims do not hold (the
// fit computed by the caller guarantees that much is free to it), and
// receives the rest from its victims as they are released.
func (e *Engine) reserve(env *environment, s *share, h *job, inShare, cross []*job, borrow bool) {
	removed := e.removed
	if len(inShare) == 0 {
		removed = nil
	}
	if h.resState == nil {
		h.resState = &resState{}
	}
	// What it will borrow, once its in-share victims are gone.
	borrowed := h.borrowed[:0]
	for _, a := range h.demand() {
		c := s.committed(a.t) - removed.at(a.t)
		l := s.limit.at(a.t)
		if b := max(0, c+a.n-l) - max(0, c-l); b > 0 {
			borrowed = append(borrowed, amount{a.t, b})
		}
	}
	// The two start texts share the victims' names and the borrow text:
	// build "<names><tail>" once in the scratch buffer, then each text.
	b := e.text[:0]
	if len(inShare)+len(cross) > 1 {
		b = append(b, 's')
	}
	sep := " "
	for _, v := range inShare {
		b = append(b, sep...)
		b = append(b, v.id...)
		sep = ", "
	}
	for _, v := range cross {
		b = append(b, sep...)
		b = append(b, v.id...)
		sep = ", "
	}
	nameEnd := len(b)
	if len(borrowed) > 0 {
		b = append(b, "; "...)
		b = e.appendBorrowText(b, env, s, borrowed, removed)
	}
	e.text = b
	h.startWhy = joinText(startedReleased, b, "", nil)
	h.whyNames = len(startedReleased) + nameEnd
	h.borrowed = borrowed

	if n := len(h.demand()); cap(h.got) < n {
		buf := make([]int64, 2*n)
		h.got, h.kept = buf[:n:n], buf[n:]
	}
	h.got = h.got[:len(h.demand())]
	h.kept = h.kept[:len(h.demand())]
	clear(h.kept)
	h.resBorrow = borrow
	// It takes at once only what its victims will not give back, so that
	// its share stays within its limits while the victims still hold.
	for i, a := range h.demand() {
		supply := int64(0)
		for _, v := range inShare {
			supply += v.demandOf(a.t)
		}
		for _, v := range cross {
			supply += v.demandOf(a.t)
		}
		g := max(0, a.n-supply)
		h.got[i] = g
		s.used.add(a.t, g)
		env.used.add(a.t, g)
		s.pending.add(a.t, a.n-g)
	}
	s.runq.popHead()
	e.stats.Runnable--
	h.refs++
	env.resv = append(env.resv, h)
	h.state = JobReserved
	if s.plans != nil {
		e.planHold(h, +1)
	}
	h.epoch++
	h.waitFor = len(inShare) + len(cross)
	h.why = waitWhy{}
	h.reason = ""
	s.reserved++
	if len(inShare) > 0 {
		b := append(e.text[:0], "in-share preemption by job "...)
		b = append(b, h.id...)
		b = append(b, " of priority "...)
		b = strconv.AppendInt(b, int64(h.prio), 10)
		e.text = b
		why := string(b)
		for _, v := range inShare {
			e.preempt(v, h, false, why)
		}
	}
	for _, v := range cross {
		b := append(e.text[:0], "preempted by cross-share preemption to return capacity to share "...)
		b = e.appendRelName(b, v.sh, s)
		b = append(b, " for job "...)
		b = append(b, h.id...)
		b = append(b, " (share "...)
		b = append(b, v.sh.name...)
		b = append(b, " uses "...)
		b = strconv.AppendInt(b, v.vuse, 10)
		b = append(b, ' ')
		b = append(b, e.typeNames[v.vt]...)
		b = append(b, ", above its own limit of "...)
		b = strconv.AppendInt(b, v.vlim, 10)
		b = append(b, ')')
		e.text = b
		e.preempt(v, h, true, string(b))
	}
}

func (e *Engine) preempt(v, h *job, cross bool, why string) {
	v.state = JobStopping
	for _, a := range v.demand() {
		v.sh.claimed.add(a.t, a.n)
	}
	v.reserver = h
	v.resEpoch = h.epoch
	v.preemptions++
	final := v.retries >= 0 && v.preemptions > v.retries
	if final {
		b := append(e.text[:0], why...)
		b = append(b, "; preempted "...)
		b = strconv.AppendInt(b, int64(v.preemptions), 10)
		b = append(b, " time(s), more than its "...)
		b = strconv.AppendInt(b, int64(v.retries), 10)
		b = append(b, " preemption retries: the job fails"...)
		e.text = b
		why = string(b)
	}
	e.out = append(e.out, Decision{Kind: DecisionPreempt, Job: v.id, Queue: v.sh.q.name, Share: v.sh.name, For: h.id, CrossShare: cross, Final: final, Reason: why})
	e.stats.Preempts++
}

func (j *job) demandOf(t int32) int64 {
	for _, a := range j.demand() {
		if a.t == t {
			return a.n
		}
	}
	return 0
}

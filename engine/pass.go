package engine

import (
	"strconv"
	"strings"

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
			if _, bad := e.misconfigured(env, s, h); bad {
				continue
			}
			if ownFit(s, h, nil) {
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
			if h := e.failedHead[i]; !ownFit(s, h, nil) && capFit(s, h, nil) {
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
			if n := s.head(); n != nil && !ownFit(s, n, nil) && capFit(s, n, nil) {
				s.top = n
				work.push(s)
			}
		}

		// Phase C: in-share preemption, first come first served, for heads
		// that failed phases A and B; a share whose head changed in phase B
		// waits for the next round.
		for i, s := range failed {
			if !s.cfg.InSharePreemption || s.head() != e.failedHead[i] {
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

// borrowText names the lenders of a new borrowing: capacity no share owns
// first, then the idle capacity of lending shares in name order, after what
// the shares of the environment already borrow.
func (e *Engine) borrowText(env *environment, s *share, borrowed []amount, removed vec) string {
	e.text = e.appendBorrowText(e.text[:0], env, s, borrowed, removed)
	return string(e.text)
}

// lender is one source of a borrowing, as borrowText names it: a share (its
// name as seen from the borrower) or capacity no share owns, and how much.
type lender struct {
	s    *share // nil: name is the source
	name string
	n    int64
}

// appendBorrowText appends borrowText's text to dst. It formats with
// strconv into reused buffers, so that the text costs one string.
func (e *Engine) appendBorrowText(dst []byte, env *environment, s *share, borrowed []amount, removed vec) []byte {
	for i, b := range borrowed {
		if i > 0 {
			dst = append(dst, "; "...)
		}
		t := b.t
		var owned, already int64
		for _, o := range env.shares {
			owned += o.limit.at(t)
			c := o.committed(t)
			if o == s {
				c -= removed.at(t)
			}
			if over := c - o.limit.at(t); over > 0 {
				already += over
			}
		}
		srcs := e.srcs[:0]
		rest := b.n
		take := func(o *share, name string, supply int64) {
			if rest <= 0 || supply <= 0 {
				return
			}
			skip := min(already, supply)
			already -= skip
			if n := min(supply-skip, rest); n > 0 {
				srcs = append(srcs, lender{o, name, n})
				rest -= n
			}
		}
		take(nil, "capacity no share owns", env.limit.at(t)-owned)
		for _, o := range env.shares {
			if o != s && o.strategy.Lends() {
				take(o, "", o.limit.at(t)-o.committed(t))
			}
		}
		if rest > 0 {
			srcs = append(srcs, lender{nil, "the environment's free capacity", rest})
		}
		e.srcs = srcs[:0]
		tn := e.typeNames[t]
		dst = append(dst, "borrowed "...)
		dst = strconv.AppendInt(dst, b.n, 10)
		dst = append(dst, ' ')
		dst = append(dst, tn...)
		if len(srcs) == 1 {
			dst = append(dst, " from "...)
			dst = e.appendLender(dst, s, srcs[0])
			continue
		}
		dst = append(dst, " ("...)
		for k, x := range srcs {
			if k > 0 {
				dst = append(dst, ", "...)
			}
			dst = strconv.AppendInt(dst, x.n, 10)
			dst = append(dst, " from "...)
			dst = e.appendLender(dst, s, x)
		}
		dst = append(dst, ')')
	}
	return dst
}

func (e *Engine) appendLender(dst []byte, s *share, x lender) []byte {
	if x.s == nil {
		return append(dst, x.name...)
	}
	return e.appendRelName(dst, s, x.s)
}

// The reasons of a reserved job's start: when its victims have stopped,
// and when it starts before they have.
const (
	startedReleased = "started on capacity released by preempted job"
	startedFreed    = "started on capacity freed while its preempted job"
)

// earlyWhy is the reason of the start of reserved job j before its victims
// have stopped: startWhy with the other opening and " stopped" after the
// victims' names.
func (j *job) earlyWhy() string {
	w := j.startWhy
	return startedFreed + w[len(startedReleased):j.whyNames] + " stopped" + w[j.whyNames:]
}

// joinText returns a+b+c+d as one allocation.
func joinText(a string, b []byte, c string, d []byte) string {
	var sb strings.Builder
	sb.Grow(len(a) + len(b) + len(c) + len(d))
	sb.WriteString(a)
	sb.Write(b)
	sb.WriteString(c)
	sb.Write(d)
	return sb.String()
}

// relName names share o as seen from share s: its name, prefixed with its
// queue when the two are in different queues.
func (e *Engine) relName(s, o *share) string {
	if s == nil || s.q == o.q {
		return o.name
	}
	return o.q.name + "/" + o.name
}

// appendRelName appends relName(s, o) to dst.
func (e *Engine) appendRelName(dst []byte, s, o *share) []byte {
	if s != nil && s.q != o.q {
		dst = append(dst, o.q.name...)
		dst = append(dst, '/')
	}
	return append(dst, o.name...)
}

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
	need := e.resetVec(&e.need)
	for _, a := range h.demand() {
		need[a.t] = a.n - e.usable(env, s, a.t)
	}
	if !e.selectReclaim(env, s, need) || len(e.chosen) == 0 {
		return false
	}
	e.reserve(env, s, h, nil, e.chosen, false)
	return true
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
	removed := e.resetVec(&e.removed)
	any := false
	for k := range s.holding {
		if int(s.holding[k].prio) >= h.prio {
			break
		}
		if j := s.holding[k].j; j.state == JobHolding {
			any = true
			for _, a := range j.demand() {
				removed[a.t] += a.n
			}
		}
	}
	if !any || e.fitAfter(env, s, h, removed, blocked) == 0 {
		return false
	}
	removed.clear()
	in := e.inChosen[:0]
	ok := false
	for k := range s.holding {
		if int(s.holding[k].prio) >= h.prio {
			break
		}
		c := s.holding[k].j
		if c.state != JobHolding {
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

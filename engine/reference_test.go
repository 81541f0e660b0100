package engine

import (
	"sort"
)

// refModel is the reference scheduler of the property test: the rules of
// issue 2 written as plainly as possible. It keeps no incremental
// accounting: every quantity is recomputed from the job list whenever it is
// needed, heads are found by sorting, and every phase rescans all shares.
// One environment, one queue, types are 0..T-1.
type refModel struct {
	T      int
	env    []int64
	shares []*refShare
	jobs   map[string]*refJob
	seq    uint64
	out    []Decision
	ready  []string // reserved jobs whose last victim was released, in order
	// resOrder lists reserved jobs in the order they were reserved.
	resOrder []string
	// now is the time of the pass in progress.
	now int64
	// plans are the capacity plans; cancelled lists the plan jobs whose
	// reservation a plan's close cancelled in the last pass, closed the
	// types whose capacity a close took away, and closedShares the shares
	// whose plan closed.
	plans        []*refPlan
	cancelled    []string
	closed       map[int]bool
	closedShares map[int]bool
}

// refPlan is a capacity plan: n of type t for share s while
// start <= now < close (its end less its warning).
type refPlan struct {
	name              string
	s, t              int
	n                 int64
	start, close, end int64
	open              bool
}

// lim is share s's own limit of type t: its configured limit (limit) plus
// its open plans.
func (m *refModel) lim(s, t int) int64 {
	n := m.shares[s].limit[t]
	for _, p := range m.plans {
		if p.open && p.s == s && p.t == t {
			n += p.n
		}
	}
	return n
}

// envLim is the environment's limit of type t: env plus the open plans.
func (m *refModel) envLim(t int) int64 {
	n := m.env[t]
	for _, p := range m.plans {
		if p.open && p.t == t {
			n += p.n
		}
	}
	return n
}

// planOK reports whether h may start as far as its plan goes: it names
// none, or its plan is open and its jobs that hold or are reserved leave
// room for it.
func (m *refModel) planOK(h *refJob) bool {
	if h.plan < 0 {
		return true
	}
	p := m.plans[h.plan]
	if !p.open {
		return false
	}
	n := h.dem[p.t]
	for _, j := range m.jobs {
		if j.plan == h.plan && (j.state == JobHolding || j.state == JobStopping || j.state == JobReserved) {
			n += j.dem[p.t]
		}
	}
	return n <= p.n
}

// applyPlans opens the plans whose start now has reached and closes those
// whose close it has: a closed plan's reserved jobs wait again, and its
// holding jobs, then its share's holding jobs of the type while the
// environment and the share are above their limits (counting stopping
// jobs as gone), in victim order, are preempted to stop by its end.
func (m *refModel) applyPlans(now int64) {
	m.cancelled = nil
	m.closed = map[int]bool{}
	m.closedShares = map[int]bool{}
	for _, p := range m.plans {
		want := now >= p.start && now < p.close
		if want && !p.open {
			p.open = true
			continue
		}
		if want || !p.open {
			continue
		}
		{
			for _, id := range m.resOrder {
				if j := m.jobs[id]; j != nil && j.state == JobReserved && j.plan >= 0 && m.plans[j.plan] == p {
					m.cancel(j)
					m.cancelled = append(m.cancelled, id)
				}
			}
		}
		p.open = false
		var hold []*refJob
		for _, j := range m.jobs {
			if j.sh == p.s && j.state == JobHolding {
				hold = append(hold, j)
			}
		}
		sort.Slice(hold, func(a, b int) bool { return refVictimLess(hold[a], hold[b]) })
		stop := func(j *refJob) {
			j.state = JobStopping
			j.reserver = ""
			j.planStopped = true
			m.closed[p.t] = true
			m.out = append(m.out, Decision{Kind: DecisionPreempt, Job: j.id, Share: m.shares[j.sh].name, CrossShare: true, StopBy: timeOf(p.end)})
		}
		for _, j := range hold {
			if j.plan >= 0 && m.plans[j.plan] == p {
				stop(j)
			}
		}
		envOver := func() bool {
			var stopping int64
			for _, o := range m.jobs {
				if o.state == JobStopping {
					stopping += o.dem[p.t]
				}
			}
			return m.envUsed(p.t)-stopping > m.envLim(p.t)
		}
		order := []int{p.s}
		for s := range m.shares {
			if s != p.s {
				order = append(order, s)
			}
		}
		for _, s := range order {
			var cands []*refJob
			for _, j := range m.jobs {
				if j.sh == s && (j.state == JobHolding || j.state == JobStopping) {
					cands = append(cands, j)
				}
			}
			sort.Slice(cands, func(a, b int) bool { return refVictimLess(cands[a], cands[b]) })
			for _, j := range cands {
				if !envOver() || m.future(s, p.t) <= m.lim(s, p.t) {
					break
				}
				if j.state == JobHolding && j.dem[p.t] > 0 {
					stop(j)
				}
			}
		}
		m.closed[p.t] = true
		m.closedShares[p.s] = true
	}
}

type refShare struct {
	name     string
	limit    []int64
	strategy string // "RESERVE", "LEND", "LEND_AND_BORROW"
	borrow   int64
	inShare  bool
	// minRun is the minimum run time in nanoseconds: a job of the share
	// that started less than minRun before the pass is never a victim.
	minRun int64
}

// shielded reports whether j may not be a victim in the pass at m.now: it
// has run less than its share's minimum run time.
func (m *refModel) shielded(j *refJob) bool {
	return m.now-j.started < m.shares[j.sh].minRun
}

type refJob struct {
	id          string
	sh          int
	prio        int
	created     int64
	dem         []int64
	state       JobState
	preemptions int
	retries     int
	started     int64
	startSeq    uint64
	got         []int64
	kept        []int64 // reserved: given back by victims, not yet in the share
	resBorrow   bool
	victims     map[string]bool // reserved: victims not yet released
	// plan is the index of the job's capacity plan, or -1; planStopped
	// says it was stopped because a plan ended (the caller requeues it).
	plan        int
	planStopped bool
	reserver    string // victim: the job it was preempted for
	borrowed    []int64
}

func (m *refModel) maxUse(s int, t int) (int64, bool) {
	sh := m.shares[s]
	switch sh.strategy {
	case "LEND_AND_BORROW":
		if sh.borrow == -1 {
			return 0, true
		}
		l := m.lim(s, t)
		return l + l*sh.borrow/100, false
	}
	return m.lim(s, t), false
}

// used is what share s holds of type t now: holding and stopping jobs, and
// what reserved jobs already got.
func (m *refModel) used(s, t int) int64 {
	var n int64
	for _, j := range m.jobs {
		if j.sh != s {
			continue
		}
		switch j.state {
		case JobHolding, JobStopping:
			n += j.dem[t]
		case JobReserved:
			n += j.got[t]
		}
	}
	return n
}

// committed adds what reserved jobs still wait for.
func (m *refModel) committed(s, t int) int64 {
	n := m.used(s, t)
	for _, j := range m.jobs {
		if j.sh == s && j.state == JobReserved {
			n += j.dem[t] - j.got[t]
		}
	}
	return n
}

// future leaves out stopping jobs.
func (m *refModel) future(s, t int) int64 {
	n := m.committed(s, t)
	for _, j := range m.jobs {
		if j.sh == s && j.state == JobStopping {
			n -= j.dem[t]
		}
	}
	return n
}

// footprint is what share s takes of the environment: what it holds and
// what is kept for its reserved jobs.
func (m *refModel) footprint(s, t int) int64 {
	n := m.used(s, t)
	for _, j := range m.jobs {
		if j.sh == s && j.state == JobReserved {
			n += j.kept[t]
		}
	}
	return n
}

// stoppingHeld is what share s's stopping jobs hold of type t.
func (m *refModel) stoppingHeld(s, t int) int64 {
	var n int64
	for _, j := range m.jobs {
		if j.sh == s && j.state == JobStopping {
			n += j.dem[t]
		}
	}
	return n
}

func (m *refModel) envUsed(t int) int64 {
	var n int64
	for s := range m.shares {
		n += m.used(s, t)
	}
	for _, j := range m.jobs {
		if j.state == JobReserved {
			n += j.kept[t]
		}
	}
	return n
}

func (m *refModel) resLimit(j *refJob, t int) int64 {
	if j.resBorrow {
		if mx, unl := m.maxUse(j.sh, t); !unl {
			return mx
		}
		return 1 << 62
	}
	return m.lim(j.sh, t)
}

// reserveIdle is the idle capacity of RESERVE shares other than except,
// counted on what they hold now.
func (m *refModel) reserveIdle(t int, except int) int64 {
	var n int64
	for s, sh := range m.shares {
		if s != except && sh.strategy == "RESERVE" {
			if idle := m.lim(s, t) - m.used(s, t); idle > 0 {
				n += idle
			}
		}
	}
	return n
}

// protected is reserveIdle less the oversubscription deficit.
func (m *refModel) protected(t int, except int) int64 {
	var owned int64
	for s := range m.shares {
		owned += m.lim(s, t)
	}
	return max(0, m.reserveIdle(t, except)-max(0, owned-m.envLim(t)))
}

func (m *refModel) usable(s, t int) int64 {
	return max(0, m.envLim(t)-m.envUsed(t)-m.protected(t, s))
}

func (m *refModel) head(s int) *refJob {
	var best *refJob
	for _, j := range m.jobs {
		if j.sh != s || j.state != JobRunnable || (j.plan >= 0 && !m.plans[j.plan].open) {
			continue
		}
		if best == nil || j.prio > best.prio || (j.prio == best.prio && (j.created < best.created || (j.created == best.created && j.id < best.id))) {
			best = j
		}
	}
	return best
}

func refFIFO(a, b *refJob) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

func (m *refModel) misconfigured(s int, h *refJob) bool {
	for t := 0; t < m.T; t++ {
		if h.dem[t] > m.envLim(t) {
			return true
		}
		if mx, unl := m.maxUse(s, t); h.dem[t] > 0 && !unl && h.dem[t] > mx {
			return true
		}
	}
	return false
}

func (m *refModel) ownFit(s int, h *refJob, removed []int64) bool {
	for t := 0; t < m.T; t++ {
		if h.dem[t] > 0 && m.committed(s, t)-removed[t]+h.dem[t] > m.lim(s, t) {
			return false
		}
	}
	return true
}

func (m *refModel) capFit(s int, h *refJob, removed []int64) bool {
	if m.shares[s].strategy != "LEND_AND_BORROW" {
		return false
	}
	for t := 0; t < m.T; t++ {
		if mx, unl := m.maxUse(s, t); h.dem[t] > 0 && !unl && m.committed(s, t)-removed[t]+h.dem[t] > mx {
			return false
		}
	}
	return true
}

func (m *refModel) freeFit(s int, h *refJob, blocked []int64) bool {
	for t := 0; t < m.T; t++ {
		if h.dem[t] > 0 && h.dem[t] > m.usable(s, t)-blocked[t] {
			return false
		}
	}
	return true
}

func refVictimLess(a, b *refJob) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.started != b.started {
		return a.started > b.started
	}
	if a.startSeq != b.startSeq {
		return a.startSeq > b.startSeq
	}
	return a.id < b.id
}

// reclaim picks victims in shares other than s for need, or nil, false.
func (m *refModel) reclaim(s int, need []int64) ([]*refJob, bool) {
	short := func() bool {
		for _, n := range need {
			if n > 0 {
				return true
			}
		}
		return false
	}
	if !short() {
		return nil, true
	}
	var cands []*refJob
	for _, j := range m.jobs {
		if j.sh == s || j.state != JobHolding || m.shielded(j) {
			continue
		}
		over := false
		for t := 0; t < m.T; t++ {
			if need[t] > 0 && m.future(j.sh, t) > m.lim(j.sh, t) {
				over = true
			}
		}
		if over {
			cands = append(cands, j)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return refVictimLess(cands[a], cands[b]) })
	sim := map[int][]int64{}
	var chosen []*refJob
	for _, c := range cands {
		if sim[c.sh] == nil {
			sim[c.sh] = make([]int64, m.T)
			for t := range sim[c.sh] {
				sim[c.sh][t] = m.future(c.sh, t)
			}
		}
		eligible := false
		for t := 0; t < m.T; t++ {
			if c.dem[t] > 0 && need[t] > 0 && sim[c.sh][t] > m.lim(c.sh, t) {
				eligible = true
			}
		}
		if !eligible {
			continue
		}
		chosen = append(chosen, c)
		for t := 0; t < m.T; t++ {
			sim[c.sh][t] -= c.dem[t]
			need[t] -= c.dem[t]
		}
		if !short() {
			break
		}
	}
	if short() {
		return nil, false
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		spare := true
		for t := 0; t < m.T; t++ {
			if chosen[i].dem[t] > 0 && need[t]+chosen[i].dem[t] > 0 {
				spare = false
			}
		}
		if spare {
			for t := 0; t < m.T; t++ {
				need[t] += chosen[i].dem[t]
			}
			chosen = append(chosen[:i], chosen[i+1:]...)
		}
	}
	return chosen, true
}

// fitAfter mirrors the engine's: 0 no fit, 1 own, 2 own with reclaim, 3 borrow.
func (m *refModel) fitAfter(s int, h *refJob, removed, blocked []int64) (int, []*refJob) {
	if m.ownFit(s, h, removed) {
		need := make([]int64, m.T)
		short := false
		for t := 0; t < m.T; t++ {
			if h.dem[t] > 0 {
				need[t] = h.dem[t] - m.usable(s, t) - removed[t]
				if need[t] > 0 {
					short = true
				}
			}
		}
		if !short {
			return 1, nil
		}
		if v, ok := m.reclaim(s, need); ok {
			return 2, v
		}
		return 0, nil
	}
	if m.capFit(s, h, removed) {
		for t := 0; t < m.T; t++ {
			if h.dem[t] > 0 && h.dem[t] > max(0, m.usable(s, t)-blocked[t])+removed[t] {
				return 0, nil
			}
		}
		return 3, nil
	}
	return 0, nil
}

func (m *refModel) start(s int, h *refJob, now int64) {
	var b qshareCap
	for t := 0; t < m.T; t++ {
		c, l := m.committed(s, t), m.lim(s, t)
		if x := max(0, c+h.dem[t]-l) - max(0, c-l); x > 0 {
			b.add(t, x)
		}
	}
	m.hold(h, now)
	m.out = append(m.out, Decision{Kind: DecisionStart, Job: h.id, Share: m.shares[s].name, Borrowed: b.capacity()})
}

// startReserved starts a reserved job, which borrows what its reservation
// worked out.
func (m *refModel) startReserved(j *refJob, now int64) {
	m.hold(j, now)
	var b qshareCap
	for t, x := range j.borrowed {
		if x > 0 {
			b.add(t, x)
		}
	}
	m.out = append(m.out, Decision{Kind: DecisionStart, Job: j.id, Share: m.shares[j.sh].name, Borrowed: b.capacity()})
}

func (m *refModel) hold(h *refJob, now int64) {
	h.state = JobHolding
	h.started = now
	m.seq++
	h.startSeq = m.seq
	h.got = nil
	h.kept = nil
	h.victims = nil
}

func (m *refModel) reserve(s int, h *refJob, inShare, cross []*refJob, removed []int64, borrow bool) {
	h.resBorrow = borrow
	h.borrowed = make([]int64, m.T)
	for t := 0; t < m.T; t++ {
		c, l := m.committed(s, t)-removed[t], m.lim(s, t)
		h.borrowed[t] = max(0, c+h.dem[t]-l) - max(0, c-l)
	}
	got := make([]int64, m.T)
	for t := 0; t < m.T; t++ {
		var supply int64
		for _, v := range append(append([]*refJob{}, inShare...), cross...) {
			supply += v.dem[t]
		}
		got[t] = max(0, h.dem[t]-supply)
	}
	h.got = got
	h.kept = make([]int64, m.T)
	h.state = JobReserved
	m.resOrder = append(m.resOrder, h.id)
	h.victims = map[string]bool{}
	for _, v := range inShare {
		m.preempt(v, h, false)
	}
	for _, v := range cross {
		m.preempt(v, h, true)
	}
}

func (m *refModel) preempt(v, h *refJob, cross bool) {
	v.state = JobStopping
	v.reserver = h.id
	h.victims[v.id] = true
	v.preemptions++
	final := v.retries >= 0 && v.preemptions > v.retries
	m.out = append(m.out, Decision{Kind: DecisionPreempt, Job: v.id, Share: m.shares[v.sh].name, For: h.id, CrossShare: cross, Final: final})
}

// release: the victim's capacity goes to its reserver, up to what it lacks.
func (m *refModel) release(id string, requeue bool) {
	j := m.jobs[id]
	if j == nil {
		return
	}
	switch j.state {
	case JobHolding, JobStopping:
		if r := m.jobs[j.reserver]; j.reserver != "" && r != nil && r.state == JobReserved && r.victims[j.id] {
			j.state = 0 // released: it holds nothing any more
			for t := 0; t < m.T; t++ {
				r.kept[t] += min(j.dem[t], r.dem[t]-r.got[t]-r.kept[t])
			}
			for t := 0; t < m.T; t++ {
				mv := min(r.kept[t], max(0, m.resLimit(r, t)-m.used(r.sh, t)))
				r.kept[t] -= mv
				r.got[t] += mv
			}
			delete(r.victims, j.id)
			if len(r.victims) == 0 {
				m.ready = append(m.ready, r.id)
			}
		}
		j.reserver = ""
	case JobReserved:
		m.cancel(j)
	case JobRunnable:
		if requeue {
			return
		}
	}
	if requeue {
		j.state = JobRunnable
	} else {
		delete(m.jobs, id)
	}
}

func (m *refModel) cancel(j *refJob) {
	j.got = nil
	j.kept = nil
	j.victims = nil
	j.state = JobRunnable
}

func (m *refModel) stopping(id string) {
	j := m.jobs[id]
	switch j.state {
	case JobRunnable:
		delete(m.jobs, id)
	case JobReserved:
		m.cancel(j)
		delete(m.jobs, id)
	case JobHolding:
		j.state = JobStopping
	}
}

// schedule is one pass.
func (m *refModel) schedule(now int64) []Decision {
	m.out = nil
	m.now = now
	m.applyPlans(now)
	// Reserved jobs whose victims are all released start first, in the
	// order their last victims were released (the caller of the model
	// keeps that order in readyOrder).
	for _, id := range m.readyOrder() {
		j := m.jobs[id]
		m.startReserved(j, now)
	}
	m.startEarly(now)
	for {
		progress := false
		blocked := make([]int64, m.T)
		zero := make([]int64, m.T)
		// Phase A.
		doneA := map[int]bool{}
		type fail struct {
			s int
			h *refJob
		}
		var failed []fail
		for {
			best, bs := (*refJob)(nil), -1
			for s := range m.shares {
				if h := m.head(s); h != nil && !doneA[s] && (best == nil || refFIFO(h, best)) {
					best, bs = h, s
				}
			}
			if best == nil {
				break
			}
			s, h := bs, best
			if m.misconfigured(s, h) {
				doneA[s] = true
				continue
			}
			if m.ownFit(s, h, zero) && m.planOK(h) {
				if m.freeFit(s, h, zero) {
					m.start(s, h, now)
					progress = true
					continue
				}
				need := make([]int64, m.T)
				for t := 0; t < m.T; t++ {
					if h.dem[t] > 0 {
						need[t] = h.dem[t] - m.usable(s, t)
					}
				}
				if v, ok := m.reclaim(s, need); ok && len(v) > 0 {
					m.reserve(s, h, nil, v, zero, false)
					progress = true
					continue
				}
				for t := 0; t < m.T; t++ {
					blocked[t] += h.dem[t]
				}
			}
			failed = append(failed, fail{s, h})
			doneA[s] = true
		}
		// Phase B.
		inB := map[int]bool{}
		for _, f := range failed {
			inB[f.s] = true
		}
		doneB := map[int]bool{}
		for {
			best, bs := (*refJob)(nil), -1
			for s := range m.shares {
				if !inB[s] || doneB[s] {
					continue
				}
				h := m.head(s)
				if h == nil || m.ownFit(s, h, zero) || !m.capFit(s, h, zero) || h.plan >= 0 {
					continue
				}
				if best == nil || refFIFO(h, best) {
					best, bs = h, s
				}
			}
			if best == nil {
				break
			}
			if m.freeFit(bs, best, blocked) {
				m.start(bs, best, now)
				progress = true
			} else {
				doneB[bs] = true
			}
		}
		// Phase C.
		for _, f := range failed {
			s := f.s
			if !m.shares[s].inShare || m.head(s) != f.h || f.h.plan >= 0 {
				continue
			}
			h := f.h
			var cands []*refJob
			for _, j := range m.jobs {
				if j.sh == s && j.state == JobHolding && j.prio < h.prio && !m.shielded(j) {
					cands = append(cands, j)
				}
			}
			sort.Slice(cands, func(a, b int) bool { return refVictimLess(cands[a], cands[b]) })
			removed := make([]int64, m.T)
			var in []*refJob
			ok := false
			for _, c := range cands {
				in = append(in, c)
				for t := 0; t < m.T; t++ {
					removed[t] += c.dem[t]
				}
				if mode, _ := m.fitAfter(s, h, removed, blocked); mode != 0 {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
			for i := len(in) - 1; i >= 0; i-- {
				for t := 0; t < m.T; t++ {
					removed[t] -= in[i].dem[t]
				}
				if mode, _ := m.fitAfter(s, h, removed, blocked); mode != 0 {
					in = append(in[:i], in[i+1:]...)
					continue
				}
				for t := 0; t < m.T; t++ {
					removed[t] += in[i].dem[t]
				}
			}
			mode, cross := m.fitAfter(s, h, removed, blocked)
			m.reserve(s, h, in, cross, removed, mode == 3)
			progress = true
		}
		if !progress {
			break
		}
	}
	m.startEarly(now)
	return m.out
}

func (m *refModel) startEarly(now int64) {
	// Reserved jobs that can take what they still wait for from usable
	// capacity start now, in the order they were reserved, within their
	// share's limit (own, or borrow cap) counting what victims still hold.
	var keep []string
	for _, id := range m.resOrder {
		j := m.jobs[id]
		if j == nil || j.state != JobReserved {
			continue
		}
		fits := true
		for t := 0; t < m.T; t++ {
			p := j.dem[t] - j.got[t]
			if p == 0 {
				continue
			}
			lim := m.resLimit(j, t)
			if m.committed(j.sh, t) > lim || p-j.kept[t] > m.usable(j.sh, t) {
				fits = false
			}
		}
		if !fits {
			keep = append(keep, id)
			continue
		}
		m.startReserved(j, now)
	}
	m.resOrder = keep
}

// readyOrder lists reserved jobs without outstanding victims, in the order
// recorded by noteReady.
func (m *refModel) readyOrder() []string {
	var out []string
	for _, id := range m.ready {
		if j := m.jobs[id]; j != nil && j.state == JobReserved && len(j.victims) == 0 {
			out = append(out, id)
		}
	}
	m.ready = nil
	return out
}

// qshareCap builds a Borrowed capacity keyed by the property test's type names.
type qshareCap map[int]int64

func (c *qshareCap) add(t int, n int64) {
	if *c == nil {
		*c = qshareCap{}
	}
	(*c)[t] += n
}

func (c qshareCap) capacity() map[string]int64 {
	if len(c) == 0 {
		return nil
	}
	out := map[string]int64{}
	for t, n := range c {
		out[typeName(t)] += n
	}
	return out
}

func typeName(t int) string { return "type" + string(rune('A'+t)) }

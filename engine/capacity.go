package engine

// Capacity and who holds it: an environment's pool, its queues and their
// quota shares, each with its limits and its accounting (used, pending,
// claimed), and a share's holding list in victim order.

import (
	"sort"

	"qshare"
)

// vec is a capacity vector indexed by interned instance type. A vector may
// be shorter than the number of known types; missing entries are zero.
type vec []int64

func (v vec) at(t int32) int64 {
	if int(t) < len(v) {
		return v[t]
	}
	return 0
}

func (v *vec) add(t int32, n int64) {
	for int(t) >= len(*v) {
		*v = append(*v, 0)
	}
	(*v)[t] += n
}

func (v vec) clear() {
	for i := range v {
		v[i] = 0
	}
}

// amount is n instances of the interned type t.
type amount struct {
	t int32
	n int64
}

// environment is a service environment and everything that draws on it.
// Every share of every queue on the environment borrows from and lends to
// the same pool: the environment is the unit a pass schedules.
type environment struct {
	name string
	// base is the configured limit; limit adds the open capacity plans.
	base   vec
	limit  vec
	used   vec // held by jobs, stopping and reserved-partial holdings included
	queues map[string]*queue
	// shares lists every share of every queue on the environment, sorted by
	// queue then name; reserves is its RESERVE subset.
	shares   []*share
	reserves []*share
	// owned is the sum of the shares' own limits, per type.
	owned vec
	dirty bool
	// wake is the earliest end of a protection that made a head of the
	// environment wait in its last pass (0: none); a pass at or after it is
	// due even if nothing else changed (see NextWake).
	wake   int64
	inWake bool // listed in the engine's wakeEnvs
	// ready holds reserved jobs whose last victim has been released; they
	// start at the next Schedule.
	ready []*job
	// resv lists reserved jobs in the order they were reserved (jobs no
	// longer reserved are dropped lazily).
	resv []*job
}

type queue struct {
	name   string
	env    *environment
	shares map[string]*share
}

// share is a quota share's configuration and its accounting.
type share struct {
	q        *queue
	name     string
	cfg      ShareConfig
	strategy qshare.Strategy
	limit    vec
	// maxUse is the most the share may ever use per type (own plus borrow
	// cap); unlimited is set for LEND_AND_BORROW with borrowLimit -1.
	maxUse    vec
	unlimited bool

	used    vec // held now, including stopping jobs and reserved partial holdings
	pending vec // what its reserved jobs still wait to receive from victims
	claimed vec // held by stopping jobs (victims, or stopped by the caller)

	runq runQueue
	// top is scratch: the head job while the share is in a pass's work list.
	top *job
	// si is the share's index in its environment's share list.
	si int32
	// whyCache holds the last wait reasons formatted for heads of this
	// share: heads that wait for the same reason share the text.
	whyCache [16]cachedWhy
	whyNext  int
	// holding lists holding and stopping jobs in victim order: lowest
	// priority first, then the most recently started.
	holding []held

	reserved int // reserved jobs

	// ownWhy is the reason of a start within the share's own capacity.
	ownWhy string
	// cursor is scratch: the next candidate in holding while choosing victims.
	cursor int

	// sim is scratch future usage used while choosing victims; valid when
	// simGen equals the engine's.
	sim    vec
	simGen uint64

	// fair is the fair-share state of a fair-share share (nil otherwise).
	fair *fairState
	// plans are the capacity plans that give the share capacity, by name
	// (nil: none, which the hot paths test first).
	plans []*plan

	// minRun is the minimum run time in nanoseconds (ShareConfig.MinRunTime):
	// a holding job of the share with started+minRun > now is protected.
	minRun int64
	// protHead, protBy, protEnd and protCross are set when the head
	// protHead failed in this pass only because victims are protected:
	// protBy is the protected candidate whose protection ends first
	// (protEnd), protCross says it is of another share (see noteProtected).
	protHead  *job
	protBy    *job
	protEnd   int64
	protCross bool
}

// protected reports whether holding job j may not be a victim at now: it has
// run less than its share's minimum run time. The end of the protection is
// j.started + minRun.
func (j *job) protectedAt(now int64) bool {
	return j.sh.minRun > 0 && now < j.started+j.sh.minRun
}

// committed is what the share will hold once its reservations complete.
func (s *share) committed(t int32) int64 { return s.used.at(t) + s.pending.at(t) }

// future is what the share will hold once its stopping jobs have stopped
// and its reservations completed: what decides whether it is above quota.
func (s *share) future(t int32) int64 {
	return s.used.at(t) - s.claimed.at(t) + s.pending.at(t)
}

func (s *share) maxUseAt(t int32) (int64, bool) {
	if s.unlimited {
		return 0, true
	}
	return s.maxUse.at(t), false
}

func (s *share) head() *job {
	if s.fair != nil {
		return s.fairHead()
	}
	return s.runq.head()
}

func (s *share) jobCount() int { return s.runnable() + len(s.holding) + s.reserved }

// insertHolding puts j into its share's holding list, which is kept in
// victim order (held.less) so that preemption reads candidates in order
// instead of sorting them. A job that starts now is the most recently
// started of its priority, so the binary search usually lands at the front
// of its priority's run.
func (s *share) insertHolding(j *job) {
	x := held{prio: int32(j.prio), started: j.started, seq: j.startSeq, j: j}
	h := s.holding
	i := sort.Search(len(h), func(k int) bool { return !h[k].less(&x) })
	h = append(h, held{})
	copy(h[i+1:], h[i:])
	h[i] = x
	s.holding = h
}

func (s *share) removeHolding(j *job) {
	x := held{prio: int32(j.prio), started: j.started, seq: j.startSeq, j: j}
	h := s.holding
	i, hi := 0, len(h) // binary search for the first entry not before x
	for i < hi {
		m := int(uint(i+hi) >> 1)
		if h[m].less(&x) {
			i = m + 1
		} else {
			hi = m
		}
	}
	if i >= len(h) || h[i].j != j {
		// The order was broken by a change that did not reposition the
		// job; fall back to a scan rather than corrupt the list.
		i = 0
		for i < len(h) && h[i].j != j {
			i++
		}
		if i == len(h) {
			return
		}
	}
	copy(h[i:], h[i+1:])
	h[len(h)-1] = held{}
	s.holding = h[:len(h)-1]
}

// held is an entry of a share's holding list, with the keys of victim
// order inline so that searching the list does not touch the jobs.
type held struct {
	prio    int32
	started int64
	seq     uint64
	j       *job
}

// less is victim order: lowest priority first, then the most recently
// started (start sequence numbers are unique).
func (a *held) less(b *held) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.started != b.started {
		return a.started > b.started
	}
	return a.seq > b.seq
}

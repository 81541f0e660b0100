package engine

import (
	"slices"
	"sort"
	"strings"
	"time"

	"qshare"
)

// Engine is the scheduler's state: configuration, jobs, and the capacity
// they hold. Create one with New.
//
// Instance types are interned to small integers; capacities are vectors
// indexed by them. Each share keeps its RUNNABLE jobs in a heap and its
// holding jobs in a slice, so that a pass touches only shares of
// environments whose situation changed since the last pass (dirty), and
// within them only share heads.
type Engine struct {
	envs   map[string]*environment
	queues map[string]*queue
	jobs   jobStore

	typeIndex map[string]int32
	typeNames []string

	dirty []*environment

	startSeq uint64
	simGen   uint64

	stats Stats

	// Scratch buffers reused by passes, so that the hot path allocates
	// nothing once warm.
	out        []Decision
	work       shareHeap
	failed     []*share
	failedHead []*job
	overShares []*share
	chosen     []*job
	inChosen   []*job
	blocked    vec
	removed    vec
	need       vec
	supply     vec
	touched    []*share
	readyBuf   []*job
	envsToRun  []*environment
	// warm sums values read only to bring the callers' demand maps into
	// the cache ahead of use (see prefetchSubmits); it means nothing.
	warm int64
	// hashes and shareBuf are scratch for ReleaseMany and SubmitMany: the
	// hashes of a batch's IDs, and the shares of a batch of specs.
	hashes   []uint32
	shareBuf []*share
	// text, srcs and borrowBuf are scratch for the reason texts of starts
	// and preemptions (see appendBorrowText), built without fmt.
	text      []byte
	srcs      []lender
	borrowBuf []amount
}

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
	name   string
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

func (s *share) head() *job { return s.runq.head() }

func (s *share) jobCount() int { return s.runq.Len() + len(s.holding) + s.reserved }

// job is a job the engine knows.
//
// Its 256 bytes are laid out for the cache and for the garbage collector.
// At a million pending jobs a record is usually a cache miss when its job
// becomes a share's head or is released; what those read is in the first
// three 64-byte lines, and what only preemption and reservation read in
// the fourth. Every pointer is in the first two lines (the wait reason
// holds one), so the collector, which loads only a record's pointer
// words, reads one 128-byte pair of lines per record instead of all four.
// Records are 256 bytes and chunks start on a page, so a record starts on
// a line.
type job struct {
	// Line 0: pointers.
	id       string
	sh       *share
	reserver *job // a victim's (JobStopping after a preemption) reserved job
	// Reservation state (see resState): allocated the first time a job in
	// this slot is reserved, so that the million jobs that never are stay
	// small; kept, emptied, when the slot is reused (see release).
	*resState
	reason  string
	created int64 // UnixNano

	// Line 1: the wait reason (with one pointer), priority and state.
	why   waitWhy
	prio  int
	state JobState

	// Line 2.
	// dem0 holds the demand of a job of one or two types (ndem entries);
	// a larger one is in resState.dem (see demand).
	dem0 [2]amount
	// ver versions the job's entry in its share's run queue.
	ver uint32
	// slot is the job's place in the engine's job store; refs counts the
	// lazy list entries that still name it, and dead says it was forgotten
	// (its slot is freed when refs drops to 0).
	refs int32
	slot int32
	// resEpoch is the reservation of reserver that a victim's capacity
	// goes to; epoch tells this job's reservation from an earlier,
	// cancelled one.
	resEpoch uint32
	epoch    uint32
	ndem     uint8
	dead     bool
	started  int64

	// Line 3.
	startSeq    uint64
	preemptions int
	retries     int // -1: unlimited
	// vt, vuse, vlim: scratch for victim selection, the type, usage and
	// limit that made the job's share above quota when it was chosen.
	vuse int64
	vlim int64
	vt   int32
	_    [20]byte
}

// demand is the job's demand, one entry per type, in type order.
func (j *job) demand() []amount {
	if j.ndem <= uint8(len(j.dem0)) {
		return j.dem0[:j.ndem]
	}
	return j.resState.dem
}

// resState is the state of a reserved job (JobReserved).
type resState struct {
	// got is what the reserved job already holds, per entry of dem;
	// waitFor counts victims not yet released.
	got []int64
	// kept is capacity its victims gave back that its share cannot hold
	// yet (an in-share victim still holds its part of the limit): it is
	// used in the environment, kept for this job, and moves into the share
	// as room appears. resBorrow says the reservation may use the share's
	// borrow cap, not only its own limit.
	kept      []int64
	resBorrow bool
	waitFor   int
	// startWhy is the reason of the DecisionStart of a reserved job; the
	// reason when it starts before its victims have stopped is built from
	// it only then (see earlyWhy): whyNames ends the victims' names in it.
	startWhy string
	whyNames int
	borrowed []amount
	// dem is the demand of a job of more than two types, allocated when
	// the job is created.
	dem []amount
}

// New returns an empty engine.
func New() *Engine {
	return &Engine{
		envs:      map[string]*environment{},
		queues:    map[string]*queue{},
		typeIndex: map[string]int32{},
	}
}

func (e *Engine) intern(t string) int32 {
	if i, ok := e.typeIndex[t]; ok {
		return i
	}
	i := int32(len(e.typeNames))
	e.typeIndex[t] = i
	e.typeNames = append(e.typeNames, t)
	return i
}

func (e *Engine) toVec(c qshare.Capacity) vec {
	var v vec
	for _, t := range c.Types() {
		v.add(e.intern(t), c[t])
	}
	return v
}

func (e *Engine) toCapacity(v vec) qshare.Capacity {
	c := qshare.Capacity{}
	for i, n := range v {
		if n != 0 {
			c[e.typeNames[i]] = n
		}
	}
	return c
}

func (e *Engine) markDirty(env *environment) {
	if !env.dirty {
		env.dirty = true
		e.dirty = append(e.dirty, env)
	}
}

// SetEnvironment creates or updates a service environment. Raising a limit
// takes effect at the next Schedule; lowering one below its usage preempts
// nothing, it only stops new starts until usage drops.
func (e *Engine) SetEnvironment(c EnvironmentConfig) error {
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "service environment name must not be empty")
	}
	for t, n := range c.Limits {
		if n < 0 {
			return qshare.Errorf(qshare.EINVALID, "service environment %s: maxCapacity of %s is %d; it must be at least 0", c.Name, t, n)
		}
	}
	env := e.envs[c.Name]
	if env == nil {
		env = &environment{name: c.Name, queues: map[string]*queue{}}
		e.envs[c.Name] = env
	}
	env.limit = e.toVec(c.Limits)
	e.markDirty(env)
	return nil
}

// RemoveEnvironment forgets an environment. It fails with ECONFLICT while a
// queue draws on it.
func (e *Engine) RemoveEnvironment(name string) error {
	env := e.envs[name]
	if env == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "service environment %s does not exist", name)
	}
	if len(env.queues) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "service environment %s is used by %d job queue(s); remove or move them first", name, len(env.queues))
	}
	delete(e.envs, name)
	return nil
}

// SetQueue creates or updates a job queue. It fails with ENOTFOUND when the
// environment does not exist.
func (e *Engine) SetQueue(c QueueConfig) error {
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "job queue name must not be empty")
	}
	env := e.envs[c.Environment]
	if env == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "service environment %s does not exist; create it before job queue %s", c.Environment, c.Name)
	}
	q := e.queues[c.Name]
	if q == nil {
		q = &queue{name: c.Name, env: env, shares: map[string]*share{}}
		e.queues[c.Name] = q
		env.queues[q.name] = q
		e.markDirty(env)
		return nil
	}
	if q.env == env {
		return nil
	}
	for _, s := range q.shares {
		if s.jobCount() > 0 {
			return qshare.Errorf(qshare.ECONFLICT, "job queue %s has jobs in quota share %s; it cannot move to service environment %s until they are gone", q.name, s.name, env.name)
		}
	}
	old := q.env
	delete(old.queues, q.name)
	q.env = env
	env.queues[q.name] = q
	e.reindex(old)
	e.reindex(env)
	e.markDirty(old)
	e.markDirty(env)
	return nil
}

// RemoveQueue forgets a queue. It fails with ECONFLICT while it has shares.
func (e *Engine) RemoveQueue(name string) error {
	q := e.queues[name]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist", name)
	}
	if len(q.shares) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "job queue %s still has %d quota share(s); remove them first", name, len(q.shares))
	}
	delete(q.env.queues, name)
	delete(e.queues, name)
	return nil
}

// reindex rebuilds an environment's sorted share lists.
func (e *Engine) reindex(env *environment) {
	env.shares = env.shares[:0]
	env.reserves = env.reserves[:0]
	for _, q := range env.queues {
		for _, s := range q.shares {
			env.shares = append(env.shares, s)
		}
	}
	sort.Slice(env.shares, func(i, j int) bool {
		a, b := env.shares[i], env.shares[j]
		if a.q.name != b.q.name {
			return a.q.name < b.q.name
		}
		return a.name < b.name
	})
	env.owned = env.owned[:0]
	for i, s := range env.shares {
		for t, l := range s.limit {
			env.owned.add(int32(t), l)
		}
		s.si = int32(i)
		if s.strategy == qshare.StrategyReserve {
			env.reserves = append(env.reserves, s)
		}
	}
}

// SetShare creates or updates a quota share. Lowering a limit below the
// share's usage makes its jobs above the new limit reclaimable.
func (e *Engine) SetShare(c ShareConfig) error {
	q := e.queues[c.Queue]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist; create it before quota share %s", c.Queue, c.Name)
	}
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "quota share name must not be empty")
	}
	if !c.Strategy.Valid() {
		return qshare.Errorf(qshare.EINVALID, "quota share %s: strategy %q is not one of RESERVE, LEND, LEND_AND_BORROW", c.Name, c.Strategy)
	}
	if c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit < qshare.BorrowUnlimited {
		return qshare.Errorf(qshare.EINVALID, "quota share %s: borrowLimit %d is below -1; use -1 for unlimited or a percentage of at least 0", c.Name, c.BorrowLimit)
	}
	for t, n := range c.Limits {
		if n < 0 {
			return qshare.Errorf(qshare.EINVALID, "quota share %s: maxCapacity of %s is %d; it must be at least 0", c.Name, t, n)
		}
	}
	s := q.shares[c.Name]
	isNew := s == nil
	if isNew {
		s = &share{q: q, name: c.Name, ownWhy: "started within the own capacity of share " + c.Name}
		s.runq.st = &e.jobs
		q.shares[c.Name] = s
	}
	s.cfg = c
	s.cfg.Limits = c.Limits.Clone()
	s.whyCache = [len(s.whyCache)]cachedWhy{}
	s.strategy = c.Strategy
	s.limit = e.toVec(c.Limits)
	s.unlimited = c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit == qshare.BorrowUnlimited
	s.maxUse = make(vec, len(s.limit))
	for i, l := range s.limit {
		s.maxUse[i] = l
		if c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit > 0 {
			s.maxUse[i] = l + l*c.BorrowLimit/100
		}
	}
	e.reindex(q.env)
	e.markDirty(q.env)
	return nil
}

// RemoveShare forgets a share. It fails with ECONFLICT while the share has
// jobs (the caller terminates and releases them first).
func (e *Engine) RemoveShare(queue, name string) error {
	q := e.queues[queue]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist", queue)
	}
	s := q.shares[name]
	if s == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "quota share %s does not exist in job queue %s", name, queue)
	}
	if n := s.jobCount(); n > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "quota share %s still has %d job(s); terminate and release them first", name, n)
	}
	delete(q.shares, name)
	e.reindex(q.env)
	e.markDirty(q.env)
	return nil
}

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

// prefetchSubmits asks for what adding the group of specs from index from
// on will read: each ID's home entry in the index, the record of the free
// slot the job will get (the k-th spec of the batch gets the k-th slot
// from the top of the free list, which held free0 slots when the batch
// began), and the bottom of its share's run queue, where the new job's
// entry goes and is first compared; and it reads the header of each
// demand map. e.hashes and e.shareBuf hold the batch's hashes and shares
// (nil where the queue or share is unknown, so that newJobHash reports
// it).
func (e *Engine) prefetchSubmits(specs []JobSpec, from, free0 int) {
	st := &e.jobs
	var sum int64
	for k := from; k < min(from+releaseGroup, len(specs)); k++ {
		if st.count > 0 {
			prefetchIndex(&st.index[e.hashes[k]&st.mask])
		}
		if f := free0 - 1 - k; f >= 0 {
			prefetchJob(st.at(st.free[f]))
		}
		if s := e.shareBuf[k]; s != nil {
			s.runq.prefetchBottom()
		}
		sum += int64(len(specs[k].Demand))
	}
	e.warm += sum
}

// enqueue makes a new job RUNNABLE in its share.
func (e *Engine) enqueue(jb *job) {
	jb.state = JobRunnable
	jb.sh.runq.push(jb)
	e.stats.Runnable++
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
	j.sh.removeHolding(j)
	e.stats.Holding--
}

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
		j.sh.runq.drop(j)
		j.prio = priority
		j.sh.runq.push(j)
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
		j.sh.runq.drop(j)
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
	j.state = 0
	e.jobs.remove(j)
}

// cancelReservation gives back what a reserved job holds; its victims, when
// released, give their capacity to nobody.
func (e *Engine) cancelReservation(j *job) {
	s := j.sh
	env := s.q.env
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

// releaseGroup is how many jobs ReleaseMany prefetches at a time: enough
// for the cache misses of a group to overlap, few enough that what it
// loads is still in cache when each job's release reads it.
const releaseGroup = 32

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
			s.runq.drop(j)
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
		s.runq.push(j)
		e.stats.Runnable++
	} else {
		e.forget(j)
	}
}

// Schedule runs one scheduling pass at time now and returns what it decided,
// in the order the decisions were made. The cost of a pass grows with the
// work it does, not with the number of pending jobs.
func (e *Engine) Schedule(now time.Time) []Decision {
	e.out = e.schedule(e.out[:0], now)
	if len(e.out) == 0 {
		return nil
	}
	out := make([]Decision, len(e.out))
	copy(out, e.out)
	return out
}

// AppendSchedule is Schedule, but appends the decisions to dst and returns
// the extended slice, as append does. A caller that runs many passes and
// is done with one pass's decisions before the next can hand the same
// slice back each time (dst[:0]): the pass then allocates no slice for its
// decisions and copies none, which Schedule, whose result is the caller's
// to keep, must (at 1,500 decisions of 104 bytes, a 156 KB allocation per
// pass of 1,000 starts). The engine keeps no reference to dst.
func (e *Engine) AppendSchedule(dst []Decision, now time.Time) []Decision {
	return e.schedule(dst, now)
}

// schedule runs a pass, appending its decisions to out.
func (e *Engine) schedule(out []Decision, now time.Time) []Decision {
	scratch := e.out
	e.out = out
	n0 := len(out)
	e.stats.Passes++
	envs := append(e.envsToRun[:0], e.dirty...)
	e.dirty = e.dirty[:0]
	// slices.SortFunc, unlike sort.Slice, allocates nothing (names are
	// unique, so stability does not matter).
	slices.SortFunc(envs, func(a, b *environment) int { return strings.Compare(a.name, b.name) })
	t := now.UnixNano()
	for k, env := range envs {
		env.dirty = false
		if _, ok := e.envs[env.name]; !ok || e.envs[env.name] != env {
			continue
		}
		// Ask for the head records of the next environment's shares now:
		// they arrive while this one is scheduled (see prefetchJob).
		if k+1 < len(envs) {
			for _, s := range envs[k+1].shares {
				s.runq.prefetchHead()
			}
		}
		e.startReady(env, t)
		e.startEarly(env, t)
		e.pass(env, t)
	}
	e.envsToRun = envs[:0]
	out = e.out
	e.out = scratch
	e.stats.Decisions += uint64(len(out) - n0)
	return out
}

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
			j.state = JobRunnable
			j.got = j.got[:0]
			j.kept = j.kept[:0]
			s.runq.push(j)
			e.stats.Runnable++
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

func (e *Engine) emitStart(j *job, borrowed []amount, why string) {
	d := Decision{Kind: DecisionStart, Job: j.id, Queue: j.sh.q.name, Share: j.sh.name, Reason: why}
	if len(borrowed) > 0 {
		d.Borrowed = qshare.Capacity{}
		for _, a := range borrowed {
			d.Borrowed[e.typeNames[a.t]] += a.n
		}
	}
	e.out = append(e.out, d)
	e.stats.Starts++
}

package engine

// How the engine uses memory. At a million pending jobs the cost of a
// Submit, a Release or a pass is mostly cache misses and garbage
// collection, not arithmetic, so three things are arranged for the memory
// system rather than for reading: the job record's layout (below), the
// job store's chunks and index (jobs.go), and the scratch buffers that
// passes and batches reuse so that the hot path allocates nothing
// (buffers, below). What the engine asks the processor to load ahead is
// in prefetch.go. None of it changes a decision: a prefetch changes only how long a later
// load takes, and the layout only where a field lies.

// buffers is the scratch space an Engine reuses from call to call, so that
// the hot path allocates nothing once warm. Nothing in it carries state
// from one call to the next; it is embedded in Engine, whose methods use
// the fields directly.
type buffers struct {
	// Reused by passes.
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
	// fairBuf is scratch for a fair-share pass's order of identifiers.
	fairBuf []*fairIdent
}

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
	// ident is the job's share identifier in a fair-share share (an index
	// into its fairState).
	ident int32
	// plan is the capacity plan the job runs on (an index into the
	// engine's planList, plus 1), or 0; read only when its share has
	// plans.
	plan int32
	_    [12]byte
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

package engine

// runQueue is a share's queue of RUNNABLE jobs: a 4-ary heap whose top is
// the job the share runs next (priority descending, then creation time
// ascending, then ID ascending). Entries carry their sort keys, so that
// sifting compares without touching the jobs: a pop at a million pending
// jobs stays within a share's small, contiguous heap array. Removal is lazy:
// a job that leaves the queue, or changes priority, bumps its version, and
// its old entry is dropped when it reaches the top (or at compaction).
//
// An entry is 16 bytes and holds no pointer: the job's slot, its priority
// and the low bits of its version packed in one word. So sifting needs no
// write barriers and the garbage collector does not scan the heaps.
type runQueue struct {
	h     []entry
	live  int
	stale int
	// st is the engine's job store: each entry counts as a reference to
	// its job's slot (job.refs), dropped when the entry leaves the heap.
	st *jobStore
}

// arity is the run-queue heap's number of children per node: four
// 16-byte entries are one cache line, and a heap of a thousand jobs is 5
// levels deep instead of 10, so a pop at a million pending jobs misses
// the cache about half as often.
const arity = 4

type entry struct {
	created int64
	slot    int32
	// pv is the priority (0..9999, 14 bits) above the low verBits bits of
	// the job's version when the entry was pushed.
	pv uint32
}

// verBits is how many bits of a job's version an entry keeps. Versions of
// one job's entries never alias: when a job's version crosses a multiple
// of 1<<verBits, every entry of the job is removed first (see bump).
const (
	verBits = 18
	verMask = 1<<verBits - 1
)

func (e *entry) prio() int32 { return int32(e.pv >> verBits) }

// before reports whether a runs before b inside one share (rule 1).
func (q *runQueue) before(a, b *entry) bool {
	if a.pv>>verBits != b.pv>>verBits {
		return a.pv > b.pv
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return q.st.at(a.slot).id < q.st.at(b.slot).id
}

func (q *runQueue) valid(e *entry) bool {
	j := q.st.at(e.slot)
	return j.ver&verMask == e.pv&verMask && j.state == JobRunnable
}

// before reports whether job a runs before job b inside one share.
func before(a, b *job) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

// fifoBefore orders head jobs of different shares: first come, first served
// (rule 4), by creation time then ID.
func fifoBefore(a, b *job) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

// Len is the number of RUNNABLE jobs in the queue.
func (q *runQueue) Len() int { return q.live }

// bump increments j's version, which makes its entries in the queue
// stale. Entries keep only the low verBits bits of a version; when these
// wrap to zero, every entry of j is removed now, so that none pushed
// 1<<verBits versions ago can pass for a current one.
func (q *runQueue) bump(j *job) {
	j.ver++
	if j.ver&verMask == 0 {
		q.compactWithout(j.slot)
	}
}

// push adds a RUNNABLE job.
func (q *runQueue) push(j *job) {
	q.bump(j)
	j.refs++
	q.h = append(q.h, entry{created: j.created, slot: j.slot, pv: uint32(j.prio)<<verBits | j.ver&verMask})
	q.up(len(q.h) - 1)
	q.live++
}

// drop removes j from the queue (it left, or its priority changed and it
// is pushed again).
func (q *runQueue) drop(j *job) {
	q.live--
	q.stale++
	q.bump(j)
	if q.stale > 64 && q.stale > q.live {
		q.compact()
	}
}

// head returns the job the share runs next, or nil.
func (q *runQueue) head() *job {
	if q.stale == 0 {
		// No dropped entries: the top is valid without looking at the job.
		if len(q.h) == 0 {
			return nil
		}
		return q.st.at(q.h[0].slot)
	}
	for len(q.h) > 0 {
		if q.valid(&q.h[0]) {
			return q.st.at(q.h[0].slot)
		}
		q.popTop()
		q.stale--
	}
	return nil
}

// topIs reports whether the top entry names j, without reading j.
func (q *runQueue) topIs(j *job) bool {
	return len(q.h) > 0 && q.st.at(q.h[0].slot) == j
}

// popHead removes the head job; head must have returned it.
func (q *runQueue) popHead() {
	q.popTop()
	q.live--
}

// popTop removes the top entry. The hole it leaves goes down to a leaf
// along the earliest child, and the last entry fills it and moves up: the
// last entry, which belongs near the bottom, rarely moves up, so this
// saves the comparisons with it on the way down.
func (q *runQueue) popTop() {
	h := q.h
	n := len(h) - 1
	q.st.unref(q.st.at(h[0].slot))
	last := h[n]
	h[n] = entry{}
	h = h[:n]
	q.h = h
	if n == 0 {
		return
	}
	i := 0
	for m := q.firstChild(i); m >= 0; m = q.firstChild(i) {
		h[i] = h[m]
		i = m
	}
	h[i] = last
	q.up(i)
}

func (q *runQueue) compact() { q.compactWithout(-1) }

// compactWithout drops the stale entries, and every entry of the job in
// slot skip, and rebuilds the heap.
func (q *runQueue) compactWithout(skip int32) {
	k := 0
	for i := range q.h {
		if q.h[i].slot != skip && q.valid(&q.h[i]) {
			q.h[k] = q.h[i]
			k++
		} else {
			q.st.unref(q.st.at(q.h[i].slot))
		}
	}
	clear(q.h[k:])
	q.h = q.h[:k]
	q.stale = 0
	if k > 1 {
		for i := (k - 2) / arity; i >= 0; i-- {
			q.down(i)
		}
	}
}

func (q *runQueue) up(i int) {
	h := q.h
	x := h[i]
	for i > 0 {
		p := (i - 1) / arity
		if !q.before(&x, &h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
}

func (q *runQueue) down(i int) {
	h := q.h
	for m := q.firstChild(i); m >= 0 && q.before(&h[m], &h[i]); m = q.firstChild(i) {
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// firstChild returns the child of i that comes first, or -1 when i is a
// leaf.
func (q *runQueue) firstChild(i int) int {
	h := q.h
	n := len(h)
	c := arity*i + 1
	if c >= n {
		return -1
	}
	m := c
	for k := c + 1; k < min(c+arity, n); k++ {
		if q.before(&h[k], &h[m]) {
			m = k
		}
	}
	return m
}

// top returns up to n RUNNABLE jobs of the queue in the order they would
// run, without changing the queue: a small frontier over heap indices.
func (q *runQueue) top(n int) []*job {
	h := q.h
	if n <= 0 || len(h) == 0 {
		return nil
	}
	var out []*job
	frontier := []int{0}
	for len(frontier) > 0 && len(out) < n {
		bi := 0
		for k := 1; k < len(frontier); k++ {
			if q.before(&h[frontier[k]], &h[frontier[bi]]) {
				bi = k
			}
		}
		i := frontier[bi]
		frontier[bi] = frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		if q.valid(&h[i]) {
			out = append(out, q.st.at(h[i].slot))
		}
		for c := arity*i + 1; c < min(arity*i+arity+1, len(h)); c++ {
			frontier = append(frontier, c)
		}
	}
	return out
}

// shareHeap orders shares by their head job (share.top, set by the pass
// before pushing), first come first served. It is the per-pass work list of
// a phase. Entries hold the head's creation time and the share's index in
// the environment's list: no pointers, so sifting is cheap even while the
// garbage collector runs.
type shareHeap struct {
	h      []shareEntry
	shares []*share
}

type shareEntry struct {
	created int64
	si      int32
}

func (q *shareHeap) less(a, b *shareEntry) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return q.shares[a.si].top.id < q.shares[b.si].top.id
}

func (q *shareHeap) reset(shares []*share) {
	q.h = q.h[:0]
	q.shares = shares
}

func (q *shareHeap) Len() int { return len(q.h) }

// push adds s, whose top must be its run queue's head: the creation time
// is read from the queue's top entry, not from the job.
func (q *shareHeap) push(s *share) {
	// Read the job only when it is not the queue's top entry: at a
	// million pending jobs the job itself is usually a cache miss.
	var created int64
	if s.runq.topIs(s.top) {
		created = s.runq.h[0].created
	} else {
		created = s.top.created
	}
	q.h = append(q.h, shareEntry{created: created, si: s.si})
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *shareHeap) pop() *share {
	h := q.h
	n := len(h) - 1
	s := q.shares[h[0].si]
	h[0] = h[n]
	h = h[:n]
	q.h = h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(&h[r], &h[l]) {
			m = r
		}
		if !q.less(&h[m], &h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return s
}

package engine

// runQueue is a share's queue of RUNNABLE jobs: a binary heap whose top is
// the job the share runs next (priority descending, then creation time
// ascending, then ID ascending). Entries carry their sort keys, so that
// sifting compares without touching the jobs: a pop at a million pending
// jobs stays within a share's small, contiguous heap array. Removal is lazy:
// a job that leaves the queue, or changes priority, bumps its version, and
// its old entry is dropped when it reaches the top (or at compaction).
type runQueue struct {
	h     []entry
	live  int
	stale int
	// st is the engine's job store: each entry counts as a reference to
	// its job's slot (job.refs), dropped when the entry leaves the heap.
	st *jobStore
}

type entry struct {
	prio    int32
	ver     uint32
	created int64
	j       *job
}

// before reports whether a runs before b inside one share (rule 1).
func (a *entry) before(b *entry) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return a.j.id < b.j.id
}

func (e *entry) valid() bool { return e.j.ver == e.ver && e.j.state == JobRunnable }

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

// push adds a RUNNABLE job.
func (q *runQueue) push(j *job) {
	j.ver++
	j.refs++
	q.h = append(q.h, entry{prio: int32(j.prio), ver: j.ver, created: j.created, j: j})
	q.up(len(q.h) - 1)
	q.live++
}

// drop removes j from the queue (it left, or its priority changed and it
// is pushed again).
func (q *runQueue) drop(j *job) {
	j.ver++
	q.live--
	q.stale++
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
		return q.h[0].j
	}
	for len(q.h) > 0 {
		if q.h[0].valid() {
			return q.h[0].j
		}
		q.popTop()
		q.stale--
	}
	return nil
}

// popHead removes the head job; head must have returned it.
func (q *runQueue) popHead() {
	q.popTop()
	q.live--
}

func (q *runQueue) popTop() {
	n := len(q.h) - 1
	q.st.unref(q.h[0].j)
	q.h[0] = q.h[n]
	q.h[n] = entry{}
	q.h = q.h[:n]
	if n > 0 {
		q.down(0)
	}
}

func (q *runQueue) compact() {
	k := 0
	for i := range q.h {
		if q.h[i].valid() {
			q.h[k] = q.h[i]
			k++
		} else {
			q.st.unref(q.h[i].j)
		}
	}
	clear(q.h[k:])
	q.h = q.h[:k]
	q.stale = 0
	for i := k/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *runQueue) up(i int) {
	h := q.h
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *runQueue) down(i int) {
	h := q.h
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
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
			if h[frontier[k]].before(&h[frontier[bi]]) {
				bi = k
			}
		}
		i := frontier[bi]
		frontier[bi] = frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		if h[i].valid() {
			out = append(out, h[i].j)
		}
		if l := 2*i + 1; l < len(h) {
			frontier = append(frontier, l)
		}
		if r := 2*i + 2; r < len(h) {
			frontier = append(frontier, r)
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
	if len(s.runq.h) > 0 && s.runq.h[0].j == s.top {
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

package engine

// jobHeap is a share's queue of RUNNABLE jobs, a binary heap whose top is the
// job the share runs next: priority descending, then creation time
// ascending, then ID ascending. Each job remembers its index (job.idx) so
// that a priority change or a removal costs O(log n).
type jobHeap []*job

// before reports whether a runs before b inside one share (rule 1).
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

func (h *jobHeap) push(j *job) {
	*h = append(*h, j)
	j.idx = len(*h) - 1
	h.up(j.idx)
}

func (h *jobHeap) remove(i int) *job {
	q := *h
	n := len(q) - 1
	j := q[i]
	if i != n {
		q[i] = q[n]
		q[i].idx = i
	}
	q[n] = nil
	*h = q[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	j.idx = -1
	return j
}

func (h *jobHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h jobHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		h[i].idx = i
		h[p].idx = p
		i = p
	}
}

func (h jobHeap) down(i0 int) bool {
	i := i0
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && before(h[r], h[l]) {
			m = r
		}
		if !before(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		h[i].idx = i
		h[m].idx = m
		i = m
	}
	return i > i0
}

// top returns up to n jobs of the heap in the order they would run, without
// changing the heap: a small frontier heap over heap indices, O(n log n).
func (h jobHeap) top(n int) []*job {
	if n <= 0 || len(h) == 0 {
		return nil
	}
	out := make([]*job, 0, min(n, len(h)))
	frontier := []int{0}
	for len(frontier) > 0 && len(out) < n {
		// Extract the best index from the frontier (small: at most n+1 entries).
		bi := 0
		for k := 1; k < len(frontier); k++ {
			if before(h[frontier[k]], h[frontier[bi]]) {
				bi = k
			}
		}
		i := frontier[bi]
		frontier[bi] = frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		out = append(out, h[i])
		if l := 2*i + 1; l < len(h) {
			frontier = append(frontier, l)
		}
		if r := 2*i + 2; r < len(h) {
			frontier = append(frontier, r)
		}
	}
	return out
}

// shareHeap orders shares by their head job, first come first served. It is
// the per-pass work list of a phase.
type shareHeap []*share

func (h *shareHeap) push(s *share) {
	*h = append(*h, s)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !fifoBefore(q[i].runq[0], q[p].runq[0]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *shareHeap) pop() *share {
	q := *h
	n := len(q) - 1
	s := q[0]
	q[0] = q[n]
	q[n] = nil
	q = q[:n]
	*h = q
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && fifoBefore(q[r].runq[0], q[l].runq[0]) {
			m = r
		}
		if !fifoBefore(q[m].runq[0], q[i].runq[0]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return s
}

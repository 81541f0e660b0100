package engine

// Loading ahead. At a million pending jobs the record of a job that
// becomes a share's head, or that is released, is usually a cache miss
// (and a TLB miss: the records span 256 MB). The engine knows a little
// ahead which records it will read, and asks the processor to bring them
// into the cache then, so that the misses overlap with other work and with
// each other.
//
// On amd64 and arm64 this is a prefetch instruction (prefetch_amd64.s,
// prefetch_arm64.s): unlike a load, it does not hold up the instructions
// after it until the line arrives. A load whose value is thrown away
// (which the engine used before) stalls the processor once its reorder
// window is full, so at most a few misses were in flight and the stall
// showed in the profile as the load itself. Elsewhere the functions do
// nothing (prefetch_other.go). A prefetch never faults and changes no
// value the engine reads: it changes only how long a later load takes.

// prefetchJob asks for the lines of j that a head's evaluation reads:
// lines 0 to 2 (ID, share, creation time; wait reason, priority, state;
// the demand, the slot's counters); see the layout of job.
func prefetchJob(j *job) { prefetchJobLines(j) }

// prefetchReleased asks for all four lines of j: a Release of a holding
// job also reads its start sequence, in line 3, to find it in its share's
// holding list.
func prefetchReleased(j *job) { prefetchWholeJob(j) }

// prefetchIndex asks for the line of the job index holding *x.
func prefetchIndex(x *uint64) { prefetchWord(x) }

// prefetchEntry asks for the line of a run queue holding *e.
func prefetchEntry(e *entry) { prefetchEntryLine(e) }

// releaseGroup is how many jobs ReleaseMany prefetches at a time: enough
// for the cache misses of a group to overlap, few enough that what it
// loads is still in cache when each job's release reads it.
const releaseGroup = 32

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

// prefetchEntries and prefetchRecords bring the index entries and job
// records of IDs with the given hashes into the cache ahead of their
// lookups, in two sweeps: first prefetchEntries asks for every ID's home
// entry in the index, then, once those have arrived, prefetchRecords reads
// them and asks for the record each one names. The requests within a sweep
// do not depend on each other, so their cache misses overlap, where
// lookups one after the other pay an index miss and then a record miss per
// job. ReleaseMany runs them a group or two of IDs ahead of its lookups.
func (st *jobStore) prefetchEntries(hashes []uint32) {
	if st.count == 0 {
		return
	}
	for _, h := range hashes {
		prefetchIndex(&st.index[h&st.mask])
	}
}

func (st *jobStore) prefetchRecords(hashes []uint32) {
	if st.count == 0 {
		return
	}
	for _, h := range hashes {
		// The first entry of the probe run with the ID's hash is almost
		// always the job's (at a load of one half, a third of the jobs are
		// not at their home position); if it is another job's, or a
		// removal since moved it, the record asked for is wasted, not
		// wrong.
		for p := h & st.mask; ; p = (p + 1) & st.mask {
			x := st.index[p]
			if x == 0 {
				break
			}
			if uint32(x>>32) == h {
				prefetchReleased(st.at(int32(uint32(x)) - 1))
				break
			}
		}
	}
}

// prefetchHead asks for the top entry's job record (see prefetchJob).
func (q *runQueue) prefetchHead() {
	if len(q.h) > 0 {
		prefetchJob(q.st.at(q.h[0].slot))
	}
}

// prefetchBottom asks for the entries a push compares first: the last
// entry (the new one goes next to it) and its parent and grandparent.
func (q *runQueue) prefetchBottom() {
	h := q.h
	n := len(h)
	if n == 0 {
		return
	}
	p := (n - 1) / arity
	prefetchEntry(&h[n-1])
	prefetchEntry(&h[p])
	prefetchEntry(&h[max(p-1, 0)/arity])
}

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

package engine

// jobStore holds the engine's jobs: records in fixed-size chunks, addressed
// by slot number, and an open-addressing index from job ID to slot.
//
// Why not a map[string]*job and one allocation per job: at a million
// pending jobs, a Submit then paid for an allocation (and the garbage
// collection it brings forward), and a Submit and a Release each for a
// probe of a map whose string keys live in separate allocations (a cache
// miss for the key's bytes on top of the one for the table). Here a
// Submit reuses the slot of the job released most recently (whose record
// is likely still in cache), and the index holds 8-byte entries without
// pointers: a probe costs one miss in the table, and the ID is compared in
// the job record, which the caller reads anyway.
//
// Slots are reused, so nothing may name a slot after its job is gone: the
// lists that drop their entries lazily (run-queue heaps, an environment's
// ready and reserved lists) count their references in the job (refs), and
// a forgotten job's slot is freed only when the last one is dropped. A
// victim's pointer to the job it was preempted for is not counted: it is
// checked against the reserver's epoch, which a reused slot keeps counting
// from (as it keeps counting ver), so an old reference never matches.
type jobStore struct {
	chunks [][]job
	slots  int32   // slots handed out so far
	free   []int32 // freed slots, reused last in, first out
	count  int     // jobs the engine knows (not forgotten)

	// index maps a job ID to its slot: linear probing over a power-of-two
	// table; an entry is the ID's 32-bit hash in the high half and slot+1
	// in the low half (0 is an empty entry). The home position is the
	// hash's low bits, so an entry can be moved without reading its job.
	index []uint64
	mask  uint32
	// hit is where lookup last found a job: a Release looks the job up
	// and then removes it, and remove starts there instead of hashing
	// and probing again.
	hit uint32
}

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
)

// at returns the record in slot i.
func (st *jobStore) at(i int32) *job { return &st.chunks[i>>chunkBits][i&(chunkSize-1)] }

// hashID is a hash of a job ID: deterministic (no seed), so that even the
// engine's memory layout depends only on its inputs. FNV-1a over 8-byte
// words, finished with a 64-bit mix.
func hashID(s string) uint32 {
	h := uint64(14695981039346656037) ^ uint64(len(s))
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = (h ^ w) * 1099511628211
		h ^= h >> 29
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h)
}

// get returns the job with the given ID, or nil.
func (st *jobStore) get(id string) *job {
	j, _ := st.lookup(id)
	return j
}

// lookup returns the job with the given ID, or nil, and the ID's hash (for
// add).
func (st *jobStore) lookup(id string) (*job, uint32) {
	return st.lookupHash(id, hashID(id))
}

// lookupHash is lookup for an ID whose hash h is known.
func (st *jobStore) lookupHash(id string, h uint32) (*job, uint32) {
	if st.count == 0 {
		return nil, h
	}
	for p := h & st.mask; ; p = (p + 1) & st.mask {
		x := st.index[p]
		if x == 0 {
			return nil, h
		}
		if uint32(x>>32) == h {
			if j := st.at(int32(uint32(x)) - 1); j.id == id {
				st.hit = p
				return j, h
			}
		}
	}
}

// add gives a new job a slot and indexes it under id, whose hash is h and
// which must not be indexed yet. The record is zero but for the counters a
// slot keeps.
func (st *jobStore) add(id string, h uint32) *job {
	if (st.count+1)*2 > len(st.index) {
		st.grow()
	}
	var slot int32
	if n := len(st.free); n > 0 {
		slot = st.free[n-1]
		st.free = st.free[:n-1]
	} else {
		if int(st.slots>>chunkBits) == len(st.chunks) {
			st.chunks = append(st.chunks, make([]job, chunkSize))
		}
		slot = st.slots
		st.slots++
	}
	j := st.at(slot)
	j.slot = slot
	j.id = id
	p := h & st.mask
	for st.index[p] != 0 {
		p = (p + 1) & st.mask
	}
	st.index[p] = uint64(h)<<32 | uint64(uint32(slot)+1)
	st.count++
	return j
}

func (st *jobStore) grow() {
	n := max(2*len(st.index), 1024)
	old := st.index
	st.index = make([]uint64, n)
	st.mask = uint32(n - 1)
	for _, x := range old {
		if x == 0 {
			continue
		}
		p := uint32(x>>32) & st.mask
		for st.index[p] != 0 {
			p = (p + 1) & st.mask
		}
		st.index[p] = x
	}
}

// remove drops j from the index; its slot is freed once nothing names it.
func (st *jobStore) remove(j *job) {
	p := st.hit
	if p >= uint32(len(st.index)) || uint32(st.index[p]) != uint32(j.slot)+1 {
		h := hashID(j.id)
		want := uint64(h)<<32 | uint64(uint32(j.slot)+1)
		p = h & st.mask
		for st.index[p] != want {
			p = (p + 1) & st.mask
		}
	}
	// Backward-shift deletion: move later entries of the probe run into
	// the hole when their home position allows, so no tombstones.
	for q := (p + 1) & st.mask; ; q = (q + 1) & st.mask {
		x := st.index[q]
		if x == 0 {
			break
		}
		home := uint32(x>>32) & st.mask
		// x may move to p if p lies cyclically in [home, q).
		if (q-home)&st.mask >= (q-p)&st.mask {
			st.index[p] = x
			p = q
		}
	}
	st.index[p] = 0
	st.count--
	j.dead = true
	if j.refs == 0 {
		st.release(j)
	}
}

// unref drops one lazy reference to j, freeing a forgotten job's slot when
// it was the last.
func (st *jobStore) unref(j *job) {
	j.refs--
	if j.refs == 0 && j.dead {
		st.release(j)
	}
}

// release returns j's slot to the free list. What the record points to is
// let go; the counters that old references are checked against are kept,
// and so is its reservation state, emptied, for the slot's next job to
// reuse (a reservation then allocates nothing).
func (st *jobStore) release(j *job) {
	slot, ver, epoch, rs := j.slot, j.ver, j.epoch, j.resState
	*j = job{slot: slot, ver: ver, epoch: epoch}
	if rs != nil {
		*rs = resState{got: rs.got[:0], kept: rs.kept[:0], borrowed: rs.borrowed[:0], dem: rs.dem[:0]}
		j.resState = rs
	}
	st.free = append(st.free, slot)
}

// ids returns the IDs of all jobs the engine knows, in no particular order.
func (st *jobStore) ids() []string {
	var out []string
	for _, x := range st.index {
		if x != 0 {
			out = append(out, st.at(int32(uint32(x))-1).id)
		}
	}
	return out
}

package gpu

import (
	"fmt"
	"sync"
)

// Allocator hands the host's GPUs to attempts. A GPU belongs to at most one
// attempt at a time, from Claim (or Reclaim) until Release. It is safe for
// concurrent use.
type Allocator struct {
	mu    sync.Mutex
	gpus  []GPU
	owner map[string]string   // UUID -> attempt ID
	held  map[string][]string // attempt ID -> UUIDs
}

// NewAllocator returns an allocator of gs, all free.
func NewAllocator(gs []GPU) *Allocator {
	return &Allocator{gpus: append([]GPU(nil), gs...), owner: map[string]string{}, held: map[string][]string{}}
}

// GPUs returns every GPU of the allocator.
func (a *Allocator) GPUs() []GPU { return append([]GPU(nil), a.gpus...) }

// Total returns how many GPUs the allocator has.
func (a *Allocator) Total() int { return len(a.gpus) }

// Free returns how many GPUs no attempt holds.
func (a *Allocator) Free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.gpus) - len(a.owner)
}

// Claim gives n free GPUs to the attempt, lowest index first, and returns
// them. An attempt that already holds GPUs gets the same ones back (Claim is
// idempotent). When fewer than n are free it claims none and returns an
// error wrapping ErrNoFreeGPUs.
func (a *Allocator) Claim(attemptID string, n int) ([]GPU, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if us, ok := a.held[attemptID]; ok {
		return a.lookupLocked(us), nil
	}
	if n <= 0 {
		return nil, nil
	}
	var picked []string
	for _, g := range a.gpus {
		if _, busy := a.owner[g.UUID]; !busy {
			picked = append(picked, g.UUID)
			if len(picked) == n {
				break
			}
		}
	}
	if len(picked) < n {
		return nil, fmt.Errorf("%w: the attempt needs %d GPUs, %d of the host's %d are free", ErrNoFreeGPUs, n, len(a.gpus)-len(a.owner), len(a.gpus))
	}
	for _, u := range picked {
		a.owner[u] = attemptID
	}
	a.held[attemptID] = picked
	return a.lookupLocked(picked), nil
}

// Reclaim gives back to a recovered attempt the GPUs it held before a
// restart, by UUID. GPUs the host no longer has are skipped; a GPU another
// attempt holds is not taken from it, and Reclaim reports the conflict.
func (a *Allocator) Reclaim(attemptID string, uuids []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.held[attemptID]; ok {
		return nil
	}
	var got []string
	var err error
	for _, u := range uuids {
		if !a.knownLocked(u) {
			continue
		}
		if o, busy := a.owner[u]; busy {
			err = fmt.Errorf("gpu: attempt %s held GPU %s before the restart, but attempt %s holds it now", attemptID, u, o)
			continue
		}
		a.owner[u] = attemptID
		got = append(got, u)
	}
	if len(got) > 0 {
		a.held[attemptID] = got
	}
	return err
}

// Release frees the attempt's GPUs. Releasing an attempt that holds none is
// a no-op.
func (a *Allocator) Release(attemptID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.held[attemptID] {
		delete(a.owner, u)
	}
	delete(a.held, attemptID)
}

// Held returns the GPUs the attempt holds.
func (a *Allocator) Held(attemptID string) []GPU {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupLocked(a.held[attemptID])
}

func (a *Allocator) knownLocked(u string) bool {
	for _, g := range a.gpus {
		if g.UUID == u {
			return true
		}
	}
	return false
}

func (a *Allocator) lookupLocked(us []string) []GPU {
	var out []GPU
	for _, u := range us {
		for _, g := range a.gpus {
			if g.UUID == u {
				out = append(out, g)
			}
		}
	}
	return out
}

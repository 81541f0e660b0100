package engine

import (
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

	// now is the time of the pass in progress (UnixNano), which victim
	// selection compares protections with.
	now int64
	// wakeEnvs lists environments whose wake is set; nextWake is the
	// earliest of their wakes (0: none), so that a Schedule without a due
	// wake-up costs one comparison.
	wakeEnvs []*environment
	nextWake int64
	// protJob and protEnd are scratch of victim selection: the protected
	// candidate skipped whose protection ends first, and when; protCross
	// says it is of another share than the head's. ignoreProt makes
	// selection treat protected jobs as any other (to learn whether the
	// protection is what stops a head).
	protJob    *job
	protEnd    int64
	protCross  bool
	ignoreProt bool

	stats Stats

	// plans are the capacity plans by name; planList holds them by
	// job.plan (index plus 1; nil once removed). planWake is the next
	// window edge after the last Schedule (0: none); planCheck says a
	// Schedule must look at the plans although no edge is due (a plan
	// changed, or a job was parked); planTime is the now of the last look.
	plans    map[string]*plan
	planList []*plan
	// planOrder is the plans in name order; planAnnounce those with jobs
	// parked since the last pass, whose reasons the pass sends.
	planOrder    []*plan
	planAnnounce []*plan
	planWake     int64
	planCheck    bool
	planTime     int64

	// buffers are the scratch space that passes and batches reuse (see
	// memory.go).
	buffers
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

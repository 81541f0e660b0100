package engine

// The entry point of a pass: Schedule and AppendSchedule run the dirty
// environments in name order (see pass.go for one environment's pass).

import (
	"slices"
	"strings"
	"time"

	"qshare"
)

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
	t := now.UnixNano()
	e.now = t
	if e.planCheck || (e.planWake != 0 && e.planWake <= t) {
		e.applyPlans(t)
	}
	if len(e.planAnnounce) > 0 {
		e.announcePlans()
	}
	if e.nextWake != 0 && e.nextWake <= t {
		// A protection that made a head wait has ended: its environment
		// is due although nothing else changed.
		for _, env := range e.wakeEnvs {
			if env.wake != 0 && env.wake <= t {
				e.markDirty(env)
			}
		}
	}
	envs := append(e.envsToRun[:0], e.dirty...)
	e.dirty = e.dirty[:0]
	// slices.SortFunc, unlike sort.Slice, allocates nothing (names are
	// unique, so stability does not matter).
	slices.SortFunc(envs, func(a, b *environment) int { return strings.Compare(a.name, b.name) })
	for k, env := range envs {
		env.dirty = false
		if _, ok := e.envs[env.name]; !ok || e.envs[env.name] != env {
			continue
		}
		env.wake = 0 // the pass notes again what it still waits for
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
	if len(e.wakeEnvs) > 0 {
		e.updateWake()
	}
	out = e.out
	e.out = scratch
	e.stats.Decisions += uint64(len(out) - n0)
	return out
}

// NextWake returns the earliest time at which a Schedule is due although
// the engine is told nothing new: when the protection (ShareConfig.MinRunTime)
// of a job that a waiting head needs as a victim ends. ok is false when no
// such time is due. A caller that runs Schedule only on changes schedules
// one at that time too; a Schedule earlier or later is harmless, and the
// first one at or after it makes the decisions that the end of the
// protection allows.
//
// A capacity plan's window edges are such times too: its start, and its
// end less its warning.
func (e *Engine) NextWake() (at time.Time, ok bool) {
	w := e.nextWake
	if e.planWake != 0 && (w == 0 || e.planWake < w) {
		w = e.planWake
	}
	if w == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, w), true
}

// updateWake drops environments without a wake-up (or no longer known)
// from wakeEnvs and sets nextWake to the earliest left.
func (e *Engine) updateWake() {
	keep := e.wakeEnvs[:0]
	e.nextWake = 0
	for _, env := range e.wakeEnvs {
		if env.wake == 0 || e.envs[env.name] != env {
			env.inWake = false
			continue
		}
		keep = append(keep, env)
		if e.nextWake == 0 || env.wake < e.nextWake {
			e.nextWake = env.wake
		}
	}
	clear(e.wakeEnvs[len(keep):])
	e.wakeEnvs = keep
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

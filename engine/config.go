package engine

// Configuration: environments, queues and shares are set and removed here.
// A change marks its environment dirty; it takes effect at the next
// Schedule.

import (
	"math"
	"sort"

	"qshare"
)

// SetEnvironment creates or updates a service environment. Raising a limit
// takes effect at the next Schedule; lowering one below its usage preempts
// nothing, it only stops new starts until usage drops.
func (e *Engine) SetEnvironment(c EnvironmentConfig) error {
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "service environment name must not be empty")
	}
	for t, n := range c.Limits {
		if n < 0 {
			return qshare.Errorf(qshare.EINVALID, "service environment %s: maxCapacity of %s is %d; it must be at least 0", c.Name, t, n)
		}
	}
	env := e.envs[c.Name]
	if env == nil {
		env = &environment{name: c.Name, queues: map[string]*queue{}}
		e.envs[c.Name] = env
	}
	env.base = e.toVec(c.Limits)
	e.applyLimits(env)
	e.markDirty(env)
	return nil
}

// RemoveEnvironment forgets an environment. It fails with ECONFLICT while a
// queue draws on it.
func (e *Engine) RemoveEnvironment(name string) error {
	env := e.envs[name]
	if env == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "service environment %s does not exist", name)
	}
	if len(env.queues) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "service environment %s is used by %d job queue(s); remove or move them first", name, len(env.queues))
	}
	delete(e.envs, name)
	return nil
}

// SetQueue creates or updates a job queue. It fails with ENOTFOUND when the
// environment does not exist.
func (e *Engine) SetQueue(c QueueConfig) error {
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "job queue name must not be empty")
	}
	env := e.envs[c.Environment]
	if env == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "service environment %s does not exist; create it before job queue %s", c.Environment, c.Name)
	}
	q := e.queues[c.Name]
	if q == nil {
		q = &queue{name: c.Name, env: env, shares: map[string]*share{}}
		e.queues[c.Name] = q
		env.queues[q.name] = q
		e.markDirty(env)
		return nil
	}
	if q.env == env {
		return nil
	}
	if len(q.shares) > 0 && len(env.shares) > 0 {
		for _, s := range append(append([]*share(nil), env.shares...), mapShares(q.shares)...) {
			if s.fair != nil {
				return qshare.Errorf(qshare.ECONFLICT, "job queue %s cannot move to service environment %s: a fair-share share (%s) must be alone in its environment", q.name, env.name, s.name)
			}
		}
	}
	for _, s := range q.shares {
		if s.jobCount() > 0 {
			return qshare.Errorf(qshare.ECONFLICT, "job queue %s has jobs in quota share %s; it cannot move to service environment %s until they are gone", q.name, s.name, env.name)
		}
	}
	old := q.env
	delete(old.queues, q.name)
	q.env = env
	env.queues[q.name] = q
	e.reindex(old)
	e.reindex(env)
	e.markDirty(old)
	e.markDirty(env)
	return nil
}

// RemoveQueue forgets a queue. It fails with ECONFLICT while it has shares.
func (e *Engine) RemoveQueue(name string) error {
	q := e.queues[name]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist", name)
	}
	if len(q.shares) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "job queue %s still has %d quota share(s); remove them first", name, len(q.shares))
	}
	delete(q.env.queues, name)
	delete(e.queues, name)
	return nil
}

// reindex rebuilds an environment's sorted share lists.
func (e *Engine) reindex(env *environment) {
	env.shares = env.shares[:0]
	env.reserves = env.reserves[:0]
	for _, q := range env.queues {
		for _, s := range q.shares {
			env.shares = append(env.shares, s)
		}
	}
	sort.Slice(env.shares, func(i, j int) bool {
		a, b := env.shares[i], env.shares[j]
		if a.q.name != b.q.name {
			return a.q.name < b.q.name
		}
		return a.name < b.name
	})
	env.owned = env.owned[:0]
	for i, s := range env.shares {
		for t, l := range s.limit {
			env.owned.add(int32(t), l)
		}
		s.si = int32(i)
		if s.strategy == qshare.StrategyReserve {
			env.reserves = append(env.reserves, s)
		}
	}
}

// SetShare creates or updates a quota share. Lowering a limit below the
// share's usage makes its jobs above the new limit reclaimable.
func (e *Engine) SetShare(c ShareConfig) error {
	q := e.queues[c.Queue]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist; create it before quota share %s", c.Queue, c.Name)
	}
	if c.Name == "" {
		return qshare.Errorf(qshare.EINVALID, "quota share name must not be empty")
	}
	if !c.Strategy.Valid() {
		return qshare.Errorf(qshare.EINVALID, "quota share %s: strategy %q is not one of RESERVE, LEND, LEND_AND_BORROW", c.Name, c.Strategy)
	}
	if c.Strategy == qshare.StrategyLendAndBorrow && c.BorrowLimit < qshare.BorrowUnlimited {
		return qshare.Errorf(qshare.EINVALID, "quota share %s: borrowLimit %d is below -1; use -1 for unlimited or a percentage of at least 0", c.Name, c.BorrowLimit)
	}
	for t, n := range c.Limits {
		if n < 0 {
			return qshare.Errorf(qshare.EINVALID, "quota share %s: maxCapacity of %s is %d; it must be at least 0", c.Name, t, n)
		}
	}
	if c.MinRunTime < 0 {
		return qshare.Errorf(qshare.EINVALID, "quota share %s: minimum run time %s is negative", c.Name, c.MinRunTime)
	}
	if f := c.FairShare; f != nil {
		if f.DecaySeconds < 0 || f.DecaySeconds > 604800 {
			return qshare.Errorf(qshare.EINVALID, "share %s: shareDecaySeconds %d is outside 0..604800", c.Name, f.DecaySeconds)
		}
		if f.ComputeReservation < 0 || f.ComputeReservation > 99 {
			return qshare.Errorf(qshare.EINVALID, "share %s: computeReservation %d is outside 0..99", c.Name, f.ComputeReservation)
		}
		for _, w := range f.Weights {
			if !(w.Factor > 0) || math.IsInf(w.Factor, 0) {
				return qshare.Errorf(qshare.EINVALID, "share %s: weightFactor of %q is %v; it must be positive", c.Name, w.Identifier, w.Factor)
			}
		}
	}
	s := q.shares[c.Name]
	// A fair-share share is scheduled by a pass of its own: it must be
	// alone in its environment.
	for _, o := range q.env.shares {
		if o != s && (o.fair != nil || c.FairShare != nil) {
			return qshare.Errorf(qshare.ECONFLICT, "share %s: service environment %s would have a fair-share share beside another share (%s); a fair-share queue's environment serves it alone", c.Name, q.env.name, o.name)
		}
	}
	if s != nil && (s.fair != nil) != (c.FairShare != nil) && s.jobCount() > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "share %s has jobs: it cannot switch between fair share and quota share until they are gone", c.Name)
	}
	isNew := s == nil
	if isNew {
		s = &share{q: q, name: c.Name, ownWhy: "started within the own capacity of share " + c.Name}
		s.runq.st = &e.jobs
		q.shares[c.Name] = s
	}
	s.cfg = c
	s.cfg.Limits = c.Limits.Clone()
	s.whyCache = [len(s.whyCache)]cachedWhy{}
	s.strategy = c.Strategy
	s.minRun = int64(c.MinRunTime)
	switch {
	case c.FairShare == nil:
		s.fair = nil
	case s.fair == nil:
		s.fair = newFairState(*c.FairShare)
	default:
		s.fair.configure(*c.FairShare)
	}
	if c.FairShare != nil {
		fs := *c.FairShare
		fs.Weights = append([]ShareWeight(nil), fs.Weights...)
		s.cfg.FairShare = &fs
	}
	e.shareLimits(s)
	e.reindex(q.env)
	e.markDirty(q.env)
	return nil
}

// RemoveShare forgets a share. It fails with ECONFLICT while the share has
// jobs (the caller terminates and releases them first).
func (e *Engine) RemoveShare(queue, name string) error {
	q := e.queues[queue]
	if q == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist", queue)
	}
	s := q.shares[name]
	if s == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "quota share %s does not exist in job queue %s", name, queue)
	}
	if n := s.jobCount(); n > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "quota share %s still has %d job(s); terminate and release them first", name, n)
	}
	for _, p := range append([]*plan(nil), s.plans...) {
		if err := e.RemovePlan(p.cfg.Name); err != nil {
			return err
		}
	}
	delete(q.shares, name)
	e.reindex(q.env)
	e.markDirty(q.env)
	return nil
}

func mapShares(m map[string]*share) []*share {
	out := make([]*share, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

package sim

import (
	"fmt"
	"sort"
	"time"

	"qshare"
	"qshare/config"
	"qshare/engine"
)

// The capacity figures integrated over time, per share, in instances
// (summed over instance types).
const (
	mUsed     = iota // what its jobs hold
	mOwn             // the part of mUsed within its own maxCapacity
	mBorrowed        // the part of mUsed beyond it
	mLent            // its own idle capacity that borrowers use
	mIdle            // its own capacity that nobody uses
	nMetrics
)

type envAcc struct {
	name     string
	limits   qshare.Capacity
	capacity int64 // instances of every type
	shares   []*shareAcc
	queues   []string
	over     int // shares above their own maxCapacity of some type
	dirty    bool
}

type shareAcc struct {
	queue, name string
	strategy    qshare.Strategy
	limits      qshare.Capacity
	env         *envAcc
	usage       qshare.Capacity
	over        bool
	// fair marks a share identifier of a fair-share queue: it owns
	// nothing, lends nothing and borrows nothing; only its use counts.
	fair bool

	submitted, completed, failed, rejected int
	preemptCross, preemptInShare           int
	lostInstanceS                          float64
	misconfigured                          map[string]bool

	cur    [nMetrics]float64 // instances now
	acc    [nMetrics]float64 // instance-seconds so far
	last   time.Duration     // when acc was brought up to date
	series [nMetrics][]float64
}

type accounting struct {
	shares []*shareAcc
	byKey  map[string]*shareAcc
	// fairEnv maps each fair-share queue to its environment: its share
	// identifiers get their accounts as jobs name them (share).
	fairEnv map[string]*envAcc
	envs    []*envAcc
	tl      *timeline
	cross   []float64 // preemptions per bucket
	inShare []float64
	lastEnd time.Duration // the last time capacity was given back
	// verify, in tests, compares lent with the engine's view.
	verify func(env *envAcc, lent []int64, eng *engine.Engine)
	// plans are the capacity plans, whose capacity counts in their
	// share's and environment's limits while they are open.
	plans []*planAcc
}

// planAcc is a capacity plan as the accounts follow it: n of type t for
// share sh while start <= now < close (its end less its warning), times
// since the trace's t=0.
type planAcc struct {
	sh           *shareAcc
	t            string
	n            int64
	start, close time.Duration
	open         bool
}

func newAccounting(cfg *config.File, buckets int, origin time.Time) *accounting {
	a := &accounting{byKey: map[string]*shareAcc{}, fairEnv: map[string]*envAcc{}, tl: &timeline{n: buckets, width: time.Second}}
	envs := map[string]*envAcc{}
	for _, e := range cfg.ServiceEnvironments {
		ea := &envAcc{name: e.Name, limits: qshare.Limits(e.CapacityLimits)}
		ea.capacity = ea.limits.Total()
		envs[e.Name] = ea
		a.envs = append(a.envs, ea)
	}
	ec := cfg.Engine()
	queueEnv := map[string]*envAcc{}
	for _, q := range ec.Queues {
		queueEnv[q.Name] = envs[q.Environment]
		envs[q.Environment].queues = append(envs[q.Environment].queues, q.Name)
	}
	for _, s := range ec.Shares {
		if s.Name == engine.QueueShare {
			// A queue without a quota-share policy: a trace names quota
			// shares only, so nothing is ever submitted to it; but a
			// fair-share queue's jobs name share identifiers.
			if s.FairShare != nil {
				a.fairEnv[s.Queue] = queueEnv[s.Queue]
			}
			continue
		}
		sa := &shareAcc{queue: s.Queue, name: s.Name, strategy: s.Strategy, limits: s.Limits.Clone(), env: queueEnv[s.Queue],
			usage: qshare.Capacity{}, misconfigured: map[string]bool{}}
		sa.cur[mIdle] = float64(s.Limits.Total())
		for m := range sa.series {
			sa.series[m] = a.tl.register()
		}
		sa.env.shares = append(sa.env.shares, sa)
		a.shares = append(a.shares, sa)
		a.byKey[s.Queue+"/"+s.Name] = sa
	}
	for _, env := range a.envs {
		sort.Slice(env.shares, func(i, k int) bool {
			x, y := env.shares[i], env.shares[k]
			if x.queue != y.queue {
				return x.queue < y.queue
			}
			return x.name < y.name
		})
	}
	a.cross, a.inShare = a.tl.register(), a.tl.register()
	for _, p := range ec.Plans {
		if sh := a.byKey[p.Queue+"/"+p.Share]; sh != nil {
			a.plans = append(a.plans, &planAcc{sh: sh, t: p.InstanceType, n: p.Count, start: p.Start.Sub(origin), close: p.End.Add(-p.Warning).Sub(origin)})
		}
	}
	return a
}

// planEdges applies the window edges of the capacity plans that now has
// reached, as the engine does at its pass at now.
func (a *accounting) planEdges(now time.Duration) {
	for _, p := range a.plans {
		want := now >= p.start && now < p.close
		if want == p.open {
			continue
		}
		p.open = want
		n := p.n
		if !want {
			n = -n
		}
		sh, env := p.sh, p.sh.env
		a.advance(sh, now)
		sh.limits[p.t] += n
		env.limits[p.t] += n
		env.capacity += n
		a.recount(sh) // marks env dirty: settle sets the figures again
	}
}

// share returns the account of a quota share, or of a share identifier of
// a fair-share queue (created the first time a job names it); nil for
// neither.
func (a *accounting) share(queue, name string) *shareAcc {
	if sh := a.byKey[queue+"/"+name]; sh != nil {
		return sh
	}
	env := a.fairEnv[queue]
	if env == nil || name == "" {
		return nil
	}
	sh := &shareAcc{queue: queue, name: name, strategy: FairShareStrategy, fair: true, env: env,
		usage: qshare.Capacity{}, misconfigured: map[string]bool{}}
	for m := range sh.series {
		sh.series[m] = a.tl.register()
	}
	env.shares = append(env.shares, sh)
	sort.Slice(env.shares, func(i, k int) bool {
		x, y := env.shares[i], env.shares[k]
		if x.queue != y.queue {
			return x.queue < y.queue
		}
		return x.name < y.name
	})
	a.shares = append(a.shares, sh)
	a.byKey[queue+"/"+name] = sh
	return sh
}

// FairShareStrategy is the strategy column of a share identifier of a
// fair-share queue in a report.
const FairShareStrategy qshare.Strategy = "FAIR_SHARE"

// hold adds (sign +1) or removes (-1) the demand of r to its share's usage.
func (a *accounting) hold(r *run, sign int64) {
	sh := r.share
	for t, n := range r.job.Demand {
		sh.usage[t] += sign * n
	}
	if sh.fair {
		sh.env.dirty = true
		return
	}
	a.recount(sh)
}

// recount sets whether sh uses more than its own limit of some type, and
// its environment's count of such shares.
func (a *accounting) recount(sh *shareAcc) {
	over := false
	for t, n := range sh.usage {
		if n > sh.limits[t] {
			over = true
		}
	}
	if over != sh.over {
		sh.over = over
		if over {
			sh.env.over++
		} else {
			sh.env.over--
		}
	}
	sh.env.dirty = true
}

func (a *accounting) preempted(now time.Duration, cross bool) {
	a.tl.ensure(now + 1)
	b := int(now / a.tl.width)
	if cross {
		a.cross[b]++
	} else {
		a.inShare[b]++
	}
}

// settle brings the figures of every share whose environment changed at
// this instant up to now, and takes their new values from the simulator's
// own count of what each share holds.
func (a *accounting) settle(now time.Duration, eng *engine.Engine) {
	for _, env := range a.envs {
		if !env.dirty {
			continue
		}
		env.dirty = false
		a.lastEnd = now
		lent := a.lent(env)
		if a.verify != nil {
			a.verify(env, lent, eng)
		}
		for i, sh := range env.shares {
			a.advance(sh, now)
			if sh.fair {
				sh.cur = [nMetrics]float64{mUsed: float64(sh.usage.Total())}
				continue
			}
			var used, own, borrowed, idle float64
			for t, n := range sh.usage {
				used += float64(n)
				if n > sh.limits[t] {
					borrowed += float64(n - sh.limits[t])
				}
			}
			for t, l := range sh.limits {
				u := sh.usage[t]
				own += float64(min(u, l))
				if u < l {
					idle += float64(l - u)
				}
			}
			sh.cur = [nMetrics]float64{mUsed: used, mOwn: own, mBorrowed: borrowed, mLent: float64(lent[i]), mIdle: idle - float64(lent[i])}
		}
	}
}

// lent returns, for each share of env (in env.shares order), how much of its
// idle capacity borrowers use. It follows the attribution of the engine's
// own view (engine.Shares), which it would be too slow to ask at every
// instant: each borrower, in (queue, name) order, takes first from the
// capacity no share owns, then from the idle capacity of lending shares in
// (queue, name) order. A test checks the two agree at every instant.
func (a *accounting) lent(env *envAcc) []int64 {
	out := make([]int64, len(env.shares))
	if env.over == 0 {
		return out
	}
	for t, limit := range env.limits {
		unowned := limit
		for _, sh := range env.shares {
			unowned -= sh.limits[t]
		}
		// Lenders first, then (for capacity a configuration change left
		// with a borrower: a capacity plan's close) the other shares, as
		// the engine's attribution orders them.
		order := make([]int, 0, len(env.shares))
		for _, lends := range []bool{true, false} {
			for i, sh := range env.shares {
				if sh.strategy.Lends() == lends && !sh.fair {
					order = append(order, i)
				}
			}
		}
		supply := make([]int64, len(env.shares))
		for i, sh := range env.shares {
			supply[i] = sh.limits[t] - sh.usage[t]
		}
		for b, sh := range env.shares {
			over := sh.usage[t] - sh.limits[t]
			if over <= 0 || sh.fair {
				continue
			}
			if unowned > 0 {
				n := min(over, unowned)
				unowned -= n
				over -= n
			}
			for _, k := range order {
				if over == 0 {
					break
				}
				if k == b || supply[k] <= 0 {
					continue
				}
				n := min(over, supply[k])
				supply[k] -= n
				over -= n
				out[k] += n
			}
		}
	}
	return out
}

// advance integrates sh's current figures from its last update to now.
func (a *accounting) advance(sh *shareAcc, now time.Duration) {
	if now <= sh.last {
		return
	}
	dt := (now - sh.last).Seconds()
	for m := range sh.cur {
		if v := sh.cur[m]; v != 0 {
			sh.acc[m] += v * dt
			a.tl.spread(sh.series[m], sh.last, now, v)
		}
	}
	sh.last = now
}

// finish integrates every share up to end.
func (a *accounting) finish(end time.Duration) {
	for _, sh := range a.shares {
		a.advance(sh, end)
	}
	a.tl.ensure(end)
}

// timeline is a set of time series over the same buckets. The bucket width
// doubles (merging neighbours) when time runs past the last bucket, so the
// series stay small whatever the length of the run.
type timeline struct {
	n      int
	width  time.Duration
	series [][]float64
}

func (tl *timeline) register() []float64 {
	s := make([]float64, tl.n)
	tl.series = append(tl.series, s)
	return s
}

// ensure widens the buckets until t falls within them.
func (tl *timeline) ensure(t time.Duration) {
	for t > tl.width*time.Duration(tl.n) {
		for _, s := range tl.series {
			for i := 0; i < tl.n/2; i++ {
				s[i] = s[2*i] + s[2*i+1]
			}
			for i := tl.n / 2; i < tl.n; i++ {
				s[i] = 0
			}
		}
		tl.width *= 2
	}
}

// spread adds v instances over [from, to) to s, as instance-seconds per bucket.
func (tl *timeline) spread(s []float64, from, to time.Duration, v float64) {
	tl.ensure(to)
	for b := int(from / tl.width); b < tl.n; b++ {
		lo, hi := time.Duration(b)*tl.width, time.Duration(b+1)*tl.width
		if lo >= to {
			break
		}
		s[b] += v * (min(hi, to) - max(lo, from)).Seconds()
	}
}

// verifyLent returns a verify hook that compares the simulator's account of
// lent capacity with the engine's view, recording the first disagreement.
//
// The engine counts the capacity it holds for a reserved job (one whose
// victims are still stopping, or were released before the rest) in its
// share's usage; the simulator only sees jobs that run, so it cannot count
// it. While a share of the environment has a reserved job, the hook checks
// only that the engine's usage is at least the simulator's for every share;
// at every other instant usage and lent capacity must match exactly.
func verifyLent(errp *error, now func() time.Duration) func(env *envAcc, lent []int64, eng *engine.Engine) {
	return func(env *envAcc, lent []int64, eng *engine.Engine) {
		if *errp != nil {
			return
		}
		views := map[string]engine.ShareView{}
		reserved := false
		for _, q := range env.queues {
			for _, v := range eng.Shares(q) {
				views[q+"/"+v.Name] = v
				reserved = reserved || v.Reserved > 0
			}
		}
		for i, sh := range env.shares {
			if sh.fair {
				continue // the engine's view is of the queue's one share
			}
			v := views[sh.queue+"/"+sh.name]
			for _, c := range []qshare.Capacity{sh.usage, v.Usage} {
				for t := range c {
					if got, want := sh.usage[t], v.Usage[t]; got > want || (!reserved && got != want) {
						*errp = fmt.Errorf("t=%s: share %s uses %d %s by the simulator's account, %d by the engine's view (reserved jobs in the environment: %t)",
							now(), sh.name, got, t, want, reserved)
						return
					}
				}
			}
			if reserved {
				continue
			}
			if got, want := lent[i], v.Lent.Total(); got != want {
				*errp = fmt.Errorf("t=%s: share %s lends %d by the simulator's account, %d by the engine's view (usage %v, engine usage %v)",
					now(), sh.name, got, want, sh.usage, v.Usage)
				return
			}
		}
	}
}

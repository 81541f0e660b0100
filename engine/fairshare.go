package engine

// Fair share: the scheduling of a job queue with a fair-share policy, as
// AWS Batch describes it. Such a queue is one engine share (QueueShare,
// owning its whole environment), whose RUNNABLE jobs are kept per share
// identifier. The next job considered is the head of the identifier with
// the lowest decayed usage (ties: the earlier job); inside an identifier,
// priority then creation time, as in any share. There is no preemption.
//
// Usage is instance-seconds times the identifier's weight, decayed
// exponentially with the policy's time constant: between two passes a
// dt seconds apart, u ← u·e^(−dt/D) + r·D·(1 − e^(−dt/D)), where r is the
// weighted instances the identifier held during the interval. The engine
// has no clock: the interval is between passes, and a release counts at
// the pass after it (the daemon and the simulator run one at once).
//
// computeReservation C holds back (C/100)^A of each instance type's
// capacity, A being the identifiers with running jobs, for identifiers that
// have none.

import (
	"math"
	"sort"
	"strings"
	"time"

	"qshare"
)

// FairShareConfig is a fair-share scheduling policy as the engine sees it.
type FairShareConfig struct {
	// DecaySeconds is shareDecaySeconds: the time constant of usage decay;
	// 0 means 600.
	DecaySeconds int64
	// ComputeReservation is computeReservation, 0 to 99.
	ComputeReservation int64
	// Weights is shareDistribution: an identifier's weight is that of the
	// entry naming it, else of the longest entry ending in "*" whose prefix
	// it has, else 1. A lower weight gets more of the capacity.
	Weights []ShareWeight
}

// ShareWeight is one entry of a fair-share policy's shareDistribution.
type ShareWeight struct {
	Identifier string
	Factor     float64
}

// fairState is the fair-share state of a share: its identifiers.
type fairState struct {
	cfg   FairShareConfig
	decay float64 // seconds
	ids   []*fairIdent
	index map[string]int32
	// at is the time usage was last brought up to date (UnixNano; 0 never).
	at int64
}

// fairIdent is one share identifier of a fair-share share.
type fairIdent struct {
	name   string
	weight float64
	runq   runQueue
	// held is the instances its jobs hold now (all types summed); usage
	// its decayed weighted instance-seconds at fairState.at.
	held  int64
	used  vec // what its jobs hold, per type
	usage float64
	// rate is the weighted instances it held since fairState.at.
	rate float64
}

func newFairState(cfg FairShareConfig) *fairState {
	f := &fairState{index: map[string]int32{}}
	f.configure(cfg)
	return f
}

func (f *fairState) configure(cfg FairShareConfig) {
	f.cfg = cfg
	f.cfg.Weights = append([]ShareWeight(nil), cfg.Weights...)
	f.decay = float64(cfg.DecaySeconds)
	if f.decay <= 0 {
		f.decay = 600
	}
	for _, id := range f.ids {
		id.weight = f.weightOf(id.name)
	}
}

// weightOf is the weight of identifier name.
func (f *fairState) weightOf(name string) float64 {
	best, bestLen := 1.0, -1
	for _, w := range f.cfg.Weights {
		if w.Identifier == name {
			return w.Factor
		}
		if p, ok := strings.CutSuffix(w.Identifier, "*"); ok && strings.HasPrefix(name, p) && len(p) > bestLen {
			best, bestLen = w.Factor, len(p)
		}
	}
	return best
}

// ident returns the index of identifier name, creating it.
func (f *fairState) ident(name string, st *jobStore) int32 {
	if i, ok := f.index[name]; ok {
		return i
	}
	i := int32(len(f.ids))
	id := &fairIdent{name: name, weight: f.weightOf(name)}
	id.runq.st = st
	f.ids = append(f.ids, id)
	f.index[name] = i
	return i
}

// advance brings every identifier's usage up to now, at the rates of the
// interval since the last pass (what they held when it ended).
func (f *fairState) advance(now int64) {
	if f.at != 0 && now > f.at {
		dt := float64(now-f.at) / 1e9
		k := math.Exp(-dt / f.decay)
		for _, id := range f.ids {
			id.usage = id.usage*k + id.rate*f.decay*(1-k)
		}
	}
	if now > f.at || f.at == 0 {
		f.at = now
	}
}

// setRates starts a new interval at what the identifiers hold now (at the
// end of a pass: its starts included).
func (f *fairState) setRates() {
	for _, id := range f.ids {
		id.rate = float64(id.held) * id.weight
	}
}

// rq is the run queue that holds j when it is RUNNABLE.
func (s *share) rq(j *job) *runQueue {
	if s.fair != nil {
		return &s.fair.ids[j.ident].runq
	}
	if s.plans != nil && j.plan != 0 {
		// A job of a plan that is not open is parked in the plan's queue.
		if p := s.planByIdx(j.plan); p != nil && !p.open {
			return &p.rq
		}
	}
	return &s.runq
}

// runnable counts the share's RUNNABLE jobs.
func (s *share) runnable() int {
	if s.fair == nil {
		n := s.runq.Len()
		for _, p := range s.plans {
			n += p.rq.Len()
		}
		return n
	}
	n := 0
	for _, id := range s.fair.ids {
		n += id.runq.Len()
	}
	return n
}

// fairOrder returns the identifiers with a RUNNABLE job, in the order fair
// share considers them: lowest usage first, then the earlier head (creation
// time, then ID).
func (f *fairState) fairOrder(dst []*fairIdent) []*fairIdent {
	dst = dst[:0]
	for _, id := range f.ids {
		if id.runq.head() != nil {
			dst = append(dst, id)
		}
	}
	sort.Slice(dst, func(a, b int) bool {
		x, y := dst[a], dst[b]
		if x.usage != y.usage {
			return x.usage < y.usage
		}
		return fifoBefore(x.runq.head(), y.runq.head())
	})
	return dst
}

// fairHead is the job fair share considers next (nil: none).
func (s *share) fairHead() *job {
	var best *fairIdent
	for _, id := range s.fair.ids {
		h := id.runq.head()
		if h == nil {
			continue
		}
		if best == nil || id.usage < best.usage || id.usage == best.usage && fifoBefore(h, best.runq.head()) {
			best = id
		}
	}
	if best == nil {
		return nil
	}
	return best.runq.head()
}

// held adds n (negative: gives back) to the instances j's identifier holds.
func (s *share) fairHold(j *job, sign int64) {
	id := s.fair.ids[j.ident]
	for _, a := range j.demand() {
		id.held += sign * a.n
		id.used.add(a.t, sign*a.n)
	}
}

// fairPass schedules an environment whose one share is a fair-share share:
// heads in fair order start where they fit, a head that does not fit is
// passed over (the next identifier's head may), and computeReservation's
// part of the capacity is kept for identifiers without running jobs.
func (e *Engine) fairPass(env *environment, s *share, now int64) {
	f := s.fair
	f.advance(now)
	order := e.fairBuf[:0]
	for {
		order = f.fairOrder(order)
		started := false
		for _, id := range order {
			h := id.runq.head()
			if _, bad := e.misconfigured(env, s, h); bad {
				continue
			}
			if !e.fairFits(env, f, id, h) {
				continue
			}
			id.runq.popHead()
			e.stats.Runnable--
			e.hold(h, now)
			e.emitStart(h, nil, s.ownWhy)
			started = true
			break // the order depends on who runs: compute it again
		}
		if !started {
			break
		}
	}
	e.fairBuf = order[:0]
	f.setRates()
	for _, id := range f.ids {
		h := id.runq.head()
		if h == nil {
			continue
		}
		w, bad := e.misconfigured(env, s, h)
		if !bad {
			w = waitWhy{kind: whyOther}
			if e.fairFreeFits(env, h) {
				w = waitWhy{kind: whyFairReserve, a: f.cfg.ComputeReservation}
			}
		}
		if w != h.why {
			h.why = w
			h.reason = e.reasonText(env, s, h, w)
			e.out = append(e.out, Decision{Kind: DecisionWait, Job: h.id, Queue: s.q.name, Share: s.name, Reason: h.reason})
		}
	}
}

// fairFreeFits reports whether h fits the environment's free capacity.
func (e *Engine) fairFreeFits(env *environment, h *job) bool {
	for _, a := range h.demand() {
		if a.n > env.limit.at(a.t)-env.used.at(a.t) {
			return false
		}
	}
	return true
}

// fairFits reports whether head h of identifier id may start: it fits the
// free capacity, less, when id has running jobs, what computeReservation
// keeps for identifiers that have none.
func (e *Engine) fairFits(env *environment, f *fairState, id *fairIdent, h *job) bool {
	if !e.fairFreeFits(env, h) {
		return false
	}
	if id.held == 0 || f.cfg.ComputeReservation <= 0 {
		return true
	}
	active := 0
	for _, x := range f.ids {
		if x.held > 0 {
			active++
		}
	}
	frac := math.Pow(float64(f.cfg.ComputeReservation)/100, float64(active))
	for _, a := range h.demand() {
		keep := int64(math.Floor(float64(env.limit.at(a.t)) * frac))
		if a.n > env.limit.at(a.t)-env.used.at(a.t)-keep {
			return false
		}
	}
	return true
}

// FairUsage is one share identifier's standing in a fair-share queue.
type FairUsage struct {
	ShareIdentifier string
	// Weight is its weightFactor; Usage its decayed weighted
	// instance-seconds as of the last pass; Holding the instances its
	// jobs hold (all types), Capacity the same per type; Runnable its
	// RUNNABLE jobs.
	Weight   float64
	Usage    float64
	Holding  int64
	Capacity qshare.Capacity
	Runnable int
}

// FairShare returns the share identifiers of fair-share queue queue, lowest
// usage first (ties by name); nil when the queue is not a fair-share queue.
func (e *Engine) FairShare(queue string) []FairUsage {
	q := e.queues[queue]
	if q == nil {
		return nil
	}
	s := q.shares[QueueShare]
	if s == nil || s.fair == nil {
		return nil
	}
	out := make([]FairUsage, 0, len(s.fair.ids))
	for _, id := range s.fair.ids {
		out = append(out, FairUsage{ShareIdentifier: id.name, Weight: id.weight, Usage: id.usage, Holding: id.held,
			Capacity: e.toCapacity(id.used), Runnable: id.runq.Len()})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Usage != out[b].Usage {
			return out[a].Usage < out[b].Usage
		}
		return out[a].ShareIdentifier < out[b].ShareIdentifier
	})
	return out
}

// FairInterval is a span during which a job of a fair-share queue held
// capacity: Instances (all types summed) from From to To, for identifier
// ShareIdentifier.
type FairInterval struct {
	ShareIdentifier string
	Instances       int64
	From, To        time.Time
}

// RebuildFairUsage sets the usage of the identifiers of a fair-share
// queue from its jobs' history, as of now, for a caller rebuilding the
// engine after a restart (the usage is not stored): each interval counts
// as it would have, its instances times its identifier's weight, decayed
// to now; an interval that has not ended counts up to now. Identifiers
// without intervals keep their usage. It fails with ENOTFOUND when queue
// is not a fair-share queue.
func (e *Engine) RebuildFairUsage(queue string, spans []FairInterval, now time.Time) error {
	q := e.queues[queue]
	var s *share
	if q != nil {
		s = q.shares[QueueShare]
	}
	if s == nil || s.fair == nil {
		return qshare.Errorf(qshare.ENOTFOUND, "job queue %s is not a fair-share queue", queue)
	}
	f := s.fair
	t := now.UnixNano()
	f.advance(t)
	for _, sp := range spans {
		if sp.ShareIdentifier != "" {
			f.ident(sp.ShareIdentifier, &e.jobs)
		}
	}
	usage := make([]float64, len(f.ids))
	set := make([]bool, len(f.ids))
	for _, sp := range spans {
		a, b := sp.From.UnixNano(), min(sp.To.UnixNano(), t)
		if sp.To.IsZero() {
			b = t
		}
		if sp.Instances <= 0 || b <= a || sp.ShareIdentifier == "" {
			continue
		}
		i := f.index[sp.ShareIdentifier]
		set[i] = true
		// The integral of rate·e^(−(now−x)/D) over [a, b], as advance
		// accumulates it.
		far, near := float64(t-a)/1e9, float64(t-b)/1e9
		usage[i] += float64(sp.Instances) * f.ids[i].weight * f.decay * (math.Exp(-near/f.decay) - math.Exp(-far/f.decay))
	}
	for i, u := range usage {
		if set[i] {
			f.ids[i].usage = u
		}
	}
	e.markDirty(q.env)
	return nil
}

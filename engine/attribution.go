package engine

import (
	"sort"

	"qshare"
)

// Attribution: who lends to whom. The engine holds, per share, what its jobs
// use; the capacity a share uses beyond its own is charged to the parties
// whose capacity it occupies by one rule, computed here and nowhere else.
// Shares (view.go) and Lending (below) both read it, and through Lending
// the server's lending endpoint, `qshare shares` and `qshare top`.

// flow is capacity charged between two shares; s is nil for the
// environment's capacity that no share owns.
type flow struct {
	s *share
	n int64
}

// attribution is one share's part of its environment's attribution, per
// instance type name.
type attribution struct {
	borrowed, lent, idle qshare.Capacity
	// from and to list, per type, the flows in the order they were charged.
	from, to map[string][]flow
}

// attribute charges the borrowed capacity of every share of env, per
// instance type, and returns each share's part, indexed as env.shares.
//
// The rule: each borrower (a share that uses more than it owns), in the
// order of env.shares (queue, then name), is charged first to the capacity
// that no share owns, then to the idle capacity of the lending shares
// (LEND and LEND_AND_BORROW), then to the idle capacity of the other shares,
// each in the order of env.shares. That is the order in which start
// decisions name lenders. The last step only charges capacity that a
// configuration change left with a borrower: lent before its owner stopped
// lending, or beyond a limit that was lowered. Whenever the environment's
// usage is within its limits, every borrowed instance is charged, and for
// every share own use, lent and idle capacity add up to what it owns.
func (e *Engine) attribute(env *environment) []attribution {
	out := make([]attribution, len(env.shares))
	for i := range out {
		out[i] = attribution{borrowed: qshare.Capacity{}, lent: qshare.Capacity{}, idle: qshare.Capacity{},
			from: map[string][]flow{}, to: map[string][]flow{}}
	}
	type supply struct {
		i int // index in env.shares; -1 for capacity no share owns
		n int64
	}
	var sup []supply
	for t := range e.typeNames {
		ti := int32(t)
		tn := e.typeNames[t]
		var owned int64
		for _, s := range env.shares {
			owned += s.limit.at(ti)
		}
		sup = append(sup[:0], supply{-1, env.limit.at(ti) - owned})
		for _, lends := range []bool{true, false} {
			for i, s := range env.shares {
				if s.strategy.Lends() == lends {
					sup = append(sup, supply{i, s.limit.at(ti) - s.used.at(ti)})
				}
			}
		}
		for bi, b := range env.shares {
			over := b.used.at(ti) - b.limit.at(ti)
			if over <= 0 {
				continue
			}
			out[bi].borrowed[tn] = over
			for k := range sup {
				if over == 0 {
					break
				}
				if sup[k].n <= 0 || sup[k].i == bi {
					continue
				}
				n := min(over, sup[k].n)
				sup[k].n -= n
				over -= n
				var from *share
				if li := sup[k].i; li >= 0 {
					from = env.shares[li]
					out[li].lent[tn] += n
					out[li].to[tn] = addFlow(out[li].to[tn], b, n)
				}
				out[bi].from[tn] = addFlow(out[bi].from[tn], from, n)
			}
		}
		for i, s := range env.shares {
			if idle := s.limit.at(ti) - s.used.at(ti) - out[i].lent[tn]; idle > 0 {
				out[i].idle[tn] = idle
			}
		}
	}
	return out
}

func addFlow(fs []flow, s *share, n int64) []flow {
	for i := range fs {
		if fs[i].s == s {
			fs[i].n += n
			return fs
		}
	}
	return append(fs, flow{s, n})
}

// Lending returns who lends to whom among the queue's quota shares (see
// qshare.Lending), and false when the engine has no such queue. A queue
// without a quota-share policy (its one QueueShare) has no shares in it.
func (e *Engine) Lending(queue string) (qshare.Lending, bool) {
	q := e.queues[queue]
	if q == nil {
		return qshare.Lending{}, false
	}
	env := q.env
	att := e.attribute(env)
	l := qshare.Lending{JobQueue: queue, ServiceEnvironment: env.name,
		Capacity: []qshare.EnvironmentLending{}, QuotaShares: []qshare.ShareLending{}}
	for _, tn := range e.sortedTypes() {
		ti := e.typeIndex[tn]
		var owned int64
		for _, s := range env.shares {
			owned += s.limit.at(ti)
		}
		if limit, used := env.limit.at(ti), env.used.at(ti); limit > 0 || used > 0 {
			l.Capacity = append(l.Capacity, qshare.EnvironmentLending{CapacityUnit: tn, MaxCapacity: limit, InUse: used, Unowned: max(0, limit-owned)})
		}
	}
	flows := func(self *share, fs []flow) []qshare.Flow {
		var out []qshare.Flow
		for _, f := range fs {
			if f.s == nil {
				out = append(out, qshare.Flow{Unowned: true, Quantity: f.n})
			} else {
				out = append(out, qshare.Flow{QuotaShare: e.relName(self, f.s), Quantity: f.n})
			}
		}
		return out
	}
	for i, s := range env.shares {
		if s.q != q || s.name == QueueShare {
			continue
		}
		a := &att[i]
		sl := qshare.ShareLending{QuotaShareName: s.name, Strategy: s.strategy, Capacity: []qshare.CapacityLending{}}
		for _, tn := range e.sortedTypes() {
			ti := e.typeIndex[tn]
			owned, used := s.limit.at(ti), s.used.at(ti)
			if owned == 0 && used == 0 {
				continue
			}
			limit := int64(-1)
			if !s.unlimited {
				limit = s.maxUse.at(ti)
			}
			sl.Capacity = append(sl.Capacity, qshare.CapacityLending{
				CapacityUnit: tn, Owned: owned, InUse: used, Own: min(used, owned),
				Borrowed: a.borrowed[tn], BorrowedFrom: flows(s, a.from[tn]),
				Lent: a.lent[tn], LentTo: flows(s, a.to[tn]),
				Idle: a.idle[tn], Limit: limit,
			})
		}
		l.QuotaShares = append(l.QuotaShares, sl)
	}
	sort.Slice(l.QuotaShares, func(i, j int) bool { return l.QuotaShares[i].QuotaShareName < l.QuotaShares[j].QuotaShareName })
	return l, true
}

// sortedTypes returns the instance type names the engine knows, sorted.
func (e *Engine) sortedTypes() []string {
	ts := append([]string(nil), e.typeNames...)
	sort.Strings(ts)
	return ts
}

package engine

import (
	"sort"

	"qshare"
)

// JobState is where a job stands in the engine.
type JobState int

// Job states.
const (
	// JobRunnable: waiting in its share's queue.
	JobRunnable JobState = iota + 1
	// JobReserved: preemptions were issued for it; it starts when its victims are released.
	JobReserved
	// JobHolding: it holds its demand (SCHEDULED, STARTING or RUNNING).
	JobHolding
	// JobStopping: it still holds its demand, but a stop was decided or requested.
	JobStopping
)

// String returns the state's name.
func (s JobState) String() string {
	switch s {
	case JobRunnable:
		return "runnable"
	case JobReserved:
		return "reserved"
	case JobHolding:
		return "holding"
	case JobStopping:
		return "stopping"
	}
	return "unknown"
}

// JobView is a read-only view of one job.
type JobView struct {
	ID          string
	Queue       string
	Share       string
	Priority    int
	State       JobState
	Demand      qshare.Capacity
	Preemptions int
	// Reason is the last wait reason of a RUNNABLE head job.
	Reason string
}

// Job returns a view of the job, and false if the engine does not have it.
func (e *Engine) Job(id string) (JobView, bool) {
	j := e.jobs.get(id)
	if j == nil {
		return JobView{}, false
	}
	d := qshare.Capacity{}
	for _, a := range j.demand() {
		d[e.typeNames[a.t]] = a.n
	}
	return JobView{ID: j.id, Queue: j.sh.q.name, Share: j.sh.name, Priority: j.prio, State: j.state, Demand: d, Preemptions: j.preemptions, Reason: j.reason}, true
}

// ShareView is a read-only view of a quota share's capacity and head.
type ShareView struct {
	Name     string
	Strategy qshare.Strategy
	Limits   qshare.Capacity
	// MaxUsage is the most the share may ever use per type (own plus borrow cap); -1 for unlimited.
	MaxUsage qshare.Capacity
	// Usage is what its jobs hold now, stopping jobs included.
	Usage qshare.Capacity
	// Borrowed is usage beyond its own limits, and BorrowedFrom an
	// attribution of it to lenders ("" for capacity no share owns).
	Borrowed     qshare.Capacity
	BorrowedFrom map[string]qshare.Capacity
	// Lent is the part of its idle capacity that borrowers use, and LentTo
	// an attribution of it to borrowers.
	Lent   qshare.Capacity
	LentTo map[string]qshare.Capacity
	// Idle is own capacity that nobody uses.
	Idle     qshare.Capacity
	Runnable int
	Holding  int
	// Reserved counts jobs waiting for their preemption victims to stop.
	Reserved   int
	Head       string
	HeadReason string
}

// Shares returns a view of each share of the queue, in name order.
//
// Borrowed capacity is attributed by the engine's one rule (attribute, in
// attribution.go). Usage counts what jobs hold now, the partial holdings of
// reserved jobs included.
func (e *Engine) Shares(queue string) []ShareView {
	q := e.queues[queue]
	if q == nil {
		return nil
	}
	env := q.env
	views := map[*share]*ShareView{}
	for _, s := range env.shares {
		v := &ShareView{
			Name: s.name, Strategy: s.strategy,
			Limits: e.toCapacity(s.limit), Usage: e.toCapacity(s.used),
			MaxUsage: qshare.Capacity{}, BorrowedFrom: map[string]qshare.Capacity{}, LentTo: map[string]qshare.Capacity{},
			Runnable: s.runnable(), Holding: len(s.holding), Reserved: s.reserved,
		}
		for i := range s.limit {
			if s.unlimited {
				v.MaxUsage[e.typeNames[i]] = -1
			} else {
				v.MaxUsage[e.typeNames[i]] = s.maxUse.at(int32(i))
			}
		}
		if h := s.head(); h != nil {
			v.Head, v.HeadReason = h.id, h.reason
		}
		views[s] = v
	}
	att := e.attribute(env)
	for i, s := range env.shares {
		v, a := views[s], &att[i]
		v.Borrowed, v.Lent, v.Idle = a.borrowed, a.lent, a.idle
		for tn, fs := range a.from {
			for _, f := range fs {
				from := "" // capacity no share owns
				if f.s != nil {
					from = e.relName(s, f.s)
				}
				if v.BorrowedFrom[from] == nil {
					v.BorrowedFrom[from] = qshare.Capacity{}
				}
				v.BorrowedFrom[from][tn] += f.n
			}
		}
		for tn, fs := range a.to {
			for _, f := range fs {
				to := e.relName(s, f.s)
				if v.LentTo[to] == nil {
					v.LentTo[to] = qshare.Capacity{}
				}
				v.LentTo[to][tn] += f.n
			}
		}
	}
	var out []ShareView
	for _, s := range env.shares {
		if s.q == q {
			out = append(out, *views[s])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Front returns up to n RUNNABLE jobs of the queue in the order the engine
// would consider them: each share's jobs in its own order, the shares
// interleaved first come first served by the creation time of their next job.
func (e *Engine) Front(queue string, n int) []string {
	q := e.queues[queue]
	if q == nil || n <= 0 {
		return nil
	}
	var lists [][]*job
	for _, s := range q.env.shares {
		if s.q == q && s.runq.Len() > 0 {
			lists = append(lists, s.runq.top(n))
		}
		if s.q == q && s.fair != nil {
			// A fair-share queue's identifiers, each in its own order; the
			// order between them depends on usage at the next pass.
			for _, id := range s.fair.ids {
				if id.runq.Len() > 0 {
					lists = append(lists, id.runq.top(n))
				}
			}
		}
	}
	var out []string
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || fifoBefore(l[0], lists[best][0])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, lists[best][0].id)
		lists[best] = lists[best][1:]
	}
	return out
}

// Stats are counters for observability and benchmarks.
type Stats struct {
	Passes    uint64
	Decisions uint64
	Starts    uint64
	Preempts  uint64
	Runnable  int
	Holding   int
}

// Stats returns the engine's counters. Holding counts jobs that hold their
// whole demand, stopping ones included; Runnable counts queued jobs.
func (e *Engine) Stats() Stats { return e.stats }

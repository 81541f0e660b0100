// Package shareview computes and draws the picture of a job queue's quota
// shares that `qshare shares` and `qshare top` print: per share and instance
// type, what the share owns, what its own jobs use, what it lends and to
// whom, what it borrows and from whom, and what lies idle; and, for each
// share, the job at its head and why that job waits.
//
// It sits at the very end of the flow, on the client side. Who lends to whom
// is the scheduler's own attribution, which the server serves at its
// extension endpoint GET /qshare/v1/lending (qshare.Lending); this package
// never derives it again. The AWS Batch API gives the rest: the shares'
// settings (ListQuotaShares), their jobs, and each share's head
// (GetJobQueueSnapshot). Fetch gathers both; Compute and Render are pure, so
// that the picture is tested with golden files.
package shareview

import (
	"fmt"
	"sort"
	"time"

	"qshare"
)

// Unowned names, in a Flow, the capacity of the service environment that no
// quota share owns (a qshare.Flow with Unowned set). Borrowing from it is
// never reclaimed.
const Unowned = "(unowned)"

// Share is one quota share as the API describes it.
type Share struct {
	Name              string
	Strategy          qshare.Strategy
	BorrowLimit       int64
	InSharePreemption qshare.State
	State             string
	Status            string
	// Limits is the share's own capacity, per instance type.
	Limits qshare.Capacity
}

// Job is a job as the view shows it.
type Job struct {
	Name     string `json:"jobName"`
	ID       string `json:"jobId"`
	Priority int    `json:"schedulingPriority"`
	Status   string `json:"status"`
	// StatusReason is the server's reason, if it gave one.
	StatusReason string `json:"statusReason,omitempty"`
	// Demand is the job's capacity usage, per instance type.
	Demand qshare.Capacity `json:"capacityUsage,omitempty"`
	// Preemptions counts how often the job was preempted.
	Preemptions int `json:"preemptedAttemptCount,omitempty"`
}

// Input is everything the view is computed from, for one job queue.
type Input struct {
	Queue            string
	QueueState       string
	Environment      string
	EnvironmentState string
	Shares           []Share
	// Lending is the server's answer for the queue: the environment's
	// capacity, and per share who lends to whom (GET /qshare/v1/lending).
	Lending qshare.Lending
	// Active lists each share's SCHEDULED, STARTING and RUNNING jobs.
	Active map[string][]Job
	// Waiting counts each share's RUNNABLE jobs.
	Waiting map[string]int
	// Heads is the first RUNNABLE job of each share that has one.
	Heads map[string]Job
	// FairShare marks a queue with a fair-share policy: Shares are its
	// share identifiers (with the strategy FairShareStrategy, owning
	// nothing), and Capacity its environment's capacity and use (the
	// lending endpoint knows only quota shares).
	FairShare bool
	Capacity  []qshare.EnvironmentLending
}

// FairShareStrategy is the strategy column of a share identifier of a
// fair-share queue.
const FairShareStrategy qshare.Strategy = "FAIR_SHARE"

// View is the computed picture of one job queue; it is also what
// `qshare shares -o json` prints.
type View struct {
	Queue            string `json:"jobQueue"`
	QueueState       string `json:"state,omitempty"`
	Environment      string `json:"serviceEnvironment"`
	EnvironmentState string `json:"serviceEnvironmentState,omitempty"`
	// Capacity is the environment's capacity per instance type, as the
	// server's lending endpoint gives it.
	Capacity []qshare.EnvironmentLending `json:"capacity"`
	Shares   []ShareView                 `json:"quotaShares"`
	// FairShare marks a fair-share queue: Shares are its share
	// identifiers, which own, lend and borrow nothing; their Capacity is
	// what their jobs use (InUse).
	FairShare bool `json:"fairShare,omitempty"`
}

// ShareView is one share in the view.
type ShareView struct {
	Name              string          `json:"quotaShareName"`
	Strategy          qshare.Strategy `json:"strategy"`
	BorrowLimit       *int64          `json:"borrowLimit,omitempty"`
	InSharePreemption qshare.State    `json:"inSharePreemption"`
	State             string          `json:"state,omitempty"`
	Capacity          []ShareCapacity `json:"capacity"`
	Active            []Job           `json:"active"`
	Waiting           int             `json:"waiting"`
	Head              *Job            `json:"head,omitempty"`
	// Why says, in words, why the head job waits: the server's status
	// reason, or, when it gives none, what the view's numbers show.
	Why string `json:"why,omitempty"`
}

// ShareCapacity is a share's capacity of one instance type. Own + Lent +
// Idle is Owned; InUse is Own + Borrowed.
type ShareCapacity struct {
	CapacityUnit string `json:"capacityUnit"`
	// Owned is the share's maxCapacity of this type.
	Owned int64 `json:"owned"`
	// InUse is what the share's own jobs use, borrowed capacity included.
	InUse int64 `json:"inUse"`
	// Own is the part of InUse within Owned.
	Own int64 `json:"own"`
	// Borrowed is the part of InUse beyond Owned.
	Borrowed int64 `json:"borrowed"`
	// Lent is the part of Owned that other shares' jobs use.
	Lent int64 `json:"lent"`
	// Idle is the part of Owned that nobody uses.
	Idle         int64  `json:"idle"`
	LentTo       []Flow `json:"lentTo,omitempty"`
	BorrowedFrom []Flow `json:"borrowedFrom,omitempty"`
	// Limit is the most the share may use: Owned plus its borrow limit;
	// -1 means unbounded.
	Limit int64 `json:"limit"`
}

// Flow is capacity that moves from one share to another.
type Flow struct {
	// QuotaShare is the other share, or Unowned.
	QuotaShare string `json:"quotaShare"`
	Quantity   int64  `json:"quantity"`
}

// Compute draws the view from its input. The capacity figures, who lends
// to whom among them, are the server's (Input.Lending), taken as they are. A
// share the scheduler does not have yet (one just created) shows what it
// owns, idle.
func Compute(in Input) View {
	v := View{
		Queue:            in.Queue,
		QueueState:       in.QueueState,
		Environment:      in.Environment,
		EnvironmentState: in.EnvironmentState,
	}
	v.Capacity = append(v.Capacity, in.Lending.Capacity...)
	if in.FairShare {
		return computeFair(v, in)
	}
	lending := map[string]qshare.ShareLending{}
	for _, sl := range in.Lending.QuotaShares {
		lending[sl.QuotaShareName] = sl
	}
	shares := append([]Share(nil), in.Shares...)
	sort.Slice(shares, func(i, j int) bool { return shares[i].Name < shares[j].Name })
	for _, s := range shares {
		sv := ShareView{
			Name:              s.Name,
			Strategy:          s.Strategy,
			InSharePreemption: s.InSharePreemption,
			State:             s.State,
			Active:            append([]Job{}, in.Active[s.Name]...),
			Waiting:           in.Waiting[s.Name],
		}
		if s.Strategy.Borrows() {
			bl := s.BorrowLimit
			sv.BorrowLimit = &bl
		}
		sort.SliceStable(sv.Active, func(a, b int) bool {
			if sv.Active[a].Priority != sv.Active[b].Priority {
				return sv.Active[a].Priority > sv.Active[b].Priority
			}
			return sv.Active[a].Name < sv.Active[b].Name
		})
		if sl, ok := lending[s.Name]; ok {
			for _, c := range sl.Capacity {
				sv.Capacity = append(sv.Capacity, ShareCapacity{CapacityUnit: c.CapacityUnit, Owned: c.Owned, InUse: c.InUse,
					Own: c.Own, Borrowed: c.Borrowed, Lent: c.Lent, Idle: c.Idle,
					LentTo: flowsOf(c.LentTo), BorrowedFrom: flowsOf(c.BorrowedFrom), Limit: c.Limit})
			}
		} else {
			for _, t := range s.Limits.Types() {
				l := s.Limits[t]
				sv.Capacity = append(sv.Capacity, ShareCapacity{CapacityUnit: t, Owned: l, Idle: l, Limit: limitOf(s, l)})
			}
		}
		if h, ok := in.Heads[s.Name]; ok {
			h := h
			sv.Head = &h
		}
		v.Shares = append(v.Shares, sv)
	}
	for i := range v.Shares {
		if h := v.Shares[i].Head; h != nil {
			// The scheduler's own reason, when it gives one, says it best.
			v.Shares[i].Why = h.StatusReason
			if v.Shares[i].Why == "" {
				v.Shares[i].Why = explain(&v, in, &v.Shares[i], shares[i])
			}
		}
	}
	return v
}

// computeFair is Compute for a fair-share queue: one entry per share
// identifier, with what its jobs use, its running jobs, its waiting count
// and its head (with the server's reason).
func computeFair(v View, in Input) View {
	v.FairShare = true
	v.Capacity = append(v.Capacity[:0:0], in.Capacity...)
	shares := append([]Share(nil), in.Shares...)
	sort.Slice(shares, func(i, j int) bool { return shares[i].Name < shares[j].Name })
	for _, s := range shares {
		sv := ShareView{Name: s.Name, Strategy: FairShareStrategy, Active: append([]Job{}, in.Active[s.Name]...), Waiting: in.Waiting[s.Name]}
		sort.SliceStable(sv.Active, func(a, b int) bool {
			if sv.Active[a].Priority != sv.Active[b].Priority {
				return sv.Active[a].Priority > sv.Active[b].Priority
			}
			return sv.Active[a].Name < sv.Active[b].Name
		})
		use := qshare.Capacity{}
		for _, j := range sv.Active {
			use.Add(j.Demand)
		}
		for _, t := range use.Types() {
			sv.Capacity = append(sv.Capacity, ShareCapacity{CapacityUnit: t, InUse: use[t], Limit: -1})
		}
		if h, ok := in.Heads[s.Name]; ok {
			h := h
			sv.Head = &h
			sv.Why = h.StatusReason
		}
		v.Shares = append(v.Shares, sv)
	}
	return v
}

// flowsOf turns the server's flows into the view's.
func flowsOf(fs []qshare.Flow) []Flow {
	var out []Flow
	for _, f := range fs {
		name := f.QuotaShare
		if f.Unowned {
			name = Unowned
		}
		out = append(out, Flow{QuotaShare: name, Quantity: f.Quantity})
	}
	return out
}

// limitOf returns the most a share may use of a type it owns l of: l plus
// its borrow limit, or -1 when unbounded. Only a share the scheduler does
// not have yet needs it; for the others the server says.
func limitOf(s Share, l int64) int64 {
	if !s.Strategy.Borrows() {
		return l
	}
	if s.BorrowLimit < 0 {
		return -1
	}
	return l + l*s.BorrowLimit/100
}

// capOf returns the capacity entry of type t of a share view, or a zero one.
func capOf(sv *ShareView, t string) ShareCapacity {
	for _, c := range sv.Capacity {
		if c.CapacityUnit == t {
			return c
		}
	}
	return ShareCapacity{CapacityUnit: t}
}

// explain says why the head job of sv waits, from the numbers of the view
// alone: which capacity it needs, and what stands in the way. It states
// facts; it does not predict the scheduler.
func explain(v *View, in Input, sv *ShareView, s Share) string {
	h := sv.Head
	if in.QueueState == string(qshare.Disabled) {
		return "the job queue is DISABLED"
	}
	if in.EnvironmentState == string(qshare.Disabled) {
		return "the service environment is DISABLED"
	}
	if len(h.Demand) == 0 {
		return "its capacity need is unknown"
	}
	for _, t := range h.Demand.Types() {
		d := h.Demand[t]
		env := envLimit(v, t)
		if env == 0 {
			return fmt.Sprintf("needs %d × %s, and the service environment has no %s", d, t, t)
		}
		if d > env {
			return fmt.Sprintf("needs %d × %s, more than the service environment's %d", d, t, env)
		}
		c := capOf(sv, t)
		if c.Limit >= 0 && d > c.Limit {
			return fmt.Sprintf("needs %d × %s, more than the share may ever use (%d)", d, t, c.Limit)
		}
	}
	var parts []string
	for _, t := range h.Demand.Types() {
		d := h.Demand[t]
		c := capOf(sv, t)
		if d <= c.Idle {
			parts = append(parts, fmt.Sprintf("%d × %s of its own is idle: it starts at the next scheduling pass", c.Idle, t))
			continue
		}
		if d <= c.Idle+c.Lent {
			parts = append(parts, fmt.Sprintf("its own %s is lent to %s: qshare reclaims it by preempting the borrower", t, flowNames(c.LentTo)))
			continue
		}
		p := fmt.Sprintf("needs %d × %s; its own %d %s in use", d, t, c.Owned, isAre(c.Owned))
		if c.Lent > 0 {
			p = fmt.Sprintf("needs %d × %s; of its own %d, %d %s in use and %d lent to %s", d, t, c.Owned, c.Own, isAre(c.Own), c.Lent, flowNames(c.LentTo))
		}
		if c.Owned == 0 {
			p = fmt.Sprintf("needs %d × %s and owns none", d, t)
		}
		if s.Strategy.Borrows() {
			room := int64(-1)
			if c.Limit >= 0 {
				room = c.Limit - c.InUse
			}
			lendable := lendableIdle(v, sv.Name, t)
			switch {
			case room >= 0 && room < d-c.Idle:
				p += fmt.Sprintf(", and it already uses %d of the %d its borrow limit allows", c.InUse, c.Limit)
			case lendable+c.Idle >= d:
				p += fmt.Sprintf("; %d × %s can be borrowed: it starts at the next scheduling pass", lendable, t)
			case lendable > 0:
				p += fmt.Sprintf("; it may borrow more, but only %d × %s is idle to borrow%s", lendable, t, reserved(v, sv.Name, t))
			default:
				p += fmt.Sprintf("; it may borrow more, but no share lends an idle %s%s", t, reserved(v, sv.Name, t))
			}
		} else {
			p += fmt.Sprintf("; a %s share does not borrow", s.Strategy)
		}
		parts = append(parts, p)
	}
	why := join(parts)
	if s.InSharePreemption == qshare.Enabled {
		lower := 0
		for _, j := range sv.Active {
			if j.Priority < h.Priority {
				lower++
			}
		}
		if lower == 0 && len(sv.Active) > 0 {
			why += fmt.Sprintf("; in-share preemption is ENABLED, but no running job of %s has a priority below %d", sv.Name, h.Priority)
		}
	} else if len(sv.Active) > 0 {
		why += "; in-share preemption is DISABLED, so it waits for a job of " + sv.Name + " to end"
	}
	return why
}

// envLimit is the service environment's maxCapacity of type t.
func envLimit(v *View, t string) int64 {
	for _, tt := range v.Capacity {
		if tt.CapacityUnit == t {
			return tt.MaxCapacity
		}
	}
	return 0
}

// lendableIdle is the idle capacity of type t that share may borrow: the
// unowned capacity not in use, and the idle capacity of lending shares.
func lendableIdle(v *View, share, t string) int64 {
	var n int64
	for _, tt := range v.Capacity {
		if tt.CapacityUnit == t {
			var borrowedFromUnowned int64
			for i := range v.Shares {
				for _, f := range capOf(&v.Shares[i], t).BorrowedFrom {
					if f.QuotaShare == Unowned {
						borrowedFromUnowned += f.Quantity
					}
				}
			}
			n += max(0, tt.Unowned-borrowedFromUnowned)
		}
	}
	for i := range v.Shares {
		o := &v.Shares[i]
		if o.Name != share && o.Strategy.Lends() {
			n += capOf(o, t).Idle
		}
	}
	// The environment caps everything.
	for _, tt := range v.Capacity {
		if tt.CapacityUnit == t {
			n = min(n, max(0, tt.MaxCapacity-tt.InUse))
		}
	}
	return n
}

// reserved names the RESERVE shares that hold idle capacity of type t.
func reserved(v *View, share, t string) string {
	var out []string
	for i := range v.Shares {
		o := &v.Shares[i]
		if o.Name != share && !o.Strategy.Lends() {
			if idle := capOf(o, t).Idle; idle > 0 {
				out = append(out, fmt.Sprintf("%s reserves its idle %d", o.Name, idle))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + join(out) + ")"
}

func flowNames(fs []Flow) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.QuotaShare)
	}
	return join(out)
}

func isAre(n int64) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func join(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	out := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		out += ", " + p
	}
	return out + " and " + parts[len(parts)-1]
}

// Age formats how long ago t was, as "5s", "3m", "2h" or "4d".
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

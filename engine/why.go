package engine

import (
	"fmt"
	"strconv"
	"strings"

	"qshare"
)

// waitWhy is why a head job waits, kept as data so that a pass compares it
// cheaply with the last one and formats text only when it changed. It holds
// no figure that moves with every start and finish (free capacity, usage),
// so that a waiting job is not sent a new reason at every pass.
type waitWhy struct {
	kind uint8
	t    int32
	a, b int64
	c    int64
	o    *share // the RESERVE share whose idle capacity is protected, if any
	in   bool   // in-share preemption is enabled and found nothing
}

const (
	whyNone uint8 = iota
	whyEnvMax
	whyShareMax
	whyOwnNoRoom
	whyNoBorrow
	whyBorrowCap
	whyBorrowRoom
	whyOther
	// whyProtected: the victims the head needs are protected by their
	// minimum run time; a is when the protection of protBy ends, b its
	// start sequence (so that another victim is another reason), c 1 for a
	// victim of another share.
	whyProtected
	// whyPlanFull: the head, a capacity plan's job, does not fit what is
	// left of its plan (a: what the plan's jobs hold, b: its count, t its
	// type, o unused, c the plan's index); whyPlanOwn: it fits the plan
	// but not its share's own limit (its share's other jobs use the
	// plan's capacity), and a plan's job does not borrow.
	whyPlanFull
	whyPlanOwn
	// whyFairReserve: a fair-share head that fits the free capacity but
	// not beside what computeReservation (a) keeps for identifiers without
	// running jobs.
	whyFairReserve
)

// reserveHolder names a RESERVE share other than s whose idle capacity of
// type t is part of the environment's free capacity.
func (e *Engine) reserveHolder(env *environment, s *share, t int32) *share {
	if env.limit.at(t)-env.used.at(t) <= 0 || e.protected(env, s, t) == 0 {
		return nil
	}
	for _, r := range env.reserves {
		if r != s && r.limit.at(t)-r.used.at(t) > 0 {
			return r
		}
	}
	return nil
}

// classify says why the head h of s waits at the end of a pass.
func (e *Engine) classify(env *environment, s *share, h *job, blocked vec) waitWhy {
	if w, bad := e.misconfigured(env, s, h); bad {
		return w
	}
	if s.protHead == h && s.protBy != nil {
		w := waitWhy{kind: whyProtected, a: s.protEnd, b: int64(s.protBy.startSeq)}
		if s.protCross {
			w.c = 1
		}
		return w
	}
	if p := e.planOf(h); p != nil {
		if !planFit(p, h) {
			return waitWhy{kind: whyPlanFull, t: p.t, a: p.used, b: p.n, c: int64(p.idx)}
		}
		if !ownFit(s, h, nil) {
			return waitWhy{kind: whyPlanOwn, t: p.t, a: h.demandOf(p.t), b: s.limit.at(p.t), c: int64(p.idx)}
		}
	}
	w := waitWhy{kind: whyOther, in: s.cfg.InSharePreemption}
	switch {
	case ownFit(s, h, nil):
		for _, a := range h.demand() {
			if u := e.usable(env, s, a.t); a.n > u {
				w.kind, w.t, w.a, w.o = whyOwnNoRoom, a.t, a.n, e.reserveHolder(env, s, a.t)
				break
			}
		}
	case s.strategy != qshare.StrategyLendAndBorrow:
		for _, a := range h.demand() {
			if c, l := s.committed(a.t), s.limit.at(a.t); c+a.n > l {
				w.kind, w.t, w.a, w.b = whyNoBorrow, a.t, a.n, l
				break
			}
		}
	case !capFit(s, h, nil):
		for _, a := range h.demand() {
			if m, unl := s.maxUseAt(a.t); !unl && s.committed(a.t)+a.n > m {
				w.kind, w.t, w.a, w.b = whyBorrowCap, a.t, a.n, m
				break
			}
		}
	default:
		for _, a := range h.demand() {
			if u := e.usable(env, s, a.t); a.n > u-blocked.at(a.t) {
				w.kind, w.t, w.a, w.o = whyBorrowRoom, a.t, a.n, e.reserveHolder(env, s, a.t)
				if a.n <= u {
					w.c = 1 // it would fit but for capacity held back
				}
				break
			}
		}
	}
	return w
}

// formatWhy renders a wait reason. Misconfiguration reasons start with the
// exact AWS status reason.
func (e *Engine) formatWhy(env *environment, s *share, h *job, w waitWhy) string {
	tn := ""
	if w.kind != whyOther && int(w.t) < len(e.typeNames) {
		tn = e.typeNames[w.t]
	}
	var b strings.Builder
	switch w.kind {
	case whyEnvMax:
		fmt.Fprintf(&b, "%s (the job needs %d %s; service environment %s has %d)", qshare.ReasonServiceEnvironmentMaxResource, w.a, tn, env.name, w.b)
		return b.String()
	case whyShareMax:
		fmt.Fprintf(&b, "%s (the job needs %d %s; quota share %s may use at most %d)", qshare.ReasonQuotaManagementLimitExceeded, w.a, tn, s.name, w.b)
		return b.String()
	case whyOwnNoRoom:
		fmt.Fprintf(&b, "waiting for capacity: the job needs %d %s within share %s's own limit; too little is free, and shares above their own limits hold too little to reclaim", w.a, tn, s.name)
	case whyNoBorrow:
		fmt.Fprintf(&b, "waiting for capacity: the job needs %d %s, which would take share %s above its own limit of %d, and strategy %s does not borrow", w.a, tn, s.name, w.b, s.strategy)
	case whyBorrowCap:
		fmt.Fprintf(&b, "waiting for capacity: the job needs %d %s, which would take share %s above the %d its borrow limit allows", w.a, tn, s.name, w.b)
	case whyBorrowRoom:
		b.WriteString("waiting for capacity: the job must borrow to get ")
		b.WriteString(strconv.FormatInt(w.a, 10))
		b.WriteString(" ")
		b.WriteString(tn)
		b.WriteString(", and too little is free for borrowing")
		if w.c > 0 {
			b.WriteString(" (free capacity is held back for jobs waiting within their own share's limit)")
		}
	case whyPlanFull:
		p := e.planList[w.c-1]
		fmt.Fprintf(&b, "waiting for capacity plan %s: its jobs hold %d of its %d %s", p.label(), w.a, w.b, tn)
		return b.String()
	case whyPlanOwn:
		p := e.planList[w.c-1]
		fmt.Fprintf(&b, "waiting for capacity plan %s: the job needs %d %s within share %s's own limit of %d, which the share's other jobs use; a plan's job does not borrow", p.label(), w.a, tn, s.name, w.b)
		return b.String()
	case whyFairReserve:
		b.WriteString("waiting for capacity: the free capacity is held back for share identifiers without running jobs (computeReservation ")
		b.WriteString(strconv.FormatInt(w.a, 10))
		b.WriteString(")")
		return b.String()
	case whyProtected:
		v := s.protBy
		b.WriteString("waiting for capacity; ")
		if w.c == 1 {
			b.WriteString("borrower job ")
		} else {
			b.WriteString("lower-priority job ")
		}
		b.WriteString(v.id)
		b.WriteString(" of ")
		b.WriteString(e.relName(s, v.sh))
		b.WriteString(" is protected from preemption for ")
		b.WriteString(formatSpan(w.a - e.now))
		b.WriteString(" more (minimum run time ")
		b.WriteString(formatSpan(v.sh.minRun))
		b.WriteString(")")
		return b.String()
	default:
		b.WriteString("waiting for capacity")
	}
	if w.o != nil {
		b.WriteString("; the environment's free ")
		b.WriteString(tn)
		b.WriteString(" is reserved by ")
		if s != nil && s.q != w.o.q {
			b.WriteString(w.o.q.name)
			b.WriteString("/")
		}
		b.WriteString(w.o.name)
	}
	if w.in {
		b.WriteString("; in-share preemption found no lower-priority jobs whose preemption would make room")
	}
	return b.String()
}

type cachedWhy struct {
	why  waitWhy
	text string
}

// reasonText formats w for a head of s, from the share's small cache when
// a recent head waited for the same reason.
func (e *Engine) reasonText(env *environment, s *share, h *job, w waitWhy) string {
	if w.kind == whyProtected {
		return e.formatWhy(env, s, h, w) // it says how long from now: not shared
	}
	for i := range s.whyCache {
		if c := &s.whyCache[i]; c.text != "" && c.why == w {
			return c.text
		}
	}
	text := e.formatWhy(env, s, h, w)
	s.whyCache[s.whyNext] = cachedWhy{w, text}
	s.whyNext = (s.whyNext + 1) % len(s.whyCache)
	return text
}

// formatSpan renders ns nanoseconds rounded up to a second, as 4m, 4m30s,
// 1h2m or 45s.
func formatSpan(ns int64) string {
	sec := (ns + 999_999_999) / 1_000_000_000
	if sec < 1 {
		sec = 1
	}
	h, m, x := sec/3600, sec/60%60, sec%60
	var b []byte
	if h > 0 {
		b = strconv.AppendInt(b, h, 10)
		b = append(b, 'h')
	}
	if m > 0 {
		b = strconv.AppendInt(b, m, 10)
		b = append(b, 'm')
	}
	if x > 0 {
		b = strconv.AppendInt(b, x, 10)
		b = append(b, 's')
	}
	return string(b)
}

package engine

// The reason texts of starts and preemptions: who lent what to whom, and
// shares' names as seen from one another.

import (
	"strconv"
	"strings"
)

// borrowText names the lenders of a new borrowing: capacity no share owns
// first, then the idle capacity of lending shares in name order, after what
// the shares of the environment already borrow.
func (e *Engine) borrowText(env *environment, s *share, borrowed []amount, removed vec) string {
	e.text = e.appendBorrowText(e.text[:0], env, s, borrowed, removed)
	return string(e.text)
}

// lender is one source of a borrowing, as borrowText names it: a share (its
// name as seen from the borrower) or capacity no share owns, and how much.
type lender struct {
	s    *share // nil: name is the source
	name string
	n    int64
}

// appendBorrowText appends borrowText's text to dst. It formats with
// strconv into reused buffers, so that the text costs one string.
func (e *Engine) appendBorrowText(dst []byte, env *environment, s *share, borrowed []amount, removed vec) []byte {
	for i, b := range borrowed {
		if i > 0 {
			dst = append(dst, "; "...)
		}
		t := b.t
		var owned, already int64
		for _, o := range env.shares {
			owned += o.limit.at(t)
			c := o.committed(t)
			if o == s {
				c -= removed.at(t)
			}
			if over := c - o.limit.at(t); over > 0 {
				already += over
			}
		}
		srcs := e.srcs[:0]
		rest := b.n
		take := func(o *share, name string, supply int64) {
			if rest <= 0 || supply <= 0 {
				return
			}
			skip := min(already, supply)
			already -= skip
			if n := min(supply-skip, rest); n > 0 {
				srcs = append(srcs, lender{o, name, n})
				rest -= n
			}
		}
		take(nil, "capacity no share owns", env.limit.at(t)-owned)
		for _, o := range env.shares {
			if o != s && o.strategy.Lends() {
				take(o, "", o.limit.at(t)-o.committed(t))
			}
		}
		if rest > 0 {
			srcs = append(srcs, lender{nil, "the environment's free capacity", rest})
		}
		e.srcs = srcs[:0]
		tn := e.typeNames[t]
		dst = append(dst, "borrowed "...)
		dst = strconv.AppendInt(dst, b.n, 10)
		dst = append(dst, ' ')
		dst = append(dst, tn...)
		if len(srcs) == 1 {
			dst = append(dst, " from "...)
			dst = e.appendLender(dst, s, srcs[0])
			continue
		}
		dst = append(dst, " ("...)
		for k, x := range srcs {
			if k > 0 {
				dst = append(dst, ", "...)
			}
			dst = strconv.AppendInt(dst, x.n, 10)
			dst = append(dst, " from "...)
			dst = e.appendLender(dst, s, x)
		}
		dst = append(dst, ')')
	}
	return dst
}

func (e *Engine) appendLender(dst []byte, s *share, x lender) []byte {
	if x.s == nil {
		return append(dst, x.name...)
	}
	return e.appendRelName(dst, s, x.s)
}

// The reasons of a reserved job's start: when its victims have stopped,
// and when it starts before they have.
const (
	startedReleased = "started on capacity released by preempted job"
	startedFreed    = "started on capacity freed while its preempted job"
)

// earlyWhy is the reason of the start of reserved job j before its victims
// have stopped: startWhy with the other opening and " stopped" after the
// victims' names.
func (j *job) earlyWhy() string {
	w := j.startWhy
	return startedFreed + w[len(startedReleased):j.whyNames] + " stopped" + w[j.whyNames:]
}

// joinText returns a+b+c+d as one allocation.
func joinText(a string, b []byte, c string, d []byte) string {
	var sb strings.Builder
	sb.Grow(len(a) + len(b) + len(c) + len(d))
	sb.WriteString(a)
	sb.Write(b)
	sb.WriteString(c)
	sb.Write(d)
	return sb.String()
}

// relName names share o as seen from share s: its name, prefixed with its
// queue when the two are in different queues.
func (e *Engine) relName(s, o *share) string {
	if s == nil || s.q == o.q {
		return o.name
	}
	return o.q.name + "/" + o.name
}

// appendRelName appends relName(s, o) to dst.
func (e *Engine) appendRelName(dst []byte, s, o *share) []byte {
	if s != nil && s.q != o.q {
		dst = append(dst, o.q.name...)
		dst = append(dst, '/')
	}
	return append(dst, o.name...)
}

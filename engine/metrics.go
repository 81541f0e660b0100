package engine

import "strings"

// ShareWaiting is how many of a quota share's jobs wait, and why its head
// waits: what a metrics scrape reads, without the capacity attribution that
// Shares computes.
type ShareWaiting struct {
	Share string
	// Runnable counts the jobs in the share's queue, its head included.
	Runnable int
	// Reserved counts jobs for which preemptions were issued, waiting for
	// their victims to stop.
	Reserved int
	// Head is the share's head job ("" when Runnable is 0), and
	// Misconfigured whether it waits because it can never fit (its reason
	// is a MISCONFIGURATION status reason).
	Head          string
	Misconfigured bool
}

// Waiting returns a ShareWaiting for each quota share of the queue, in the
// engine's order of the environment's shares; nil for an unknown queue. It
// costs one step per share.
func (e *Engine) Waiting(queue string) []ShareWaiting {
	q := e.queues[queue]
	if q == nil {
		return nil
	}
	var out []ShareWaiting
	for _, s := range q.env.shares {
		if s.q != q || s.name == QueueShare {
			continue
		}
		w := ShareWaiting{Share: s.name, Runnable: s.runq.Len(), Reserved: s.reserved}
		if h := s.head(); h != nil {
			w.Head = h.id
			w.Misconfigured = strings.HasPrefix(h.reason, "MISCONFIGURATION:")
		}
		out = append(out, w)
	}
	return out
}

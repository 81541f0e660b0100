// Package periodic runs a function at a fixed interval until told to stop:
// the event log's fsync, the PostgreSQL store's lease renewal and a
// standby server's look at who leads each wrote that loop of a ticker and
// a select.
package periodic

import "time"

// Run calls f every period until one of stop (one or two channels) is
// closed, and returns then. The first call is one period after Run
// starts; a call under way when a stop closes ends before Run returns; a
// call that takes longer than the period delays the next rather than
// piling calls up (a time.Ticker's drops).
func Run(period time.Duration, f func(), stop ...<-chan struct{}) {
	var a, b <-chan struct{} // a nil channel never fires
	switch len(stop) {
	case 1:
		a = stop[0]
	case 2:
		a, b = stop[0], stop[1]
	default:
		panic("periodic.Run: give one or two stop channels")
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-a:
			return
		case <-b:
			return
		case <-t.C:
			f()
		}
	}
}

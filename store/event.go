package store

import "qshare/event"

// EventSink is implemented by a Store that also keeps the capacity event
// log (package event), so that the log lives with the records it describes:
// a server that takes over the store after a failover then reads and
// continues the same history, instead of one file per machine.
//
// It is optional. qshare serve --events store uses the Store itself as the
// daemon's sink when it implements EventSink, and refuses to start when it
// does not; postgres/ does, sqlite/ does not (its log is a file: --events FILE).
//
// The methods and their contract are the daemon's, daemon.EventSink, the
// one place that uses them: Append adds a batch at the end, in order, and
// when it returns nil the batch survives a crash of the process (and soon
// after, of the machine), and after a crash the log is a prefix of what
// was appended; when it returns an error none of the batch is kept. Events
// passes every event appended, oldest first, across Close and reopen; an
// unreadable event is skipped and reported with a *event.BadLinesError
// after the others. Events as the daemon writes them (a known kind, a job,
// valid UTF-8, a finite T) come back field for field. Both are called only
// while the Store is open; after Close, Append fails.
//
// store/storetest runs its event checks (RunEventSink) on every Store that
// implements EventSink.
type EventSink interface {
	// Events calls fn with every event in the log, oldest first.
	Events(fn func(event.Event)) error
	// Append appends evs, in order, as one batch; see the type's contract.
	Append(evs []event.Event) error
}

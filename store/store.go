// Package store declares how qshare persists its resources and jobs. The
// daemon keeps the working state in memory and writes every change through a
// Store before acting on it; on start it rebuilds itself from Load.
//
// Implementations live in their own packages (sqlite/, later postgres/) and
// must all pass the conformance suite in store/storetest/. A server picks
// its store by URL through a Registry (registry.go), which cmd/qshare fills
// with the stores it links, so adding a backend never touches the daemon.
// A store may also keep the capacity event log (EventSink, event.go).
package store

import (
	"context"
	"errors"

	"qshare"
)

// ErrClosed is returned (possibly wrapped) by Commit and Load on a Store that
// has been closed.
var ErrClosed = errors.New("store is closed")

// ErrLocked is returned (wrapped, with the store's name and, where known,
// the holder) by a store's open function when another open Store, in this
// process or another, owns the same storage. See "Exclusive ownership" on
// Store.
var ErrLocked = errors.New("store is in use by another qshare server")

// Store persists resources and jobs.
//
// A Store is safe for concurrent use. Commit is atomic and durable: when it
// returns nil, the whole change survives a crash of the process or the
// machine; when it returns an error, none of it was applied. Implementations
// may group concurrent commits into one transaction (group commit), as long
// as each caller sees that contract.
//
// Records come back as they were put, with two normalisations a caller must
// not depend on either way: an empty slice, map or []byte may come back nil
// (and a nil one empty), and a time comes back as the same instant (compare
// with time.Time.Equal), possibly in another location and without its
// monotonic clock reading. A put of a job whose Version is lower than
// the stored job's is ignored: the store keeps the newest. A change that
// puts a record with an empty key is rejected whole.
//
// Exclusive ownership: at most one Store is open on the same storage at a
// time, because the daemon assumes it is the only writer (two servers on one
// store would each start the same jobs). While a Store is open, opening its
// storage again, from this process or another, fails at once (it does not
// wait) with an error that wraps ErrLocked and names the store, and where it
// can, the process that holds it. Ownership ends with Close, and with the
// death of the owning process: a server that crashed, even by SIGKILL, never
// blocks the next one. sqlite/ holds an flock, which the kernel drops with
// its process; a PostgreSQL store would hold a session-level advisory lock,
// which the database drops with its connection. store/storetest checks all
// of this, the crash with a real child process that it kills.
type Store interface {
	// Load returns everything stored. Jobs are returned in CreatedAt order,
	// ties broken by ID.
	Load(ctx context.Context) (*State, error)
	// Commit applies a change atomically and durably. Puts replace a
	// record with the same key; deleting a missing key is not an error.
	Commit(ctx context.Context, c *Change) error
	// Close waits for the commits already handed over, then releases the
	// store and its ownership. Commit and Load after Close fail with
	// ErrClosed; a second Close does nothing.
	Close() error
}

// State is everything a Store holds.
type State struct {
	Environments []qshare.ServiceEnvironment
	Policies     []qshare.SchedulingPolicy
	Queues       []qshare.JobQueue
	Shares       []qshare.QuotaShare
	// Plans are the capacity plans (a qshare extension), in name order.
	Plans []qshare.CapacityPlan
	Jobs  []qshare.Job
}

// ShareKey names a quota share: shares are unique per job queue.
type ShareKey struct {
	Queue string
	Name  string
}

// Change is one atomic set of writes. Records are keyed by name (environment,
// policy, queue, capacity plan), by queue and name (share), and by ID (job). Deletes are
// applied after puts.
type Change struct {
	PutEnvironments    []qshare.ServiceEnvironment
	DeleteEnvironments []string
	PutPolicies        []qshare.SchedulingPolicy
	DeletePolicies     []string
	PutQueues          []qshare.JobQueue
	DeleteQueues       []string
	PutShares          []qshare.QuotaShare
	DeleteShares       []ShareKey
	PutPlans           []qshare.CapacityPlan
	DeletePlans        []string
	PutJobs            []qshare.Job
	DeleteJobs         []string
}

// Empty reports whether the change writes nothing.
func (c *Change) Empty() bool {
	return len(c.PutEnvironments)+len(c.DeleteEnvironments)+len(c.PutPolicies)+len(c.DeletePolicies)+
		len(c.PutQueues)+len(c.DeleteQueues)+len(c.PutShares)+len(c.DeleteShares)+
		len(c.PutPlans)+len(c.DeletePlans)+
		len(c.PutJobs)+len(c.DeleteJobs) == 0
}

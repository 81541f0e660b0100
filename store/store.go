// Package store declares how qshare persists its resources and jobs. The
// daemon keeps the working state in memory and writes every change through a
// Store before acting on it; on start it rebuilds itself from Load.
//
// Implementations live in their own packages (sqlite/, later postgres/) and
// must all pass the conformance suite in store/storetest/.
package store

import (
	"context"
	"errors"

	"qshare"
)

// ErrClosed is returned (possibly wrapped) by Commit and Load on a Store that
// has been closed.
var ErrClosed = errors.New("store is closed")

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
type Store interface {
	// Load returns everything stored. Jobs are returned in CreatedAt order,
	// ties broken by ID.
	Load(ctx context.Context) (*State, error)
	// Commit applies a change atomically and durably. Puts replace a
	// record with the same key; deleting a missing key is not an error.
	Commit(ctx context.Context, c *Change) error
	// Close releases the store. Commits after Close fail.
	Close() error
}

// State is everything a Store holds.
type State struct {
	Environments []qshare.ServiceEnvironment
	Policies     []qshare.SchedulingPolicy
	Queues       []qshare.JobQueue
	Shares       []qshare.QuotaShare
	Jobs         []qshare.Job
}

// ShareKey names a quota share: shares are unique per job queue.
type ShareKey struct {
	Queue string
	Name  string
}

// Change is one atomic set of writes. Records are keyed by name (environment,
// policy, queue), by queue and name (share), and by ID (job). Deletes are
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
	PutJobs            []qshare.Job
	DeleteJobs         []string
}

// Empty reports whether the change writes nothing.
func (c *Change) Empty() bool {
	return len(c.PutEnvironments)+len(c.DeleteEnvironments)+len(c.PutPolicies)+len(c.DeletePolicies)+
		len(c.PutQueues)+len(c.DeleteQueues)+len(c.PutShares)+len(c.DeleteShares)+
		len(c.PutJobs)+len(c.DeleteJobs) == 0
}

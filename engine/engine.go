package engine

import (
	"time"

	"qshare"
)

// Engine is the scheduler's state: configuration, jobs, and the capacity
// they hold. Create one with New.
type Engine struct {
	// TODO(engine): implementation.
}

// New returns an empty engine.
func New() *Engine { return &Engine{} }

// SetEnvironment creates or updates a service environment. Raising a limit
// takes effect at the next Schedule; lowering one below its usage preempts
// nothing, it only stops new starts until usage drops.
func (e *Engine) SetEnvironment(c EnvironmentConfig) error { panic("unimplemented") }

// RemoveEnvironment forgets an environment. It fails with ECONFLICT while a
// queue draws on it.
func (e *Engine) RemoveEnvironment(name string) error { panic("unimplemented") }

// SetQueue creates or updates a job queue. It fails with ENOTFOUND when the
// environment does not exist.
func (e *Engine) SetQueue(c QueueConfig) error { panic("unimplemented") }

// RemoveQueue forgets a queue. It fails with ECONFLICT while it has shares.
func (e *Engine) RemoveQueue(name string) error { panic("unimplemented") }

// SetShare creates or updates a quota share. Lowering a limit below the
// share's usage makes its jobs above the new limit reclaimable.
func (e *Engine) SetShare(c ShareConfig) error { panic("unimplemented") }

// RemoveShare forgets a share. It fails with ECONFLICT while the share has
// jobs (the caller terminates and releases them first).
func (e *Engine) RemoveShare(queue, name string) error { panic("unimplemented") }

// Submit adds a RUNNABLE job. It fails with ENOTFOUND for an unknown queue
// or share and ECONFLICT for a job ID the engine already has.
func (e *Engine) Submit(j JobSpec) error { panic("unimplemented") }

// Restore adds a job that already holds its demand, started at startedAt:
// the caller rebuilding the engine after a restart uses it for attempts that
// are still running. Limits are not checked: the job holds what it holds.
func (e *Engine) Restore(j JobSpec, startedAt time.Time) error { panic("unimplemented") }

// SetPriority changes a job's schedulingPriority. A RUNNABLE job moves to its
// new place; the change can trigger preemption at the next Schedule.
func (e *Engine) SetPriority(id string, priority int) error { panic("unimplemented") }

// Stopping tells the engine that the caller is stopping a job that holds
// capacity for its own reasons (termination, timeout). The job keeps holding
// its capacity until Release, but is no longer a preemption candidate. For a
// RUNNABLE or reserved job, Stopping removes it at once and it holds nothing.
func (e *Engine) Stopping(id string) error { panic("unimplemented") }

// Release reports that the job's attempt has really stopped: its capacity is
// free. With requeue the job returns to RUNNABLE in its original place (after
// a preemption with retries left, or a retry after a failure); otherwise the
// engine forgets it. Releasing an unknown job fails with ENOTFOUND.
func (e *Engine) Release(id string, requeue bool) error { panic("unimplemented") }

// Schedule runs one scheduling pass at time now and returns what it decided,
// in the order the decisions were made. The cost of a pass grows with the
// work it does, not with the number of pending jobs.
func (e *Engine) Schedule(now time.Time) []Decision { panic("unimplemented") }

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
func (e *Engine) Job(id string) (JobView, bool) { panic("unimplemented") }

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
	Idle       qshare.Capacity
	Runnable   int
	Holding    int
	Head       string
	HeadReason string
}

// Shares returns a view of each share of the queue, in name order.
func (e *Engine) Shares(queue string) []ShareView { panic("unimplemented") }

// Front returns up to n RUNNABLE jobs of the queue in the order the engine
// would consider them.
func (e *Engine) Front(queue string, n int) []string { panic("unimplemented") }

// Stats are counters for observability and benchmarks.
type Stats struct {
	Passes    uint64
	Decisions uint64
	Starts    uint64
	Preempts  uint64
	Runnable  int
	Holding   int
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { panic("unimplemented") }

// Package engine is qshare's scheduler: a deterministic, in-memory state
// machine that decides which service jobs start, which borrow idle capacity,
// and which are preempted, under the rules of AWS Batch quota management.
//
// The engine holds no I/O, no goroutines and no clock. The caller (the daemon
// in production, the simulator in a replay) tells it about configuration and
// jobs, passes the current time into Schedule, and carries out the Decisions
// it returns: it persists them, then starts or stops attempts, and reports
// back when an attempt has really stopped (Release). Same inputs, same
// decisions, byte for byte.
//
// Capacity is held by a job from the Decision that starts it until the
// caller releases it. A preempted job keeps holding its capacity until it is
// released: capacity held by a stopping job is never free. The job a
// preemption makes room for is reserved: capacity its victims give back is
// kept for it, and it starts (a DecisionStart) in the first Schedule after
// the last of them has been released.
//
// A share may protect its jobs from preemption for a minimum run time
// (ShareConfig.MinRunTime). Time alone then changes a decision: when the
// protection of a victim that a waiting job needs ends. The engine still
// keeps no clock; NextWake says when the caller should run Schedule again
// although nothing else happened.
//
// The unit of scheduling is the service environment: every quota share of
// every job queue on an environment lends to and borrows from its pool, and
// environments are independent. The rules, the order of a pass and the
// measured costs are described in docs/engine.md.
//
// The files are named after the concept they hold. The memory machinery
// that makes a million pending jobs cheap is kept apart from the
// scheduling logic, in memory.go (the job record's layout and the reused
// scratch buffers), jobs.go (the job store) and prefetch*.go with
// prefetch_*.s (loading ahead); it changes how long a load takes, never a
// decision.
//
// An Engine is not safe for concurrent use.
package engine

import (
	"time"

	"qshare"
)

// EnvironmentConfig is a service environment as the engine sees it.
type EnvironmentConfig struct {
	Name string
	// Limits is the environment's maxCapacity per instance type. Usage of a
	// type never exceeds it; a type it does not name has no capacity.
	Limits qshare.Capacity
}

// QueueConfig is a job queue as the engine sees it: a set of quota shares
// drawing on one service environment.
type QueueConfig struct {
	Name        string
	Environment string
}

// ShareConfig is a quota share as the engine sees it.
type ShareConfig struct {
	Queue string
	Name  string
	// Limits is the share's own maxCapacity per instance type.
	Limits   qshare.Capacity
	Strategy qshare.Strategy
	// BorrowLimit is a percentage of each own maxCapacity that a
	// LEND_AND_BORROW share may use on top of it; -1 means unlimited.
	BorrowLimit       int64
	InSharePreemption bool
	// Disabled shares accept no new jobs (the caller enforces that), but
	// their queued jobs still run and they still lend and borrow.
	Disabled bool
	// MinRunTime protects the share's attempts from preemption: one that
	// started less than MinRunTime before a pass's now is not a victim of
	// cross-share reclaim or in-share preemption in that pass. A head that
	// waits only for such a victim says so, and the engine asks to be woken
	// when the protection ends (NextWake). 0, the default, protects
	// nothing; it must not be negative. A qshare extension, set by the tag
	// qshare.TagMinRunTime.
	MinRunTime time.Duration
	// FairShare, when set, schedules the share by fair share over its
	// jobs' share identifiers (see FairShareConfig): the one share of a job
	// queue with a fair-share policy (QueueShare). It can be set or
	// removed only while the share has no jobs.
	FairShare *FairShareConfig
}

// JobSpec describes a job to the engine.
type JobSpec struct {
	ID    string
	Queue string
	Share string
	// Priority is schedulingPriority: higher runs first within a share.
	Priority int
	// Created orders jobs of equal priority (earlier first); ties are broken by ID.
	Created time.Time
	// Demand is the capacity the job needs, all or nothing.
	Demand qshare.Capacity
	// PreemptionRetries is preemptionRetriesBeforeTermination; -1 means unlimited.
	PreemptionRetries int
	// Preemptions is how many times the job has been preempted so far
	// (non-zero when the engine is rebuilt from a store).
	Preemptions int
	// ShareIdentifier is the job's share identifier in a fair-share share
	// (required there, ignored elsewhere).
	ShareIdentifier string
	// Plan names the capacity plan (PlanConfig.Name) the job runs on, or
	// is empty. The plan must be of the job's share, and the job must
	// need only the plan's instance type, at most its count.
	Plan string
}

// DecisionKind says what a Decision asks the caller to do.
type DecisionKind int

// The kinds of decision.
const (
	// DecisionStart: the job now holds its demand; start an attempt.
	DecisionStart DecisionKind = iota + 1
	// DecisionPreempt: stop the job's attempt (gracefully) and Release it
	// once it has stopped. If Final, the job then fails; otherwise it
	// returns to RUNNABLE in its original place.
	DecisionPreempt
	// DecisionWait: the job is at the head of its share and waits; Reason
	// says why. Emitted when the reason changes, so a caller can set the
	// job's statusReason (MISCONFIGURATION reasons among them).
	DecisionWait
)

// String returns the kind's name.
func (k DecisionKind) String() string {
	switch k {
	case DecisionStart:
		return "start"
	case DecisionPreempt:
		return "preempt"
	case DecisionWait:
		return "wait"
	}
	return "unknown"
}

// Decision is one thing the engine decided in a Schedule call.
type Decision struct {
	Kind  DecisionKind
	Job   string
	Queue string
	Share string
	// For is, on a preemption, the job it makes room for.
	For string
	// CrossShare is true for a cross-share preemption (reclaim or a lowered
	// limit), false for an in-share preemption.
	CrossShare bool
	// Final is true on a preemption that exhausts the job's preemption
	// retries: the job fails instead of returning to RUNNABLE.
	Final bool
	// Borrowed is, on a start, the part of the demand beyond the share's own
	// capacity, per type.
	Borrowed qshare.Capacity
	// StopBy is, on a preemption because a capacity plan's capacity ends,
	// when it ends: the caller stops the attempt gracefully so that it has
	// stopped by then (a grace of StopBy minus now; its usual grace when
	// that is not positive). Such a preemption is never Final and does not
	// count against the job's preemption retries. Zero otherwise.
	StopBy time.Time
	// Reason is a human-readable account that names the other party, e.g.
	// "borrowed 1 ml.g5.xlarge from QS2" or "preempted by cross-share
	// preemption to return capacity to share QS2 for job X".
	Reason string
}

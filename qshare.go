// Package qshare holds the domain types of qshare: service environments, job
// queues, scheduling policies, quota shares, service jobs and their attempts,
// capacity, and the typed error that every layer returns.
//
// It depends on the standard library alone. The engine decides with these
// types, the store persists them, the API translates them to and from the
// AWS Batch wire format, and only cmd/ wires the layers together. The
// tree, the place of the packages still to come (postgres/,
// executor/kubernetes/, executor/slurm/, auth/, metrics/, web/), and the
// rule that keeps the harnesses out of the product are in docs/layout.md.
package qshare

// Strategy says what a quota share does with capacity it does not use.
type Strategy string

// The quota-share resource sharing strategies, with their wire values.
const (
	// StrategyReserve keeps idle capacity for the share's own jobs; the share never borrows.
	StrategyReserve Strategy = "RESERVE"
	// StrategyLend lends idle capacity to borrowing shares; the share never borrows.
	StrategyLend Strategy = "LEND"
	// StrategyLendAndBorrow lends idle capacity and borrows up to the borrow limit.
	StrategyLendAndBorrow Strategy = "LEND_AND_BORROW"
)

// Valid reports whether s is one of the three strategies.
func (s Strategy) Valid() bool {
	return s == StrategyReserve || s == StrategyLend || s == StrategyLendAndBorrow
}

// Lends reports whether other shares may use this share's idle capacity.
func (s Strategy) Lends() bool { return s == StrategyLend || s == StrategyLendAndBorrow }

// Borrows reports whether a share with this strategy may use more than its own capacity.
func (s Strategy) Borrows() bool { return s == StrategyLendAndBorrow }

// State is the administrative state of a resource: ENABLED or DISABLED.
type State string

// Resource states, with their wire values.
const (
	Enabled  State = "ENABLED"
	Disabled State = "DISABLED"
)

// Valid reports whether s is ENABLED or DISABLED.
func (s State) Valid() bool { return s == Enabled || s == Disabled }

// ResourceStatus is the lifecycle status of a resource (CREATING, VALID, ...).
type ResourceStatus string

// Resource lifecycle statuses, with their wire values.
const (
	StatusCreating ResourceStatus = "CREATING"
	StatusUpdating ResourceStatus = "UPDATING"
	StatusDeleting ResourceStatus = "DELETING"
	StatusDeleted  ResourceStatus = "DELETED"
	StatusValid    ResourceStatus = "VALID"
	StatusInvalid  ResourceStatus = "INVALID"
)

// JobStatus is the status of a service job, with the AWS wire values.
type JobStatus string

// Service job statuses.
const (
	JobSubmitted JobStatus = "SUBMITTED"
	JobPending   JobStatus = "PENDING"
	JobRunnable  JobStatus = "RUNNABLE"
	JobScheduled JobStatus = "SCHEDULED"
	JobStarting  JobStatus = "STARTING"
	JobRunning   JobStatus = "RUNNING"
	JobSucceeded JobStatus = "SUCCEEDED"
	JobFailed    JobStatus = "FAILED"
)

// JobStatuses lists every job status in lifecycle order.
var JobStatuses = []JobStatus{JobSubmitted, JobPending, JobRunnable, JobScheduled, JobStarting, JobRunning, JobSucceeded, JobFailed}

// Valid reports whether s is a known job status.
func (s JobStatus) Valid() bool {
	for _, v := range JobStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether a job in this status will never run again.
func (s JobStatus) Terminal() bool { return s == JobSucceeded || s == JobFailed }

// Active reports whether a job in this status holds capacity.
func (s JobStatus) Active() bool { return s == JobScheduled || s == JobStarting || s == JobRunning }

// Status reasons that the scheduler sets on a waiting head job.
const (
	ReasonServiceEnvironmentMaxResource = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with the job queue cannot meet the capacity requirement of the job."
	ReasonQuotaManagementLimitExceeded  = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - The quota share associated with the job can never meet the capacity requirement of the job."
)

// Limits from the AWS service that qshare enforces.
const (
	MinPriority                = 0
	MaxPriority                = 9999
	MaxCapacityLimits          = 5
	MaxRetryAttempts           = 10
	MaxEvaluateOnExitRules     = 5
	MaxPayloadBytes            = 10 * 1024
	MaxSubmitRequestBytes      = 30 * 1024
	DefaultQuotaSharesPerQueue = 20
	// BorrowUnlimited is the borrowLimit that lets a LEND_AND_BORROW share borrow without bound.
	BorrowUnlimited = -1
)

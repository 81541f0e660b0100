package qshare

// Lending is who lends to whom among the quota shares of one job queue, as
// the scheduler attributes it: per share and instance type, what the share
// owns, what its jobs use of their own capacity, what they borrow and from
// whom, what it lends and to whom, and what lies idle. It is one truth,
// computed by the engine; the server serves it at GET /qshare/v1/lending,
// and `qshare shares`, `qshare top` (and any metric or dashboard) read it
// rather than derive it again.
type Lending struct {
	JobQueue           string `json:"jobQueue"`
	ServiceEnvironment string `json:"serviceEnvironment"`
	// Executor names the executor that runs the environment's jobs (its
	// tag qshare:executor, else "default"), and ExecutorHealth what that
	// executor says is wrong with the service that runs them ("" while it
	// answers). The server fills both in; the engine, which knows nothing
	// of executors, leaves them empty.
	Executor       string `json:"executor,omitempty"`
	ExecutorHealth string `json:"executorHealth,omitempty"`
	// Capacity is the service environment's capacity per instance type, in
	// type order: every type it has or that a share uses.
	Capacity []EnvironmentLending `json:"capacity"`
	// QuotaShares lists the queue's quota shares in name order; it is empty
	// for a queue without a quota-share policy.
	QuotaShares []ShareLending `json:"quotaShares"`
}

// EnvironmentLending is a service environment's capacity of one instance
// type.
type EnvironmentLending struct {
	CapacityUnit string `json:"capacityUnit"`
	// MaxCapacity is the environment's maxCapacity of the type.
	MaxCapacity int64 `json:"maxCapacity"`
	// InUse is what every share's jobs hold, stopping jobs included.
	InUse int64 `json:"inUse"`
	// Unowned is the part of MaxCapacity that no quota share owns.
	Unowned int64 `json:"unowned"`
}

// ShareLending is one quota share's part of a Lending.
type ShareLending struct {
	QuotaShareName string   `json:"quotaShareName"`
	Strategy       Strategy `json:"strategy"`
	// Capacity has an entry per instance type the share owns or uses, in
	// type order.
	Capacity []CapacityLending `json:"capacity"`
}

// CapacityLending is a share's capacity of one instance type. Own + Lent +
// Idle is Owned, and Own + Borrowed is InUse; BorrowedFrom sums to Borrowed
// and LentTo to Lent.
type CapacityLending struct {
	CapacityUnit string `json:"capacityUnit"`
	// Owned is the share's maxCapacity of the type.
	Owned int64 `json:"owned"`
	// InUse is what the share's jobs hold, borrowed capacity included.
	InUse int64 `json:"inUse"`
	// Own is the part of InUse within Owned.
	Own int64 `json:"own"`
	// Borrowed is the part of InUse beyond Owned, and BorrowedFrom whose
	// capacity it occupies, in the order the scheduler charges it.
	Borrowed     int64  `json:"borrowed"`
	BorrowedFrom []Flow `json:"borrowedFrom,omitempty"`
	// Lent is the part of Owned that other shares' jobs hold, and LentTo
	// which shares hold it.
	Lent   int64  `json:"lent"`
	LentTo []Flow `json:"lentTo,omitempty"`
	// Idle is the part of Owned that nobody uses.
	Idle int64 `json:"idle"`
	// Limit is the most the share may ever use of the type: Owned plus its
	// borrow limit; -1 means unbounded.
	Limit int64 `json:"limit"`
}

// Flow is capacity of one type that moves between two parties: the other
// share (named as "QUEUE/SHARE" when it is in another job queue), or, when
// Unowned is true, the environment's capacity that no share owns.
type Flow struct {
	QuotaShare string `json:"quotaShare,omitempty"`
	Unowned    bool   `json:"unowned,omitempty"`
	Quantity   int64  `json:"quantity"`
}

// LendingPath is where a qshare server serves who lends to whom: GET
// LendingPath[?jobQueue=NAME_OR_ARN] answers {"jobQueues": [Lending...]}.
// It is a qshare extension, outside the AWS Batch API.
const LendingPath = "/qshare/v1/lending"

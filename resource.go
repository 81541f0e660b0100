package qshare

import "time"

// CapacityLimit is a maximum number of instances of one capacity unit.
type CapacityLimit struct {
	CapacityUnit string `json:"capacityUnit"`
	MaxCapacity  int64  `json:"maxCapacity"`
}

// Limits turns an ordered list of limits into a Capacity.
func Limits(ls []CapacityLimit) Capacity {
	c := make(Capacity, len(ls))
	for _, l := range ls {
		c[l.CapacityUnit] += l.MaxCapacity
	}
	return c
}

// ServiceEnvironment is a pool of capacity, per instance type, that service
// jobs run on.
type ServiceEnvironment struct {
	Name           string            `json:"name"`
	ARN            string            `json:"arn"`
	Type           string            `json:"type"` // SAGEMAKER_TRAINING
	State          State             `json:"state"`
	Status         ResourceStatus    `json:"status"`
	StatusReason   string            `json:"statusReason,omitempty"`
	CapacityLimits []CapacityLimit   `json:"capacityLimits"`
	Tags           map[string]string `json:"tags,omitempty"`
	CreatedAt      time.Time         `json:"createdAt"`
}

// SchedulingPolicy decides how a job queue orders its jobs. qshare schedules
// queues with a QuotaSharePolicy; a FairsharePolicy is stored as given.
type SchedulingPolicy struct {
	Name             string            `json:"name"`
	ARN              string            `json:"arn"`
	QuotaSharePolicy *QuotaSharePolicy `json:"quotaSharePolicy,omitempty"`
	// FairsharePolicy is the fair-share policy as JSON, kept verbatim.
	FairsharePolicy []byte            `json:"fairsharePolicy,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
}

// QuotaSharePolicy is the quota-share scheduling policy.
type QuotaSharePolicy struct {
	IdleResourceAssignmentStrategy string `json:"idleResourceAssignmentStrategy"` // FIFO
}

// ServiceEnvironmentOrder attaches a service environment to a job queue.
type ServiceEnvironmentOrder struct {
	Order              int    `json:"order"`
	ServiceEnvironment string `json:"serviceEnvironment"` // ARN
}

// JobStateTimeLimitAction terminates a head job that has waited in a state,
// for a reason, longer than MaxTimeSeconds.
type JobStateTimeLimitAction struct {
	Reason         string `json:"reason"`
	State          string `json:"state"` // RUNNABLE
	MaxTimeSeconds int    `json:"maxTimeSeconds"`
	Action         string `json:"action"` // TERMINATE
}

// JobQueue is where service jobs are submitted. A queue with a quota-share
// policy holds quota shares.
type JobQueue struct {
	Name                     string                    `json:"name"`
	ARN                      string                    `json:"arn"`
	Type                     string                    `json:"type"` // SAGEMAKER_TRAINING
	State                    State                     `json:"state"`
	Status                   ResourceStatus            `json:"status"`
	StatusReason             string                    `json:"statusReason,omitempty"`
	Priority                 int                       `json:"priority"`
	SchedulingPolicyARN      string                    `json:"schedulingPolicyArn,omitempty"`
	ServiceEnvironmentOrder  []ServiceEnvironmentOrder `json:"serviceEnvironmentOrder,omitempty"`
	JobStateTimeLimitActions []JobStateTimeLimitAction `json:"jobStateTimeLimitActions,omitempty"`
	Tags                     map[string]string         `json:"tags,omitempty"`
	CreatedAt                time.Time                 `json:"createdAt"`
}

// QuotaShare is a virtual queue inside a job queue with its own capacity
// limits and a rule for its idle capacity.
type QuotaShare struct {
	Name           string          `json:"name"`
	ARN            string          `json:"arn"`
	JobQueue       string          `json:"jobQueue"` // queue name
	CapacityLimits []CapacityLimit `json:"capacityLimits"`
	Strategy       Strategy        `json:"strategy"`
	// BorrowLimit is a percentage of each own maxCapacity that the share may
	// borrow on top of it; BorrowUnlimited (-1) means no bound.
	BorrowLimit       int64             `json:"borrowLimit"`
	InSharePreemption State             `json:"inSharePreemption"`
	State             State             `json:"state"`
	Status            ResourceStatus    `json:"status"`
	Tags              map[string]string `json:"tags,omitempty"`
	CreatedAt         time.Time         `json:"createdAt"`
}

// RetryStrategy says how many times a failed job is tried again.
type RetryStrategy struct {
	Attempts       int              `json:"attempts"`
	EvaluateOnExit []EvaluateOnExit `json:"evaluateOnExit,omitempty"`
}

// EvaluateOnExit is one retry rule: the first rule whose glob matches the
// attempt's status reason decides between RETRY and EXIT.
type EvaluateOnExit struct {
	Action         string `json:"action"`
	OnStatusReason string `json:"onStatusReason,omitempty"`
}

// Attempt is one run of a job: from the moment the scheduler gave it capacity
// until its capacity was given back.
type Attempt struct {
	// N numbers the attempts of a job from 1.
	N int `json:"n"`
	// ID identifies the attempt for the executor: idempotency key of Start and Stop.
	ID string `json:"id"`
	// ResourceARN is the training-job ARN reported as serviceResourceId.
	ResourceARN  string    `json:"resourceArn"`
	ScheduledAt  time.Time `json:"scheduledAt"`
	StartedAt    time.Time `json:"startedAt,omitzero"`
	StoppedAt    time.Time `json:"stoppedAt,omitzero"`
	StatusReason string    `json:"statusReason,omitempty"`
	// Preempted marks an attempt that ended because the scheduler preempted it.
	Preempted bool `json:"preempted,omitempty"`
	// ExitCode is the process's exit code, when it exited on its own.
	ExitCode *int `json:"exitCode,omitempty"`
	// LogPath is where the executor wrote the attempt's output, if anywhere.
	LogPath string `json:"logPath,omitempty"`
	// Executor is the executor's opaque record of the attempt (a pid and its
	// start time, say), kept so that a restarted server can recover it.
	Executor []byte `json:"executor,omitempty"`
	// ExecutorName names the server's executor that runs the attempt (the
	// qshare:executor tag of its environment when it was scheduled); empty
	// in attempts stored before executors had names, which is "default".
	ExecutorName string `json:"executorName,omitempty"`
}

// Job is a service job with its whole history.
type Job struct {
	ID       string `json:"id"`
	ARN      string `json:"arn"`
	Name     string `json:"name"`
	JobQueue string `json:"jobQueue"` // queue name
	// QuotaShare is empty for a job in a queue without a quota-share policy.
	QuotaShare      string `json:"quotaShare,omitempty"`
	ShareIdentifier string `json:"shareIdentifier,omitempty"`
	// CapacityPlan is the ARN of the capacity plan the job runs on (its
	// payload's ResourceConfig.TrainingPlanArn), or empty.
	CapacityPlan   string    `json:"capacityPlan,omitempty"`
	ServiceJobType string    `json:"serviceJobType"`
	Priority       int       `json:"priority"`
	Status         JobStatus `json:"status"`
	StatusReason   string    `json:"statusReason,omitempty"`
	// Payload is the SageMaker CreateTrainingJob request, exactly as submitted.
	Payload string `json:"payload"`
	// Demand is the capacity the job needs, per instance type, parsed from Payload.
	Demand Capacity `json:"demand"`
	// RetryStrategy is nil when the submit gave none (one attempt).
	RetryStrategy *RetryStrategy `json:"retryStrategy,omitempty"`
	// PreemptionRetries is preemptionRetriesBeforeTermination; nil means never fail on preemption.
	PreemptionRetries *int `json:"preemptionRetries,omitempty"`
	// AttemptDurationSeconds is timeoutConfig.attemptDurationSeconds; 0 means none.
	AttemptDurationSeconds int64             `json:"attemptDurationSeconds,omitempty"`
	Tags                   map[string]string `json:"tags,omitempty"`
	ClientToken            string            `json:"clientToken,omitempty"`
	// RequestHash identifies the submit request, to tell a replay of the same
	// clientToken from a different request under it.
	RequestHash string `json:"requestHash,omitempty"`

	CreatedAt   time.Time `json:"createdAt"`
	ScheduledAt time.Time `json:"scheduledAt,omitzero"`
	StartedAt   time.Time `json:"startedAt,omitzero"`
	StoppedAt   time.Time `json:"stoppedAt,omitzero"`
	// RunnableSince is when the job last entered RUNNABLE (for time-limit actions).
	RunnableSince time.Time `json:"runnableSince,omitzero"`

	IsTerminated bool `json:"isTerminated,omitempty"`
	// Attempts lists every attempt, oldest first.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Preemptions counts the attempts that ended in a preemption.
	Preemptions int `json:"preemptions,omitempty"`
	// FailedAttempts counts attempts that failed on their own (they use up retryStrategy.attempts).
	FailedAttempts int `json:"failedAttempts,omitempty"`
	// Version increases with every change; the store keeps the newest.
	Version int64 `json:"version"`
}

// LatestAttempt returns the newest attempt, or nil.
func (j *Job) LatestAttempt() *Attempt {
	if len(j.Attempts) == 0 {
		return nil
	}
	return &j.Attempts[len(j.Attempts)-1]
}

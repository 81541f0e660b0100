package api

import (
	"encoding/json"
	"time"

	"qshare"
	"qshare/daemon"
)

// The AWS Batch restJson1 wire shapes, with their exact member names.
// Optional request members are pointers (or nil slices) so that "absent" and
// "zero" can be told apart; timestamps go out as epoch milliseconds.

type capacityLimitWire struct {
	CapacityUnit *string `json:"capacityUnit"`
	MaxCapacity  *int32  `json:"maxCapacity"`
}

// listIn converts a list member of a request element by element. An absent
// list (nil) stays nil, so that an update can tell it from an empty one; the
// first element conv refuses (i is its index) is the error.
func listIn[W, T any](ws []W, conv func(i int, w W) (T, error)) ([]T, error) {
	if ws == nil {
		return nil, nil
	}
	out := make([]T, len(ws))
	for i, w := range ws {
		t, err := conv(i, w)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func limitsIn(field string, ls []capacityLimitWire) ([]qshare.CapacityLimit, error) {
	return listIn(ls, func(i int, l capacityLimitWire) (qshare.CapacityLimit, error) {
		if l.CapacityUnit == nil {
			return qshare.CapacityLimit{}, qshare.Errorf(qshare.EINVALID, "%s[%d].capacityUnit is required: name an instance type such as ml.g5.xlarge", field, i)
		}
		if l.MaxCapacity == nil {
			return qshare.CapacityLimit{}, qshare.Errorf(qshare.EINVALID, "%s[%d].maxCapacity is required", field, i)
		}
		return qshare.CapacityLimit{CapacityUnit: *l.CapacityUnit, MaxCapacity: int64(*l.MaxCapacity)}, nil
	})
}

type capacityLimitOut struct {
	CapacityUnit string `json:"capacityUnit"`
	MaxCapacity  int64  `json:"maxCapacity"`
}

func limitsOut(ls []qshare.CapacityLimit) []capacityLimitOut {
	out := make([]capacityLimitOut, len(ls))
	for i, l := range ls {
		out[i] = capacityLimitOut{l.CapacityUnit, l.MaxCapacity}
	}
	return out
}

type capacityUsage struct {
	CapacityUnit string  `json:"capacityUnit"`
	Quantity     float64 `json:"quantity"`
}

func usageOut(c qshare.Capacity) []capacityUsage {
	out := []capacityUsage{}
	for _, t := range c.Types() {
		out = append(out, capacityUsage{t, float64(c[t])})
	}
	return out
}

func ms(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ---- service environments ----

type createEnvironmentIn struct {
	ServiceEnvironmentName string              `json:"serviceEnvironmentName"`
	ServiceEnvironmentType string              `json:"serviceEnvironmentType"`
	State                  string              `json:"state"`
	CapacityLimits         []capacityLimitWire `json:"capacityLimits"`
	Tags                   map[string]string   `json:"tags"`
}

type updateEnvironmentIn struct {
	ServiceEnvironment string              `json:"serviceEnvironment"`
	State              *string             `json:"state"`
	CapacityLimits     []capacityLimitWire `json:"capacityLimits"`
}

type environmentRef struct {
	ServiceEnvironmentName string `json:"serviceEnvironmentName"`
	ServiceEnvironmentArn  string `json:"serviceEnvironmentArn"`
}

type deleteEnvironmentIn struct {
	ServiceEnvironment string `json:"serviceEnvironment"`
}

type pageIn struct {
	MaxResults *int32 `json:"maxResults"`
	NextToken  string `json:"nextToken"`
}

type describeEnvironmentsIn struct {
	ServiceEnvironments []string `json:"serviceEnvironments"`
	pageIn
}

type environmentDetail struct {
	ServiceEnvironmentName string `json:"serviceEnvironmentName"`
	ServiceEnvironmentArn  string `json:"serviceEnvironmentArn"`
	ServiceEnvironmentType string `json:"serviceEnvironmentType"`
	State                  string `json:"state"`
	Status                 string `json:"status"`
	// StatusReason is a qshare extension (AWS's ServiceEnvironmentDetail
	// has none; the SDKs ignore it): why the host cannot give the
	// environment what its limits promise, such as too few GPUs.
	StatusReason   string             `json:"statusReason,omitempty"`
	CapacityLimits []capacityLimitOut `json:"capacityLimits"`
	Tags           map[string]string  `json:"tags,omitempty"`
}

func environmentOut(e qshare.ServiceEnvironment) environmentDetail {
	return environmentDetail{e.Name, e.ARN, e.Type, string(e.State), string(e.Status), e.StatusReason, limitsOut(e.CapacityLimits), e.Tags}
}

type describeEnvironmentsOut struct {
	ServiceEnvironments []environmentDetail `json:"serviceEnvironments"`
	NextToken           *string             `json:"nextToken,omitempty"`
}

// ---- scheduling policies ----

type quotaSharePolicyWire struct {
	IdleResourceAssignmentStrategy *string `json:"idleResourceAssignmentStrategy"`
}

func quotaSharePolicyIn(p *quotaSharePolicyWire) (*qshare.QuotaSharePolicy, error) {
	if p == nil {
		return nil, nil
	}
	if p.IdleResourceAssignmentStrategy == nil {
		return nil, qshare.Errorf(qshare.EINVALID, "quotaSharePolicy.idleResourceAssignmentStrategy is required: use FIFO")
	}
	return &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: *p.IdleResourceAssignmentStrategy}, nil
}

type createPolicyIn struct {
	Name             string                `json:"name"`
	QuotaSharePolicy *quotaSharePolicyWire `json:"quotaSharePolicy"`
	FairsharePolicy  json.RawMessage       `json:"fairsharePolicy"`
	Tags             map[string]string     `json:"tags"`
}

type updatePolicyIn struct {
	Arn              string                `json:"arn"`
	QuotaSharePolicy *quotaSharePolicyWire `json:"quotaSharePolicy"`
	FairsharePolicy  json.RawMessage       `json:"fairsharePolicy"`
}

// fairsharePolicyWire is the fair-share policy; it is checked for shape and
// stored verbatim.
type fairsharePolicyWire struct {
	ShareDecaySeconds  *int32 `json:"shareDecaySeconds"`
	ComputeReservation *int32 `json:"computeReservation"`
	ShareDistribution  []struct {
		ShareIdentifier *string  `json:"shareIdentifier"`
		WeightFactor    *float64 `json:"weightFactor"`
	} `json:"shareDistribution"`
}

type policyRef struct {
	Name string `json:"name"`
	Arn  string `json:"arn"`
}

type arnIn struct {
	Arn string `json:"arn"`
}

type describePoliciesIn struct {
	Arns []string `json:"arns"`
}

type policyDetail struct {
	Name             string                `json:"name"`
	Arn              string                `json:"arn"`
	QuotaSharePolicy *quotaSharePolicyWire `json:"quotaSharePolicy,omitempty"`
	FairsharePolicy  json.RawMessage       `json:"fairsharePolicy,omitempty"`
	Tags             map[string]string     `json:"tags,omitempty"`
}

func policyOut(p qshare.SchedulingPolicy) policyDetail {
	out := policyDetail{Name: p.Name, Arn: p.ARN, Tags: p.Tags}
	if p.QuotaSharePolicy != nil {
		s := p.QuotaSharePolicy.IdleResourceAssignmentStrategy
		out.QuotaSharePolicy = &quotaSharePolicyWire{&s}
	}
	if len(p.FairsharePolicy) > 0 {
		out.FairsharePolicy = json.RawMessage(p.FairsharePolicy)
	}
	return out
}

type describePoliciesOut struct {
	SchedulingPolicies []policyDetail `json:"schedulingPolicies"`
}

type listPoliciesOut struct {
	SchedulingPolicies []arnIn `json:"schedulingPolicies"`
	NextToken          *string `json:"nextToken,omitempty"`
}

// ---- job queues ----

type envOrderWire struct {
	Order              *int32  `json:"order"`
	ServiceEnvironment *string `json:"serviceEnvironment"`
}

func envOrderIn(os []envOrderWire) ([]qshare.ServiceEnvironmentOrder, error) {
	return listIn(os, func(i int, o envOrderWire) (qshare.ServiceEnvironmentOrder, error) {
		if o.Order == nil || o.ServiceEnvironment == nil {
			return qshare.ServiceEnvironmentOrder{}, qshare.Errorf(qshare.EINVALID, "serviceEnvironmentOrder[%d] needs both order and serviceEnvironment", i)
		}
		return qshare.ServiceEnvironmentOrder{Order: int(*o.Order), ServiceEnvironment: *o.ServiceEnvironment}, nil
	})
}

type timeLimitWire struct {
	Reason         *string `json:"reason"`
	State          *string `json:"state"`
	MaxTimeSeconds *int32  `json:"maxTimeSeconds"`
	Action         *string `json:"action"`
}

func timeLimitsIn(as []timeLimitWire) ([]qshare.JobStateTimeLimitAction, error) {
	return listIn(as, func(i int, a timeLimitWire) (qshare.JobStateTimeLimitAction, error) {
		if a.Reason == nil || a.State == nil || a.MaxTimeSeconds == nil || a.Action == nil {
			return qshare.JobStateTimeLimitAction{}, qshare.Errorf(qshare.EINVALID, "jobStateTimeLimitActions[%d] needs reason, state, maxTimeSeconds and action", i)
		}
		return qshare.JobStateTimeLimitAction{Reason: *a.Reason, State: *a.State, MaxTimeSeconds: int(*a.MaxTimeSeconds), Action: *a.Action}, nil
	})
}

type timeLimitOut struct {
	Reason         string `json:"reason"`
	State          string `json:"state"`
	MaxTimeSeconds int    `json:"maxTimeSeconds"`
	Action         string `json:"action"`
}

type createQueueIn struct {
	JobQueueName             string            `json:"jobQueueName"`
	State                    string            `json:"state"`
	SchedulingPolicyArn      string            `json:"schedulingPolicyArn"`
	Priority                 *int32            `json:"priority"`
	ComputeEnvironmentOrder  []json.RawMessage `json:"computeEnvironmentOrder"`
	ServiceEnvironmentOrder  []envOrderWire    `json:"serviceEnvironmentOrder"`
	JobQueueType             string            `json:"jobQueueType"`
	Tags                     map[string]string `json:"tags"`
	JobStateTimeLimitActions []timeLimitWire   `json:"jobStateTimeLimitActions"`
}

type updateQueueIn struct {
	JobQueue                 string            `json:"jobQueue"`
	State                    *string           `json:"state"`
	SchedulingPolicyArn      *string           `json:"schedulingPolicyArn"`
	Priority                 *int32            `json:"priority"`
	ComputeEnvironmentOrder  []json.RawMessage `json:"computeEnvironmentOrder"`
	ServiceEnvironmentOrder  []envOrderWire    `json:"serviceEnvironmentOrder"`
	JobStateTimeLimitActions []timeLimitWire   `json:"jobStateTimeLimitActions"`
}

type queueRef struct {
	JobQueueName string `json:"jobQueueName"`
	JobQueueArn  string `json:"jobQueueArn"`
}

type jobQueueIn struct {
	JobQueue string `json:"jobQueue"`
}

type describeQueuesIn struct {
	JobQueues []string `json:"jobQueues"`
	pageIn
}

type envOrderOut struct {
	Order              int    `json:"order"`
	ServiceEnvironment string `json:"serviceEnvironment"`
}

type queueDetail struct {
	JobQueueName             string            `json:"jobQueueName"`
	JobQueueArn              string            `json:"jobQueueArn"`
	State                    string            `json:"state"`
	SchedulingPolicyArn      string            `json:"schedulingPolicyArn,omitempty"`
	Status                   string            `json:"status"`
	StatusReason             string            `json:"statusReason,omitempty"`
	Priority                 int               `json:"priority"`
	ComputeEnvironmentOrder  []struct{}        `json:"computeEnvironmentOrder"`
	ServiceEnvironmentOrder  []envOrderOut     `json:"serviceEnvironmentOrder"`
	JobQueueType             string            `json:"jobQueueType"`
	Tags                     map[string]string `json:"tags,omitempty"`
	JobStateTimeLimitActions []timeLimitOut    `json:"jobStateTimeLimitActions,omitempty"`
}

func queueOut(q qshare.JobQueue) queueDetail {
	out := queueDetail{JobQueueName: q.Name, JobQueueArn: q.ARN, State: string(q.State), SchedulingPolicyArn: q.SchedulingPolicyARN,
		Status: string(q.Status), StatusReason: q.StatusReason, Priority: q.Priority, ComputeEnvironmentOrder: []struct{}{},
		ServiceEnvironmentOrder: []envOrderOut{}, JobQueueType: q.Type, Tags: q.Tags}
	for _, o := range q.ServiceEnvironmentOrder {
		out.ServiceEnvironmentOrder = append(out.ServiceEnvironmentOrder, envOrderOut{o.Order, o.ServiceEnvironment})
	}
	for _, a := range q.JobStateTimeLimitActions {
		out.JobStateTimeLimitActions = append(out.JobStateTimeLimitActions, timeLimitOut{a.Reason, a.State, a.MaxTimeSeconds, a.Action})
	}
	return out
}

type describeQueuesOut struct {
	JobQueues []queueDetail `json:"jobQueues"`
	NextToken *string       `json:"nextToken,omitempty"`
}

// ---- quota shares ----

type sharingWire struct {
	Strategy    *string `json:"strategy"`
	BorrowLimit *int32  `json:"borrowLimit"`
}

type preemptionWire struct {
	InSharePreemption *string `json:"inSharePreemption"`
}

type createShareIn struct {
	QuotaShareName               string              `json:"quotaShareName"`
	JobQueue                     string              `json:"jobQueue"`
	CapacityLimits               []capacityLimitWire `json:"capacityLimits"`
	ResourceSharingConfiguration *sharingWire        `json:"resourceSharingConfiguration"`
	PreemptionConfiguration      *preemptionWire     `json:"preemptionConfiguration"`
	State                        string              `json:"state"`
	Tags                         map[string]string   `json:"tags"`
}

type updateShareIn struct {
	QuotaShareArn                string              `json:"quotaShareArn"`
	CapacityLimits               []capacityLimitWire `json:"capacityLimits"`
	ResourceSharingConfiguration *sharingWire        `json:"resourceSharingConfiguration"`
	PreemptionConfiguration      *preemptionWire     `json:"preemptionConfiguration"`
	State                        *string             `json:"state"`
}

type shareArnIn struct {
	QuotaShareArn string `json:"quotaShareArn"`
}

type shareRef struct {
	QuotaShareName string `json:"quotaShareName"`
	QuotaShareArn  string `json:"quotaShareArn"`
}

type listSharesIn struct {
	JobQueue string `json:"jobQueue"`
	pageIn
}

type sharingOut struct {
	Strategy    string `json:"strategy"`
	BorrowLimit *int64 `json:"borrowLimit,omitempty"`
}

type preemptionOut struct {
	InSharePreemption string `json:"inSharePreemption"`
}

type shareDetail struct {
	QuotaShareName               string             `json:"quotaShareName"`
	QuotaShareArn                string             `json:"quotaShareArn"`
	JobQueueArn                  string             `json:"jobQueueArn"`
	CapacityLimits               []capacityLimitOut `json:"capacityLimits"`
	ResourceSharingConfiguration sharingOut         `json:"resourceSharingConfiguration"`
	PreemptionConfiguration      preemptionOut      `json:"preemptionConfiguration"`
	State                        string             `json:"state"`
	Status                       string             `json:"status"`
	Tags                         map[string]string  `json:"tags,omitempty"`
}

func shareOut(s qshare.QuotaShare, queueARN string, withTags bool) shareDetail {
	out := shareDetail{QuotaShareName: s.Name, QuotaShareArn: s.ARN, JobQueueArn: queueARN, CapacityLimits: limitsOut(s.CapacityLimits),
		ResourceSharingConfiguration: sharingOut{Strategy: string(s.Strategy)},
		PreemptionConfiguration:      preemptionOut{string(s.InSharePreemption)}, State: string(s.State), Status: string(s.Status)}
	if s.Strategy == qshare.StrategyLendAndBorrow {
		b := s.BorrowLimit
		out.ResourceSharingConfiguration.BorrowLimit = &b
	}
	if withTags {
		out.Tags = s.Tags
	}
	return out
}

type listSharesOut struct {
	QuotaShares []shareDetail `json:"quotaShares"`
	NextToken   *string       `json:"nextToken,omitempty"`
}

// ---- service jobs ----

type evaluateOnExitWire struct {
	Action         *string `json:"action"`
	OnStatusReason *string `json:"onStatusReason"`
}

type retryStrategyWire struct {
	Attempts       *int32               `json:"attempts"`
	EvaluateOnExit []evaluateOnExitWire `json:"evaluateOnExit"`
}

func retryIn(r *retryStrategyWire) (*qshare.RetryStrategy, error) {
	if r == nil {
		return nil, nil
	}
	if r.Attempts == nil {
		return nil, qshare.Errorf(qshare.EINVALID, "retryStrategy.attempts is required: use 1 to 10")
	}
	if *r.Attempts < 1 || *r.Attempts > qshare.MaxRetryAttempts {
		return nil, qshare.Errorf(qshare.EINVALID, "retryStrategy.attempts %d is out of range: use 1 to %d (the first attempt included)", *r.Attempts, qshare.MaxRetryAttempts)
	}
	out := &qshare.RetryStrategy{Attempts: int(*r.Attempts)}
	for i, e := range r.EvaluateOnExit {
		if e.Action == nil {
			return nil, qshare.Errorf(qshare.EINVALID, "retryStrategy.evaluateOnExit[%d].action is required: use RETRY or EXIT", i)
		}
		rule := qshare.EvaluateOnExit{Action: *e.Action}
		if e.OnStatusReason != nil {
			rule.OnStatusReason = *e.OnStatusReason
		}
		out.EvaluateOnExit = append(out.EvaluateOnExit, rule)
	}
	return out, nil
}

type retryStrategyOut struct {
	Attempts       int                 `json:"attempts"`
	EvaluateOnExit []evaluateOnExitOut `json:"evaluateOnExit,omitempty"`
}

type evaluateOnExitOut struct {
	Action         string `json:"action"`
	OnStatusReason string `json:"onStatusReason,omitempty"`
}

type jobPreemptionWire struct {
	PreemptionRetriesBeforeTermination *int32 `json:"preemptionRetriesBeforeTermination"`
}

type timeoutWire struct {
	AttemptDurationSeconds *int32 `json:"attemptDurationSeconds"`
}

type submitIn struct {
	JobName                 string             `json:"jobName"`
	JobQueue                string             `json:"jobQueue"`
	RetryStrategy           *retryStrategyWire `json:"retryStrategy,omitempty"`
	SchedulingPriority      *int32             `json:"schedulingPriority,omitempty"`
	ServiceRequestPayload   string             `json:"serviceRequestPayload"`
	ServiceJobType          string             `json:"serviceJobType"`
	ShareIdentifier         string             `json:"shareIdentifier,omitempty"`
	QuotaShareName          string             `json:"quotaShareName,omitempty"`
	PreemptionConfiguration *jobPreemptionWire `json:"preemptionConfiguration,omitempty"`
	TimeoutConfig           *timeoutWire       `json:"timeoutConfig,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	ClientToken             string             `json:"clientToken,omitempty"`
}

type jobRef struct {
	JobArn  string `json:"jobArn"`
	JobName string `json:"jobName"`
	JobId   string `json:"jobId"`
}

type updateJobIn struct {
	JobId              string `json:"jobId"`
	SchedulingPriority *int32 `json:"schedulingPriority"`
}

type jobIdIn struct {
	JobId string `json:"jobId"`
}

type terminateIn struct {
	JobId  string `json:"jobId"`
	Reason string `json:"reason"`
}

type terminateManyIn struct {
	Jobs   []string `json:"jobs"`
	Reason string   `json:"reason"`
}

type terminateError struct {
	Job     string `json:"job"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

type terminateManyOut struct {
	Successful []string         `json:"successful"`
	Errors     []terminateError `json:"errors"`
}

type keyValues struct {
	Name   *string  `json:"name"`
	Values []string `json:"values"`
}

type listJobsIn struct {
	JobQueue  string      `json:"jobQueue"`
	JobStatus string      `json:"jobStatus"`
	Filters   []keyValues `json:"filters"`
	pageIn
}

type serviceResourceID struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type attemptDetail struct {
	ServiceResourceId *serviceResourceID `json:"serviceResourceId,omitempty"`
	StartedAt         *int64             `json:"startedAt,omitempty"`
	StoppedAt         *int64             `json:"stoppedAt,omitempty"`
	StatusReason      string             `json:"statusReason,omitempty"`
	// Executor, a qshare extension, names the server's executor that ran
	// the attempt when it is not the one named default (docs/executors.md).
	Executor string `json:"executor,omitempty"`
}

func attemptOut(a qshare.Attempt) attemptDetail {
	out := attemptDetail{StartedAt: ms(a.StartedAt), StoppedAt: ms(a.StoppedAt), StatusReason: a.StatusReason, Executor: a.ExecutorName}
	if a.ResourceARN != "" {
		out.ServiceResourceId = &serviceResourceID{"TrainingJobArn", a.ResourceARN}
	}
	return out
}

type latestAttempt struct {
	ServiceResourceId *serviceResourceID `json:"serviceResourceId,omitempty"`
}

// latestOut is a job's latestAttempt: nil until an attempt has a training job.
func latestOut(j *qshare.Job) *latestAttempt {
	if a := j.LatestAttempt(); a != nil && a.ResourceARN != "" {
		return &latestAttempt{&serviceResourceID{"TrainingJobArn", a.ResourceARN}}
	}
	return nil
}

type preemptionSummary struct {
	PreemptedAttemptCount   int             `json:"preemptedAttemptCount"`
	RecentPreemptedAttempts []attemptDetail `json:"recentPreemptedAttempts"`
}

type jobDetail struct {
	Attempts                []attemptDetail    `json:"attempts"`
	CapacityUsage           []capacityUsage    `json:"capacityUsage"`
	CreatedAt               *int64             `json:"createdAt,omitempty"`
	IsTerminated            bool               `json:"isTerminated"`
	JobArn                  string             `json:"jobArn"`
	JobId                   string             `json:"jobId"`
	JobName                 string             `json:"jobName"`
	JobQueue                string             `json:"jobQueue"`
	LatestAttempt           *latestAttempt     `json:"latestAttempt,omitempty"`
	PreemptionConfiguration *jobPreemptionWire `json:"preemptionConfiguration,omitempty"`
	PreemptionSummary       *preemptionSummary `json:"preemptionSummary,omitempty"`
	QuotaShareName          string             `json:"quotaShareName,omitempty"`
	RetryStrategy           *retryStrategyOut  `json:"retryStrategy,omitempty"`
	ScheduledAt             *int64             `json:"scheduledAt,omitempty"`
	SchedulingPriority      int                `json:"schedulingPriority"`
	ServiceJobType          string             `json:"serviceJobType"`
	ServiceRequestPayload   string             `json:"serviceRequestPayload"`
	ShareIdentifier         string             `json:"shareIdentifier,omitempty"`
	StartedAt               *int64             `json:"startedAt,omitempty"`
	Status                  string             `json:"status"`
	StatusReason            string             `json:"statusReason,omitempty"`
	StoppedAt               *int64             `json:"stoppedAt,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	TimeoutConfig           *timeoutWire       `json:"timeoutConfig,omitempty"`
}

// recentPreempted is how many preempted attempts preemptionSummary lists.
const recentPreempted = 10

func jobOut(j *qshare.Job, queueARN string) jobDetail {
	out := jobDetail{Attempts: []attemptDetail{}, CapacityUsage: usageOut(j.Demand), CreatedAt: ms(j.CreatedAt),
		IsTerminated: j.IsTerminated, JobArn: j.ARN, JobId: j.ID, JobName: j.Name, JobQueue: queueARN,
		QuotaShareName: j.QuotaShare, ScheduledAt: ms(j.ScheduledAt), SchedulingPriority: j.Priority,
		ServiceJobType: j.ServiceJobType, ServiceRequestPayload: j.Payload, ShareIdentifier: j.ShareIdentifier,
		StartedAt: ms(j.StartedAt), Status: string(j.Status), StatusReason: j.StatusReason, StoppedAt: ms(j.StoppedAt), Tags: j.Tags}
	for _, a := range j.Attempts {
		out.Attempts = append(out.Attempts, attemptOut(a))
	}
	out.LatestAttempt = latestOut(j)
	if j.PreemptionRetries != nil {
		n := int32(*j.PreemptionRetries)
		out.PreemptionConfiguration = &jobPreemptionWire{&n}
	}
	if j.Preemptions > 0 {
		ps := &preemptionSummary{PreemptedAttemptCount: j.Preemptions, RecentPreemptedAttempts: []attemptDetail{}}
		for _, a := range daemon.PreemptedAttempts(j, recentPreempted) {
			ps.RecentPreemptedAttempts = append(ps.RecentPreemptedAttempts, attemptOut(a))
		}
		out.PreemptionSummary = ps
	}
	if rs := j.RetryStrategy; rs != nil {
		r := &retryStrategyOut{Attempts: rs.Attempts}
		for _, e := range rs.EvaluateOnExit {
			r.EvaluateOnExit = append(r.EvaluateOnExit, evaluateOnExitOut(e))
		}
		out.RetryStrategy = r
	}
	if j.AttemptDurationSeconds > 0 {
		n := int32(j.AttemptDurationSeconds)
		out.TimeoutConfig = &timeoutWire{&n}
	}
	return out
}

type jobSummary struct {
	JobId           string          `json:"jobId"`
	JobName         string          `json:"jobName"`
	ServiceJobType  string          `json:"serviceJobType"`
	CapacityUsage   []capacityUsage `json:"capacityUsage"`
	CreatedAt       *int64          `json:"createdAt,omitempty"`
	JobArn          string          `json:"jobArn"`
	LatestAttempt   *latestAttempt  `json:"latestAttempt,omitempty"`
	QuotaShareName  string          `json:"quotaShareName,omitempty"`
	ScheduledAt     *int64          `json:"scheduledAt,omitempty"`
	ShareIdentifier string          `json:"shareIdentifier,omitempty"`
	StartedAt       *int64          `json:"startedAt,omitempty"`
	Status          string          `json:"status"`
	StatusReason    string          `json:"statusReason,omitempty"`
	StoppedAt       *int64          `json:"stoppedAt,omitempty"`
}

func summaryOut(j *qshare.Job) jobSummary {
	out := jobSummary{JobId: j.ID, JobName: j.Name, ServiceJobType: j.ServiceJobType, CapacityUsage: usageOut(j.Demand),
		CreatedAt: ms(j.CreatedAt), JobArn: j.ARN, QuotaShareName: j.QuotaShare, ScheduledAt: ms(j.ScheduledAt),
		ShareIdentifier: j.ShareIdentifier, StartedAt: ms(j.StartedAt), Status: string(j.Status), StatusReason: j.StatusReason,
		StoppedAt: ms(j.StoppedAt)}
	out.LatestAttempt = latestOut(j)
	return out
}

type listJobsOut struct {
	JobSummaryList []jobSummary `json:"jobSummaryList"`
	NextToken      *string      `json:"nextToken,omitempty"`
}

// ---- snapshot ----

type frontJob struct {
	JobArn                 string `json:"jobArn"`
	EarliestTimeAtPosition *int64 `json:"earliestTimeAtPosition,omitempty"`
}

type frontOfQueue struct {
	Jobs          []frontJob `json:"jobs"`
	LastUpdatedAt int64      `json:"lastUpdatedAt"`
}

type frontOfShares struct {
	QuotaShares   map[string][]frontJob `json:"quotaShares"`
	LastUpdatedAt int64                 `json:"lastUpdatedAt"`
}

type shareUtilization struct {
	QuotaShareName string          `json:"quotaShareName"`
	CapacityUsage  []capacityUsage `json:"capacityUsage"`
}

type quotaShareUtilization struct {
	TopCapacityUtilization []shareUtilization `json:"topCapacityUtilization"`
}

type fairshareCapacityUtilization struct {
	ShareIdentifier string          `json:"shareIdentifier"`
	CapacityUsage   []capacityUsage `json:"capacityUsage"`
}

type fairshareUtilization struct {
	ActiveShareCount       int                            `json:"activeShareCount"`
	TopCapacityUtilization []fairshareCapacityUtilization `json:"topCapacityUtilization"`
}

type queueUtilization struct {
	TotalCapacityUsage    []capacityUsage        `json:"totalCapacityUsage"`
	QuotaShareUtilization *quotaShareUtilization `json:"quotaShareUtilization,omitempty"`
	FairshareUtilization  *fairshareUtilization  `json:"fairshareUtilization,omitempty"`
	LastUpdatedAt         int64                  `json:"lastUpdatedAt"`
}

type snapshotOut struct {
	FrontOfQueue       frontOfQueue     `json:"frontOfQueue"`
	FrontOfQuotaShares *frontOfShares   `json:"frontOfQuotaShares,omitempty"`
	QueueUtilization   queueUtilization `json:"queueUtilization"`
}

func snapshotWire(s daemon.Snapshot) snapshotOut {
	at := s.At.UnixMilli()
	fj := func(f daemon.FrontJob) frontJob { return frontJob{f.JobARN, ms(f.Since)} }
	out := snapshotOut{FrontOfQueue: frontOfQueue{Jobs: []frontJob{}, LastUpdatedAt: at},
		QueueUtilization: queueUtilization{TotalCapacityUsage: usageOut(s.Total), LastUpdatedAt: at}}
	for _, f := range s.Front {
		out.FrontOfQueue.Jobs = append(out.FrontOfQueue.Jobs, fj(f))
	}
	if s.QuotaShares {
		fs := &frontOfShares{QuotaShares: map[string][]frontJob{}, LastUpdatedAt: at}
		for name, jobs := range s.ShareFronts {
			for _, f := range jobs {
				fs.QuotaShares[name] = append(fs.QuotaShares[name], fj(f))
			}
		}
		out.FrontOfQuotaShares = fs
		u := &quotaShareUtilization{TopCapacityUtilization: []shareUtilization{}}
		for _, su := range s.Shares {
			u.TopCapacityUtilization = append(u.TopCapacityUtilization, shareUtilization{su.Share, usageOut(su.Usage)})
		}
		out.QueueUtilization.QuotaShareUtilization = u
	}
	if s.FairShare {
		u := &fairshareUtilization{ActiveShareCount: s.ActiveShares, TopCapacityUtilization: []fairshareCapacityUtilization{}}
		for _, su := range s.Identifiers {
			u.TopCapacityUtilization = append(u.TopCapacityUtilization, fairshareCapacityUtilization{su.Share, usageOut(su.Usage)})
		}
		out.QueueUtilization.FairshareUtilization = u
	}
	return out
}

// ---- tags ----

type tagsBody struct {
	Tags map[string]string `json:"tags"`
}

// i64 widens an optional wire integer for the daemon.
func i64(p *int32) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

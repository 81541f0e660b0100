// Package config reads qshare's configuration as code: one YAML (or JSON)
// file that declares service environments, scheduling policies, job queues
// and their quota shares, with the AWS Batch API's own wire names as keys.
//
// It sits at the edge of the flow. `qshare apply` parses a file here and
// turns it into API requests; `qshare simulate` parses the same file and
// turns it into engine configuration; `qshare check-events` parses it to
// know the limits an event log must respect. One parser, one set of
// validation rules (those of the root package's validate.go, which the API
// also uses), so the three can never disagree about what a file means.
//
// Parse reports every problem of a file at once, each with its line and its
// field path, for example
//
//	line 14: jobQueues[0].quotaShares[1].capacityLimits[0].maxCapacity 0 is not valid: it must be at least 1
package config

import (
	"encoding/json"
	"maps"
	"sort"
	"strconv"
	"strings"

	"qshare"
	"qshare/engine"
)

// SageMakerTraining is the only service environment and job queue type that
// quota management supports.
const SageMakerTraining = "SAGEMAKER_TRAINING"

// File is a parsed configuration file. Build one with Parse, or in Go (the
// benchmark workloads do) and check it with Validate.
type File struct {
	ServiceEnvironments []Environment
	SchedulingPolicies  []Policy
	JobQueues           []Queue
	// CapacityPlans are the capacity plans (`capacityPlans[]`, a qshare
	// extension); a file's have no ARN (see PlanARN), a server's their own.
	CapacityPlans []qshare.CapacityPlan

	// pos maps a field path (jobQueues[0].priority) to where it was set.
	pos map[string]Pos
}

// Environment is a service environment: `serviceEnvironments[]`.
type Environment struct {
	// Name is serviceEnvironmentName.
	Name string
	// Type is serviceEnvironmentType; "" means SAGEMAKER_TRAINING.
	Type string
	// State is "" (ENABLED) or a qshare.State.
	State          qshare.State
	CapacityLimits []qshare.CapacityLimit
	Tags           map[string]string
	// Executor is `executor:`, a qshare extension: the server's executor
	// that runs the environment's jobs, kept on the server as the tag
	// qshare.TagExecutor (docs/executors.md); "" leaves it as it is.
	Executor string
}

// Policy is a scheduling policy: `schedulingPolicies[]`. Exactly one of
// QuotaSharePolicy and FairsharePolicy is set in a valid file.
type Policy struct {
	Name             string
	QuotaSharePolicy *qshare.QuotaSharePolicy
	FairsharePolicy  *FairsharePolicy
	Tags             map[string]string
}

// FairsharePolicy is a fair-share scheduling policy. qshare stores it as
// given; only quota-share policies schedule quota shares.
type FairsharePolicy struct {
	ShareDecaySeconds  *int64        `json:"shareDecaySeconds,omitempty"`
	ComputeReservation *int64        `json:"computeReservation,omitempty"`
	ShareDistribution  []ShareWeight `json:"shareDistribution,omitempty"`
}

// ShareWeight is one entry of a fair-share policy's shareDistribution.
type ShareWeight struct {
	ShareIdentifier string  `json:"shareIdentifier"`
	WeightFactor    float64 `json:"weightFactor,omitempty"`
}

// Queue is a job queue: `jobQueues[]`, with its quota shares.
type Queue struct {
	// Name is jobQueueName.
	Name string
	// Type is jobQueueType; "" means SAGEMAKER_TRAINING.
	Type string
	// Priority is required by the API; nil when the file omits it.
	Priority *int64
	State    qshare.State
	// SchedulingPolicy and ServiceEnvironment are references as written in
	// the file: a name or an ARN. Use PolicyName and EnvironmentName for the
	// name they resolve to.
	SchedulingPolicy         string
	ServiceEnvironment       string
	JobStateTimeLimitActions []qshare.JobStateTimeLimitAction
	Tags                     map[string]string
	QuotaShares              []Share
}

// Share is a quota share: `jobQueues[].quotaShares[]`.
type Share struct {
	// Name is quotaShareName.
	Name           string
	CapacityLimits []qshare.CapacityLimit
	// Strategy is resourceSharingConfiguration.strategy.
	Strategy qshare.Strategy
	// BorrowLimit is resourceSharingConfiguration.borrowLimit; nil when
	// omitted, which means -1 (unlimited) for LEND_AND_BORROW.
	BorrowLimit *int64
	// InSharePreemption is preemptionConfiguration.inSharePreemption.
	InSharePreemption qshare.State
	State             qshare.State
	Tags              map[string]string
}

// EffectiveBorrowLimit returns the share's borrow limit with the default
// applied: -1 when none was given.
func (s *Share) EffectiveBorrowLimit() int64 {
	if s.BorrowLimit == nil {
		return qshare.BorrowUnlimited
	}
	return *s.BorrowLimit
}

// Pos says where a field was set: a line and column of the file, or, for a
// value changed after parsing, the change that set it (Origin).
type Pos struct {
	Line, Column int
	Origin       string
}

// String renders the position as "line 12" or the origin.
func (p Pos) String() string {
	if p.Origin != "" {
		return p.Origin
	}
	if p.Line == 0 {
		return ""
	}
	return "line " + strconv.Itoa(p.Line)
}

// refName returns the name a reference (a name or an ARN) points at, and
// whether the reference is well formed for the resource kind ("scheduling-
// policy", "service-environment"). An ARN's resource part is KIND/NAME.
func refName(ref, kind string) (string, bool) {
	if !strings.HasPrefix(ref, "arn:") {
		return ref, true
	}
	parts := strings.SplitN(ref, ":", 6)
	if len(parts) != 6 || parts[2] != "batch" {
		return "", false
	}
	res, ok := strings.CutPrefix(parts[5], kind+"/")
	if !ok || res == "" || strings.Contains(res, "/") {
		return "", false
	}
	return res, true
}

// PolicyName returns the name of the scheduling policy the queue refers to
// ("" when it names none or the reference is not well formed).
func (q *Queue) PolicyName() string {
	n, _ := refName(q.SchedulingPolicy, "scheduling-policy")
	return n
}

// EnvironmentName returns the name of the service environment the queue
// draws on ("" when the reference is not well formed).
func (q *Queue) EnvironmentName() string {
	n, _ := refName(q.ServiceEnvironment, "service-environment")
	return n
}

// Environment returns the environment with the given name, or nil.
func (f *File) Environment(name string) *Environment {
	return byName(f.ServiceEnvironments, name, func(e *Environment) string { return e.Name })
}

// Policy returns the scheduling policy with the given name, or nil.
func (f *File) Policy(name string) *Policy {
	return byName(f.SchedulingPolicies, name, func(p *Policy) string { return p.Name })
}

// Queue returns the job queue with the given name, or nil.
func (f *File) Queue(name string) *Queue {
	return byName(f.JobQueues, name, func(q *Queue) string { return q.Name })
}

// Share returns the quota share of the queue with the given name, or nil.
func (q *Queue) Share(name string) *Share {
	return byName(q.QuotaShares, name, func(s *Share) string { return s.Name })
}

// byName returns the first of xs that nameOf calls name, or nil.
func byName[T any](xs []T, name string, nameOf func(*T) string) *T {
	for i := range xs {
		if nameOf(&xs[i]) == name {
			return &xs[i]
		}
	}
	return nil
}

// Clone returns a deep copy of f, so that what-if changes leave f untouched.
func (f *File) Clone() *File {
	out := &File{pos: make(map[string]Pos, len(f.pos))}
	for k, v := range f.pos {
		out.pos[k] = v
	}
	for _, e := range f.ServiceEnvironments {
		e.CapacityLimits = append([]qshare.CapacityLimit(nil), e.CapacityLimits...)
		e.Tags = maps.Clone(e.Tags)
		out.ServiceEnvironments = append(out.ServiceEnvironments, e)
	}
	for _, p := range f.SchedulingPolicies {
		p.QuotaSharePolicy = clonePtr(p.QuotaSharePolicy)
		if p.FairsharePolicy != nil {
			fp := *p.FairsharePolicy
			fp.ShareDistribution = append([]ShareWeight(nil), fp.ShareDistribution...)
			p.FairsharePolicy = &fp
		}
		p.Tags = maps.Clone(p.Tags)
		out.SchedulingPolicies = append(out.SchedulingPolicies, p)
	}
	for _, q := range f.JobQueues {
		q.Priority = clonePtr(q.Priority)
		q.JobStateTimeLimitActions = append([]qshare.JobStateTimeLimitAction(nil), q.JobStateTimeLimitActions...)
		q.Tags = maps.Clone(q.Tags)
		shares := q.QuotaShares
		q.QuotaShares = nil
		for _, s := range shares {
			s.CapacityLimits = append([]qshare.CapacityLimit(nil), s.CapacityLimits...)
			s.BorrowLimit = clonePtr(s.BorrowLimit)
			s.Tags = maps.Clone(s.Tags)
			q.QuotaShares = append(q.QuotaShares, s)
		}
		out.JobQueues = append(out.JobQueues, q)
	}
	for _, p := range f.CapacityPlans {
		p.WarningSeconds = clonePtr(p.WarningSeconds)
		out.CapacityPlans = append(out.CapacityPlans, p)
	}
	return out
}

// PlanRegion and PlanAccount make the ARNs of a file's capacity plans
// (PlanARN) for the simulator and the checker, which know no server: the
// server's defaults.
const (
	PlanRegion  = "us-east-1"
	PlanAccount = "000000000000"
)

// PlanARN is the ARN a file's capacity plan has in a replay: its
// training-plan ARN in PlanRegion and PlanAccount.
func PlanARN(name string) string { return qshare.PlanARN(PlanRegion, PlanAccount, name) }

// clonePtr returns a pointer to a copy of *p, or nil for nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Resources returns the file's resources as the domain's types, with their
// defaults applied (an omitted state is ENABLED, an omitted borrowLimit -1)
// and references as written (names or ARNs).
func (f *File) Resources() engine.Resources {
	var r engine.Resources
	for _, e := range f.ServiceEnvironments {
		r.Environments = append(r.Environments, qshare.ServiceEnvironment{Name: e.Name, Type: SageMakerTraining,
			State: stateOrEnabled(e.State), CapacityLimits: e.CapacityLimits})
	}
	for _, p := range f.SchedulingPolicies {
		pol := qshare.SchedulingPolicy{Name: p.Name, QuotaSharePolicy: p.QuotaSharePolicy}
		if p.FairsharePolicy != nil {
			pol.FairsharePolicy, _ = json.Marshal(p.FairsharePolicy) // the domain keeps it as JSON
		}
		r.Policies = append(r.Policies, pol)
	}
	for _, q := range f.JobQueues {
		jq := qshare.JobQueue{Name: q.Name, Type: SageMakerTraining, State: stateOrEnabled(q.State),
			SchedulingPolicyARN: q.SchedulingPolicy, JobStateTimeLimitActions: q.JobStateTimeLimitActions}
		if q.Priority != nil {
			jq.Priority = int(*q.Priority)
		}
		if q.ServiceEnvironment != "" {
			jq.ServiceEnvironmentOrder = []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: q.ServiceEnvironment}}
		}
		r.Queues = append(r.Queues, jq)
		for _, s := range q.QuotaShares {
			r.Shares = append(r.Shares, qshare.QuotaShare{Name: s.Name, JobQueue: q.Name, CapacityLimits: s.CapacityLimits,
				Strategy: s.Strategy, BorrowLimit: s.EffectiveBorrowLimit(), InSharePreemption: s.InSharePreemption,
				State: stateOrEnabled(s.State), Tags: s.Tags})
		}
	}
	for _, p := range f.CapacityPlans {
		if p.ARN == "" {
			p.ARN = PlanARN(p.Name) // a file's plan; a server's keeps its own
		}
		r.Plans = append(r.Plans, p)
	}
	return r
}

// Engine converts a valid file to engine configuration through the one
// mapping the daemon also uses (engine.Configure): every environment, every
// job queue, and the quota shares of queues with a quota-share policy; a
// queue without one is scheduled as its single engine.QueueShare. Lists
// keep the file's order.
func (f *File) Engine() engine.Config {
	return engine.Configure(f.Resources())
}

func stateOrEnabled(s qshare.State) qshare.State {
	if s == "" {
		return qshare.Enabled
	}
	return s
}

// ShareNames returns "queue/share" for every share of the file, sorted.
func (f *File) ShareNames() []string {
	var out []string
	for _, q := range f.JobQueues {
		for _, s := range q.QuotaShares {
			out = append(out, q.Name+"/"+s.Name)
		}
	}
	sort.Strings(out)
	return out
}

package engine

import (
	"encoding/json"
	"sort"
	"strings"

	"qshare"
)

// The one mapping from the domain's resources to engine configuration. The
// daemon (one resource at a time, as they are created, changed and
// recovered) and the simulator and the event checker (a whole apply file at
// once, through config) both call it, so that the server and a replay of the
// same resources can never configure the engine differently.

// QueueShare is the name of the one engine share of a job queue without a
// quota-share policy: such a queue is one FIFO line, which the engine
// schedules as a RESERVE share that owns its whole service environment.
const QueueShare = "_queue"

// Resources is a set of domain resources: what the daemon holds, or what an
// apply file declares. References between them (a queue's
// SchedulingPolicyARN and ServiceEnvironmentOrder) may be names or ARNs.
type Resources struct {
	Environments []qshare.ServiceEnvironment
	Policies     []qshare.SchedulingPolicy
	Queues       []qshare.JobQueue
	Shares       []qshare.QuotaShare
	Plans        []qshare.CapacityPlan
}

// Config is the engine configuration of a set of resources.
type Config struct {
	Environments []EnvironmentConfig
	Queues       []QueueConfig
	Shares       []ShareConfig
	Plans        []PlanConfig
}

// Configure maps resources to engine configuration: every environment;
// every job queue, on the environment it names; for a queue without a
// quota-share policy, its QueueShare (QueueShareOf); and every quota share
// of a queue with a quota-share policy (shares of other queues are left
// out: they cannot schedule), and every capacity plan of such a share's
// queue. Each list keeps the order of r.
func Configure(r Resources) Config {
	var c Config
	envs := make(map[string]*qshare.ServiceEnvironment, len(r.Environments))
	for i := range r.Environments {
		e := &r.Environments[i]
		envs[e.Name] = e
		c.Environments = append(c.Environments, EnvironmentOf(e))
	}
	policies := make(map[string]*qshare.SchedulingPolicy, len(r.Policies))
	for i := range r.Policies {
		policies[r.Policies[i].Name] = &r.Policies[i]
	}
	quota := map[string]bool{}
	var fifo []ShareConfig
	for i := range r.Queues {
		q := &r.Queues[i]
		c.Queues = append(c.Queues, QueueOf(q))
		if HasQuotaShares(policies[PolicyName(q)]) {
			quota[q.Name] = true
			continue
		}
		qs := QueueShareOf(q, envs[EnvironmentName(q)])
		qs.FairShare = FairShareOf(policies[PolicyName(q)])
		fifo = append(fifo, qs)
	}
	c.Shares = fifo
	for i := range r.Shares {
		if s := &r.Shares[i]; quota[s.JobQueue] {
			c.Shares = append(c.Shares, ShareOf(s))
		}
	}
	for i := range r.Plans {
		if p := &r.Plans[i]; quota[p.JobQueue] {
			c.Plans = append(c.Plans, PlanOf(p))
		}
	}
	return c
}

// EnvironmentOf is a service environment as the engine takes it.
func EnvironmentOf(e *qshare.ServiceEnvironment) EnvironmentConfig {
	return EnvironmentConfig{Name: e.Name, Limits: qshare.Limits(e.CapacityLimits)}
}

// QueueOf is a job queue as the engine takes it.
func QueueOf(q *qshare.JobQueue) QueueConfig {
	return QueueConfig{Name: q.Name, Environment: EnvironmentName(q)}
}

// QueueShareOf is the engine share of a job queue without a quota-share
// policy: QueueShare, RESERVE, owning every instance of the queue's
// environment env (none when env is nil).
func QueueShareOf(q *qshare.JobQueue, env *qshare.ServiceEnvironment) ShareConfig {
	var limits qshare.Capacity
	if env != nil {
		limits = qshare.Limits(env.CapacityLimits)
	}
	return ShareConfig{Queue: q.Name, Name: QueueShare, Limits: limits, Strategy: qshare.StrategyReserve, BorrowLimit: 0}
}

// ShareOf is a quota share as the engine takes it. Its minimum run time is
// the value of its tag qshare.TagMinRunTime, which the edges validate
// (qshare.ValidateShareTags); a value they would refuse (one stored before
// the tag had a meaning) counts as 0.
func ShareOf(s *qshare.QuotaShare) ShareConfig {
	minRun, err := qshare.MinRunTime("tags", s.Tags)
	if err != nil {
		minRun = 0
	}
	return ShareConfig{Queue: s.JobQueue, Name: s.Name, Limits: qshare.Limits(s.CapacityLimits),
		Strategy: s.Strategy, BorrowLimit: s.BorrowLimit, InSharePreemption: s.InSharePreemption == qshare.Enabled,
		Disabled: s.State == qshare.Disabled, MinRunTime: minRun}
}

// FairShareOf is the fair-share configuration of a job queue whose
// scheduling policy is p: nil when p is nil or a quota-share policy; else
// its fairsharePolicy (kept as JSON, validated at the edges; a policy
// without one, or one that does not read, is an empty fair-share policy,
// as in AWS).
func FairShareOf(p *qshare.SchedulingPolicy) *FairShareConfig {
	if p == nil || p.QuotaSharePolicy != nil {
		return nil
	}
	var body struct {
		ShareDecaySeconds  int64 `json:"shareDecaySeconds"`
		ComputeReservation int64 `json:"computeReservation"`
		ShareDistribution  []struct {
			ShareIdentifier string  `json:"shareIdentifier"`
			WeightFactor    float64 `json:"weightFactor"`
		} `json:"shareDistribution"`
	}
	c := &FairShareConfig{}
	if len(p.FairsharePolicy) > 0 && json.Unmarshal(p.FairsharePolicy, &body) == nil {
		c.DecaySeconds, c.ComputeReservation = body.ShareDecaySeconds, body.ComputeReservation
		for _, w := range body.ShareDistribution {
			if w.WeightFactor > 0 {
				c.Weights = append(c.Weights, ShareWeight{Identifier: w.ShareIdentifier, Factor: w.WeightFactor})
			}
		}
	}
	return c
}

// HasQuotaShares reports whether a job queue whose scheduling policy is p
// (nil for none, or one that does not exist) is split into quota shares.
func HasQuotaShares(p *qshare.SchedulingPolicy) bool {
	return p != nil && p.QuotaSharePolicy != nil
}

// EnvironmentName returns the name of the service environment a job queue
// draws on: its first serviceEnvironmentOrder entry, a name or an ARN; ""
// when it has none.
func EnvironmentName(q *qshare.JobQueue) string {
	if len(q.ServiceEnvironmentOrder) == 0 {
		return ""
	}
	return refName(q.ServiceEnvironmentOrder[0].ServiceEnvironment)
}

// PolicyName returns the name of a job queue's scheduling policy (its
// SchedulingPolicyARN, a name or an ARN); "" when it has none.
func PolicyName(q *qshare.JobQueue) string { return refName(q.SchedulingPolicyARN) }

// refName returns the name a reference points at: the reference itself, or
// the part of an ARN after its resource type (KIND/NAME).
func refName(ref string) string {
	if !strings.HasPrefix(ref, "arn:") {
		return ref
	}
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		return ref[i+1:]
	}
	return ""
}

// Load gives the engine every environment, queue, share and capacity plan
// of c, in that order. It stops at the first error, which is the engine's.
func (c Config) Load(e *Engine) error {
	if err := setEach(c.Environments, e.SetEnvironment); err != nil {
		return err
	}
	if err := setEach(c.Queues, e.SetQueue); err != nil {
		return err
	}
	if err := setEach(c.Shares, e.SetShare); err != nil {
		return err
	}
	return setEach(c.Plans, e.SetPlan)
}

// setEach calls set with each of xs in turn, and stops at the first error.
func setEach[T any](xs []T, set func(T) error) error {
	for _, x := range xs {
		if err := set(x); err != nil {
			return err
		}
	}
	return nil
}

// Config returns the configuration the engine holds now, as the Set calls
// gave it, in name order (environments; queues; shares by queue, then
// name). An environment's limits leave out types of no capacity.
func (e *Engine) Config() Config {
	var c Config
	for _, env := range e.envs {
		c.Environments = append(c.Environments, EnvironmentConfig{Name: env.name, Limits: e.toCapacity(env.base)})
	}
	for _, q := range e.queues {
		c.Queues = append(c.Queues, QueueConfig{Name: q.name, Environment: q.env.name})
		for _, s := range q.shares {
			sc := s.cfg
			sc.Limits = s.cfg.Limits.Clone()
			c.Shares = append(c.Shares, sc)
		}
	}
	for _, p := range e.plans {
		c.Plans = append(c.Plans, p.cfg)
	}
	c.Sort()
	return c
}

// Sort puts c in name order: environments, queues and plans by name,
// shares by queue, then name. Two configurations declare the same resources when
// their sorted forms are equal.
func (c Config) Sort() {
	sort.Slice(c.Environments, func(i, j int) bool { return c.Environments[i].Name < c.Environments[j].Name })
	sort.Slice(c.Queues, func(i, j int) bool { return c.Queues[i].Name < c.Queues[j].Name })
	sort.Slice(c.Plans, func(i, j int) bool { return c.Plans[i].Name < c.Plans[j].Name })
	sort.Slice(c.Shares, func(i, j int) bool {
		if c.Shares[i].Queue != c.Shares[j].Queue {
			return c.Shares[i].Queue < c.Shares[j].Queue
		}
		return c.Shares[i].Name < c.Shares[j].Name
	})
}

// PlanOf is a capacity plan as the engine takes it: named by its ARN (the
// name jobs give in ResourceConfig.TrainingPlanArn), labelled by its name.
func PlanOf(p *qshare.CapacityPlan) PlanConfig {
	return PlanConfig{Name: p.ARN, Label: p.Name, Queue: p.JobQueue, Share: p.QuotaShare, InstanceType: p.InstanceType,
		Count: p.InstanceCount, Start: p.StartTime, End: p.EndTime, Warning: p.Warning()}
}

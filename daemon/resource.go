package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/executor"
	"qshare/store"
)

// The resource operations. Each validates against the in-memory state under
// resMu, commits the new record and installs it in memory. A service
// environment, job queue or quota share is committed CREATING or UPDATING
// and settles VALID once the control loop has applied it to the engine
// (lifecycle.go); a scheduling policy has no status and is in force at once.

const serviceTypeSageMaker = "SAGEMAKER_TRAINING"

func errExists() error { return qshare.Errorf(qshare.EINVALID, "Object already exists") }

// lookup returns m[k], read under d.mu. m is one of the daemon's resource
// maps, which d.mu guards.
func lookup[K comparable, T any](d *Daemon, m map[K]*T, k K) *T {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return m[k]
}

// install sets m[k] to v under d.mu.
func install[K comparable, T any](d *Daemon, m map[K]*T, k K, v *T) {
	d.mu.Lock()
	m[k] = v
	d.mu.Unlock()
}

// commitPut commits c, which stores v, and only then installs v as m[k]:
// memory never shows what the store may not have.
func commitPut[K comparable, T any](ctx context.Context, d *Daemon, c *store.Change, m map[K]*T, k K, v *T) error {
	if err := d.commit(ctx, c); err != nil {
		return err
	}
	install(d, m, k, v)
	return nil
}

// commitForget commits c, which deletes the record m[k], and only then
// deletes it from memory under d.mu.
func commitForget[K comparable, T any](ctx context.Context, d *Daemon, c *store.Change, m map[K]*T, k K) error {
	if err := d.commit(ctx, c); err != nil {
		return err
	}
	d.mu.Lock()
	delete(m, k)
	d.mu.Unlock()
	return nil
}

// lockChanges takes resMu for a change that the control loop must settle,
// and so only once the daemon has started; the caller unlocks resMu.
func (d *Daemon) lockChanges() error {
	if !d.started {
		return errNotStarted()
	}
	d.resMu.Lock()
	return nil
}

// validateNewState checks the new value of an optional state member; nil
// leaves the state as it is.
func validateNewState(field string, s *qshare.State) error {
	if s == nil {
		return nil
	}
	return qshare.ValidateState(field, *s, false)
}

// queuesUsing returns, in name order, the names of the job queues for which
// uses is true: those that stand in the way of deleting a resource they use.
// Callers hold d.mu.
func (d *Daemon) queuesUsing(uses func(q *qshare.JobQueue) bool) []string {
	var names []string
	for _, q := range d.queues {
		if uses(q) {
			names = append(names, q.Name)
		}
	}
	sort.Strings(names)
	return names
}

// ---- service environments ----

// EnvironmentInput is a CreateServiceEnvironment request.
type EnvironmentInput struct {
	Name           string
	Type           string
	State          qshare.State // "" means ENABLED
	CapacityLimits []qshare.CapacityLimit
	Tags           map[string]string
}

// CreateEnvironment creates a service environment.
func (d *Daemon) CreateEnvironment(ctx context.Context, in EnvironmentInput) (qshare.ServiceEnvironment, error) {
	if err := qshare.ValidateName("serviceEnvironmentName", in.Name); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if in.Type != serviceTypeSageMaker {
		return qshare.ServiceEnvironment{}, qshare.Errorf(qshare.EINVALID, "serviceEnvironmentType %q is not supported: use SAGEMAKER_TRAINING", in.Type)
	}
	if err := qshare.ValidateState("state", in.State, true); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if err := validateEnvLimits(in.CapacityLimits); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if err := qshare.ValidateTags("tags", in.Tags); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if err := d.lockChanges(); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	defer d.resMu.Unlock()
	if lookup(d, d.envs, in.Name) != nil {
		return qshare.ServiceEnvironment{}, errExists()
	}
	return d.putEnv(ctx, qshare.ServiceEnvironment{
		Name: in.Name, ARN: d.EnvironmentARN(in.Name), Type: in.Type,
		State: orEnabled(in.State), Status: qshare.StatusCreating,
		CapacityLimits: in.CapacityLimits, Tags: in.Tags, CreatedAt: d.now(),
	}, "created")
}

// putEnv commits a new or changed environment, with the executor's capacity
// warning as its statusReason, and installs it; done is the log's verb.
// Callers hold resMu.
func (d *Daemon) putEnv(ctx context.Context, e qshare.ServiceEnvironment, done string) (qshare.ServiceEnvironment, error) {
	e.StatusReason = d.capacityWarning(e.CapacityLimits)
	if err := d.commit(ctx, &store.Change{PutEnvironments: []qshare.ServiceEnvironment{e}}); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	d.applyEnv(&e)
	d.log.Info("service environment "+done, "environment", e.Name, "limits", qshare.Limits(e.CapacityLimits).String(), "state", e.State)
	d.warnCapacity(&e)
	return e, nil
}

func validateEnvLimits(ls []qshare.CapacityLimit) error {
	if err := qshare.ValidateCapacityLimits("capacityLimits", ls); err != nil {
		return err
	}
	for i, l := range ls {
		if l.CapacityUnit == "NUM_INSTANCES" {
			return qshare.Errorf(qshare.EINVALID, "capacityLimits[%d].capacityUnit NUM_INSTANCES is not supported: qshare manages quota per instance type, so name an instance type such as ml.g5.xlarge", i)
		}
	}
	return nil
}

// capacityWarning asks the executor whether the host can give an
// environment with these limits what it promises (GPUs, say), and returns its
// warning, or "". The warning is kept as the environment's statusReason, so
// that describing it shows the problem, and logged.
func (d *Daemon) capacityWarning(ls []qshare.CapacityLimit) string {
	if cc, ok := d.ex.(executor.CapacityChecker); ok {
		return cc.CheckCapacity(qshare.Limits(ls))
	}
	return ""
}

func (d *Daemon) warnCapacity(e *qshare.ServiceEnvironment) {
	if e.StatusReason != "" {
		d.log.Warn("service environment capacity", "environment", e.Name, "warning", e.StatusReason)
	}
}

// applyEnv installs a committed CREATING or UPDATING environment in memory
// and has the control loop apply and settle it. Callers hold resMu.
func (d *Daemon) applyEnv(e *qshare.ServiceEnvironment) {
	install(d, d.envs, e.Name, e)
	d.settleEnv(e)
}

func orEnabled(s qshare.State) qshare.State {
	if s == "" {
		return qshare.Enabled
	}
	return s
}

// EnvironmentUpdate is an UpdateServiceEnvironment request; nil members are
// left as they are.
type EnvironmentUpdate struct {
	Ref            string
	State          *qshare.State
	CapacityLimits []qshare.CapacityLimit
}

// UpdateEnvironment changes a service environment's state or limits.
func (d *Daemon) UpdateEnvironment(ctx context.Context, u EnvironmentUpdate) (qshare.ServiceEnvironment, error) {
	name, err := d.refName("serviceEnvironment", kindEnvironment, u.Ref)
	if err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if err := validateNewState("state", u.State); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	if u.CapacityLimits != nil {
		if err := validateEnvLimits(u.CapacityLimits); err != nil {
			return qshare.ServiceEnvironment{}, err
		}
	}
	if err := d.lockChanges(); err != nil {
		return qshare.ServiceEnvironment{}, err
	}
	defer d.resMu.Unlock()
	old := lookup(d, d.envs, name)
	if old == nil {
		return qshare.ServiceEnvironment{}, errNoEnv(name)
	}
	e := *old
	e.Status = changing(old.Status)
	if u.State != nil {
		e.State = *u.State
	}
	if u.CapacityLimits != nil {
		e.CapacityLimits = u.CapacityLimits
	}
	return d.putEnv(ctx, e, "updated")
}

func errNoEnv(name string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Service environment %s does not exist: create it with CreateServiceEnvironment, or check the name", name)
}

// DeleteEnvironment deletes a DISABLED service environment that no job queue uses.
func (d *Daemon) DeleteEnvironment(ctx context.Context, ref string) error {
	name, err := d.refName("serviceEnvironment", kindEnvironment, ref)
	if err != nil {
		return err
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	d.mu.RLock()
	e := d.envs[name]
	users := d.queuesUsing(func(q *qshare.JobQueue) bool {
		for _, o := range q.ServiceEnvironmentOrder {
			if o.ServiceEnvironment == d.EnvironmentARN(name) {
				return true
			}
		}
		return false
	})
	d.mu.RUnlock()
	if e == nil {
		return errNoEnv(name)
	}
	if e.State != qshare.Disabled {
		return qshare.Errorf(qshare.ECONFLICT, "Service environment %s is ENABLED: disable it with UpdateServiceEnvironment (state DISABLED) before deleting it", name)
	}
	if len(users) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "Service environment %s is used by job queue(s) %s: delete them, or remove it from their serviceEnvironmentOrder, first", name, strings.Join(users, ", "))
	}
	if err := commitForget(ctx, d, &store.Change{DeleteEnvironments: []string{name}}, d.envs, name); err != nil {
		return err
	}
	d.engMu.Lock()
	if err := d.eng.RemoveEnvironment(name); err != nil {
		d.log.Error("engine refused to remove environment", "environment", name, "err", err)
	}
	d.engMu.Unlock()
	d.log.Info("service environment deleted", "environment", name)
	return nil
}

// Environments returns the named environments (names or ARNs; unknown ones
// are left out), or every environment when refs is empty, in name order.
func (d *Daemon) Environments(refs []string) ([]qshare.ServiceEnvironment, error) {
	return listByRefs(d, d.envs, "serviceEnvironments", kindEnvironment, refs)
}

// listByRefs returns copies of the records of m (keyed by name) that refs
// name (names or ARNs of kind; unknown ones are left out, repeats are given
// once), or of every record when refs is empty, in name order. field names
// refs in the error for a ref of another kind. It takes d.mu for reading.
func listByRefs[T any](d *Daemon, m map[string]*T, field, kind string, refs []string) ([]T, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var names []string
	if len(refs) == 0 {
		for n := range m {
			names = append(names, n)
		}
	} else {
		seen := map[string]bool{}
		for _, r := range refs {
			n, err := d.refName(field, kind, r)
			if err != nil {
				return nil, err
			}
			if m[n] != nil && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	var out []T
	for _, n := range names {
		out = append(out, *m[n])
	}
	return out, nil
}

// ---- scheduling policies ----

// PolicyInput is a CreateSchedulingPolicy request. FairsharePolicy is the
// fair-share policy as JSON, or nil.
type PolicyInput struct {
	Name             string
	QuotaSharePolicy *qshare.QuotaSharePolicy
	FairsharePolicy  []byte
	Tags             map[string]string
}

func validateQuotaSharePolicy(p *qshare.QuotaSharePolicy) error {
	if p == nil {
		return nil
	}
	if p.IdleResourceAssignmentStrategy != "FIFO" {
		return qshare.Errorf(qshare.EINVALID, "quotaSharePolicy.idleResourceAssignmentStrategy %q is not valid: use FIFO", p.IdleResourceAssignmentStrategy)
	}
	return nil
}

// CreatePolicy creates a scheduling policy. With neither member it is an
// empty fair-share policy, as in AWS Batch.
func (d *Daemon) CreatePolicy(ctx context.Context, in PolicyInput) (qshare.SchedulingPolicy, error) {
	if err := qshare.ValidateName("name", in.Name); err != nil {
		return qshare.SchedulingPolicy{}, err
	}
	if in.QuotaSharePolicy != nil && in.FairsharePolicy != nil {
		return qshare.SchedulingPolicy{}, qshare.Errorf(qshare.EINVALID, "give either quotaSharePolicy or fairsharePolicy, not both: a scheduling policy has one type")
	}
	if err := validateQuotaSharePolicy(in.QuotaSharePolicy); err != nil {
		return qshare.SchedulingPolicy{}, err
	}
	if err := qshare.ValidateTags("tags", in.Tags); err != nil {
		return qshare.SchedulingPolicy{}, err
	}
	if in.QuotaSharePolicy == nil && in.FairsharePolicy == nil {
		in.FairsharePolicy = []byte("{}")
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	if lookup(d, d.policies, in.Name) != nil {
		return qshare.SchedulingPolicy{}, errExists()
	}
	p := qshare.SchedulingPolicy{Name: in.Name, ARN: d.PolicyARN(in.Name), QuotaSharePolicy: in.QuotaSharePolicy,
		FairsharePolicy: in.FairsharePolicy, Tags: in.Tags, CreatedAt: d.now()}
	if err := commitPut(ctx, d, &store.Change{PutPolicies: []qshare.SchedulingPolicy{p}}, d.policies, p.Name, &p); err != nil {
		return qshare.SchedulingPolicy{}, err
	}
	d.log.Info("scheduling policy created", "policy", p.Name, "quotaShare", p.QuotaSharePolicy != nil)
	return p, nil
}

func errNoPolicy(ref string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Scheduling policy %s does not exist: create it with CreateSchedulingPolicy, or check the ARN", ref)
}

// UpdatePolicy replaces a policy's settings; its type cannot change.
func (d *Daemon) UpdatePolicy(ctx context.Context, arn string, qsp *qshare.QuotaSharePolicy, fsp []byte) error {
	name, err := d.refName("arn", kindPolicy, arn)
	if err != nil {
		return err
	}
	if err := validateQuotaSharePolicy(qsp); err != nil {
		return err
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	old := lookup(d, d.policies, name)
	if old == nil {
		return errNoPolicy(arn)
	}
	p := *old
	switch {
	case qsp != nil && fsp != nil:
		return qshare.Errorf(qshare.EINVALID, "give either quotaSharePolicy or fairsharePolicy, not both")
	case qsp != nil && old.QuotaSharePolicy == nil:
		return qshare.Errorf(qshare.EINVALID, "Scheduling policy %s is a fair-share policy: its type cannot be changed to quota share; create a new policy instead", name)
	case fsp != nil && old.QuotaSharePolicy != nil:
		return qshare.Errorf(qshare.EINVALID, "Scheduling policy %s is a quota-share policy: its type cannot be changed to fair share; create a new policy instead", name)
	case qsp != nil:
		p.QuotaSharePolicy = qsp
	case fsp != nil:
		p.FairsharePolicy = fsp
	}
	if err := commitPut(ctx, d, &store.Change{PutPolicies: []qshare.SchedulingPolicy{p}}, d.policies, name, &p); err != nil {
		return err
	}
	d.log.Info("scheduling policy updated", "policy", name)
	return nil
}

// DeletePolicy deletes a policy that no job queue uses.
func (d *Daemon) DeletePolicy(ctx context.Context, arn string) error {
	name, err := d.refName("arn", kindPolicy, arn)
	if err != nil {
		return err
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	d.mu.RLock()
	p := d.policies[name]
	users := d.queuesUsing(func(q *qshare.JobQueue) bool { return q.SchedulingPolicyARN == d.PolicyARN(name) })
	d.mu.RUnlock()
	if p == nil {
		return errNoPolicy(arn)
	}
	if len(users) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "Scheduling policy %s is used by job queue(s) %s: delete those queues or give them another policy first", name, strings.Join(users, ", "))
	}
	if err := commitForget(ctx, d, &store.Change{DeletePolicies: []string{name}}, d.policies, name); err != nil {
		return err
	}
	d.log.Info("scheduling policy deleted", "policy", name)
	return nil
}

// Policies returns the policies with the given ARNs (unknown ones left out),
// or all of them when arns is empty, in name order.
func (d *Daemon) Policies(arns []string) ([]qshare.SchedulingPolicy, error) {
	return listByRefs(d, d.policies, "arns", kindPolicy, arns)
}

// ---- job queues ----

// QueueInput is a CreateJobQueue request.
type QueueInput struct {
	Name                     string
	Type                     string // "" means SAGEMAKER_TRAINING
	State                    qshare.State
	SchedulingPolicyARN      string
	Priority                 int64
	HasComputeEnvironments   bool
	ServiceEnvironmentOrder  []qshare.ServiceEnvironmentOrder
	JobStateTimeLimitActions []qshare.JobStateTimeLimitAction
	Tags                     map[string]string
}

// QueueUpdate is an UpdateJobQueue request; nil members are left as they are.
type QueueUpdate struct {
	Ref                      string
	State                    *qshare.State
	SchedulingPolicyARN      *string
	Priority                 *int64
	HasComputeEnvironments   bool
	ServiceEnvironmentOrder  []qshare.ServiceEnvironmentOrder
	JobStateTimeLimitActions []qshare.JobStateTimeLimitAction
}

func validateTimeLimitActions(as []qshare.JobStateTimeLimitAction) error {
	if len(as) > 5 {
		return qshare.Errorf(qshare.EINVALID, "jobStateTimeLimitActions has %d entries: at most 5 are allowed", len(as))
	}
	for i, a := range as {
		f := fmt.Sprintf("jobStateTimeLimitActions[%d]", i)
		if a.Reason == "" {
			return qshare.Errorf(qshare.EINVALID, "%s.reason is required: give the status reason code to act on, such as MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", f)
		}
		if a.State != "RUNNABLE" {
			return qshare.Errorf(qshare.EINVALID, "%s.state %q is not valid: use RUNNABLE", f, a.State)
		}
		if a.Action != "TERMINATE" {
			return qshare.Errorf(qshare.EINVALID, "%s.action %q is not valid for a SAGEMAKER_TRAINING job queue: use TERMINATE", f, a.Action)
		}
		if a.MaxTimeSeconds < 600 || a.MaxTimeSeconds > 86400 {
			return qshare.Errorf(qshare.EINVALID, "%s.maxTimeSeconds %d is out of range: use 600 to 86400", f, a.MaxTimeSeconds)
		}
	}
	return nil
}

func validateQueuePriority(p int64) error {
	if p < 0 || p > 1000 {
		return qshare.Errorf(qshare.EINVALID, "priority %d is out of range: use an integer from 0 to 1000", p)
	}
	return nil
}

// resolveEnvOrder checks a serviceEnvironmentOrder and returns it with ARNs.
// Callers hold d.mu for reading.
func (d *Daemon) resolveEnvOrder(order []qshare.ServiceEnvironmentOrder, queue string) ([]qshare.ServiceEnvironmentOrder, error) {
	if len(order) == 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceEnvironmentOrder is required: give one service environment, as [{order: 1, serviceEnvironment: NAME_OR_ARN}]")
	}
	if len(order) > 1 {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceEnvironmentOrder has %d entries: a job queue uses exactly one service environment", len(order))
	}
	o := order[0]
	name, err := d.refName("serviceEnvironmentOrder[0].serviceEnvironment", kindEnvironment, o.ServiceEnvironment)
	if err != nil {
		return nil, err
	}
	if d.envs[name] == nil {
		return nil, errNoEnv(name)
	}
	arn := d.EnvironmentARN(name)
	for _, q := range d.queues {
		if q.Name != queue && len(q.ServiceEnvironmentOrder) > 0 && q.ServiceEnvironmentOrder[0].ServiceEnvironment == arn {
			return nil, qshare.Errorf(qshare.ECONFLICT, "Service environment %s is already used by job queue %s: a quota-management service environment serves one job queue; create another service environment", name, q.Name)
		}
	}
	return []qshare.ServiceEnvironmentOrder{{Order: o.Order, ServiceEnvironment: arn}}, nil
}

// resolvePolicy checks a schedulingPolicyArn and returns the policy. Callers hold d.mu.
func (d *Daemon) resolvePolicy(arn string) (*qshare.SchedulingPolicy, error) {
	name, err := d.refName("schedulingPolicyArn", kindPolicy, arn)
	if err != nil {
		return nil, err
	}
	p := d.policies[name]
	if p == nil {
		return nil, errNoPolicy(arn)
	}
	return p, nil
}

// CreateQueue creates a SAGEMAKER_TRAINING job queue.
func (d *Daemon) CreateQueue(ctx context.Context, in QueueInput) (qshare.JobQueue, error) {
	if err := qshare.ValidateName("jobQueueName", in.Name); err != nil {
		return qshare.JobQueue{}, err
	}
	if in.Type == "" {
		in.Type = serviceTypeSageMaker
	}
	if in.Type != serviceTypeSageMaker {
		return qshare.JobQueue{}, qshare.Errorf(qshare.EINVALID, "jobQueueType %q is not supported: qshare runs service jobs, so use SAGEMAKER_TRAINING", in.Type)
	}
	if in.HasComputeEnvironments {
		return qshare.JobQueue{}, qshare.Errorf(qshare.EINVALID, "computeEnvironmentOrder is not supported: qshare runs service jobs, so give serviceEnvironmentOrder instead")
	}
	if err := qshare.ValidateState("state", in.State, true); err != nil {
		return qshare.JobQueue{}, err
	}
	if err := validateQueuePriority(in.Priority); err != nil {
		return qshare.JobQueue{}, err
	}
	if err := validateTimeLimitActions(in.JobStateTimeLimitActions); err != nil {
		return qshare.JobQueue{}, err
	}
	if err := qshare.ValidateTags("tags", in.Tags); err != nil {
		return qshare.JobQueue{}, err
	}
	if err := d.lockChanges(); err != nil {
		return qshare.JobQueue{}, err
	}
	defer d.resMu.Unlock()
	d.mu.RLock()
	_, dup := d.queues[in.Name]
	order, err := d.resolveEnvOrder(in.ServiceEnvironmentOrder, in.Name)
	var policyARN string
	if err == nil && in.SchedulingPolicyARN != "" {
		var p *qshare.SchedulingPolicy
		p, err = d.resolvePolicy(in.SchedulingPolicyARN)
		if p != nil {
			policyARN = p.ARN
		}
	}
	d.mu.RUnlock()
	if dup {
		return qshare.JobQueue{}, errExists()
	}
	if err != nil {
		return qshare.JobQueue{}, err
	}
	q := qshare.JobQueue{Name: in.Name, ARN: d.QueueARN(in.Name), Type: in.Type, State: orEnabled(in.State),
		Status: qshare.StatusCreating, Priority: int(in.Priority), SchedulingPolicyARN: policyARN,
		ServiceEnvironmentOrder: order, JobStateTimeLimitActions: in.JobStateTimeLimitActions,
		Tags: in.Tags, CreatedAt: d.now()}
	if err := d.commit(ctx, &store.Change{PutQueues: []qshare.JobQueue{q}}); err != nil {
		return qshare.JobQueue{}, err
	}
	d.applyQueue(&q)
	d.log.Info("job queue created", "queue", q.Name, "environment", order[0].ServiceEnvironment, "policy", policyARN, "state", q.State)
	return q, nil
}

// envName returns the name of the queue's service environment.
func (d *Daemon) envName(q *qshare.JobQueue) string {
	if len(q.ServiceEnvironmentOrder) == 0 {
		return ""
	}
	n, _ := d.refName("", kindEnvironment, q.ServiceEnvironmentOrder[0].ServiceEnvironment)
	return n
}

// applyQueue installs a committed CREATING or UPDATING job queue in memory
// and has the control loop apply and settle it. Callers hold resMu.
func (d *Daemon) applyQueue(q *qshare.JobQueue) {
	install(d, d.queues, q.Name, q)
	d.settleQueue(q)
}

// fifoShareName is the engine share of a job queue without a quota-share policy.
const fifoShareName = "_queue"

func (d *Daemon) fifoShare(q *qshare.JobQueue) engine.ShareConfig {
	e := lookup(d, d.envs, d.envName(q))
	var limits qshare.Capacity
	if e != nil {
		limits = qshare.Limits(e.CapacityLimits)
	}
	return engine.ShareConfig{Queue: q.Name, Name: fifoShareName, Limits: limits, Strategy: qshare.StrategyReserve, BorrowLimit: 0}
}

// isQuotaQueue reports whether the queue has a quota-share policy.
func (d *Daemon) isQuotaQueue(q *qshare.JobQueue) bool {
	if q.SchedulingPolicyARN == "" {
		return false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	n, _ := d.refName("", kindPolicy, q.SchedulingPolicyARN)
	p := d.policies[n]
	return p != nil && p.QuotaSharePolicy != nil
}

func errNoQueue(name string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Job queue %s does not exist: create it with CreateJobQueue, or check the name", name)
}

// activeJobs counts the jobs of a queue (and share, if not "") that are not
// finished. Callers hold d.mu.
func (d *Daemon) activeJobs(queue, share string) int {
	x := d.byQueue[queue]
	if x == nil {
		return 0
	}
	n := 0
	for _, k := range x.ids {
		j := d.jobs[k.id]
		if j != nil && !j.Status.Terminal() && (share == "" || j.QuotaShare == share) {
			n++
		}
	}
	return n
}

// UpdateQueue changes a job queue.
func (d *Daemon) UpdateQueue(ctx context.Context, u QueueUpdate) (qshare.JobQueue, error) {
	name, err := d.refName("jobQueue", kindQueue, u.Ref)
	if err != nil {
		return qshare.JobQueue{}, err
	}
	if u.HasComputeEnvironments {
		return qshare.JobQueue{}, qshare.Errorf(qshare.EINVALID, "computeEnvironmentOrder is not supported: qshare runs service jobs, so give serviceEnvironmentOrder instead")
	}
	if err := validateNewState("state", u.State); err != nil {
		return qshare.JobQueue{}, err
	}
	if u.Priority != nil {
		if err := validateQueuePriority(*u.Priority); err != nil {
			return qshare.JobQueue{}, err
		}
	}
	if u.JobStateTimeLimitActions != nil {
		if err := validateTimeLimitActions(u.JobStateTimeLimitActions); err != nil {
			return qshare.JobQueue{}, err
		}
	}
	if err := d.lockChanges(); err != nil {
		return qshare.JobQueue{}, err
	}
	defer d.resMu.Unlock()
	d.mu.RLock()
	old := d.queues[name]
	var q qshare.JobQueue
	err = func() error {
		if old == nil {
			return errNoQueue(name)
		}
		if old.Status == qshare.StatusDeleting {
			return qshare.Errorf(qshare.ECONFLICT, "Job queue %s is being deleted: it can no longer change", name)
		}
		q = *old
		q.Status = changing(old.Status)
		if u.SchedulingPolicyARN != nil {
			if *u.SchedulingPolicyARN == "" {
				if old.SchedulingPolicyARN != "" {
					return qshare.Errorf(qshare.EINVALID, "the scheduling policy of job queue %s cannot be removed, only replaced by another of the same type", name)
				}
			} else {
				p, err := d.resolvePolicy(*u.SchedulingPolicyARN)
				if err != nil {
					return err
				}
				if old.SchedulingPolicyARN == "" {
					return qshare.Errorf(qshare.EINVALID, "job queue %s was created without a scheduling policy (FIFO): a policy cannot be added later; create a new job queue with the policy", name)
				}
				oldName, _ := d.refName("", kindPolicy, old.SchedulingPolicyARN)
				if op := d.policies[oldName]; op != nil && (op.QuotaSharePolicy != nil) != (p.QuotaSharePolicy != nil) {
					return qshare.Errorf(qshare.EINVALID, "job queue %s has a %s policy: it can only be replaced by another policy of the same type", name, policyType(op))
				}
				q.SchedulingPolicyARN = p.ARN
			}
		}
		if u.ServiceEnvironmentOrder != nil {
			order, err := d.resolveEnvOrder(u.ServiceEnvironmentOrder, name)
			if err != nil {
				return err
			}
			if order[0].ServiceEnvironment != d.EnvironmentARN(d.envName(old)) {
				if n := d.activeJobs(name, ""); n > 0 {
					return qshare.Errorf(qshare.ECONFLICT, "job queue %s has %d unfinished jobs: its service environment can only change when it has none", name, n)
				}
			}
			q.ServiceEnvironmentOrder = order
		}
		return nil
	}()
	d.mu.RUnlock()
	if err != nil {
		return qshare.JobQueue{}, err
	}
	if u.State != nil {
		q.State = *u.State
	}
	if u.Priority != nil {
		q.Priority = int(*u.Priority)
	}
	if u.JobStateTimeLimitActions != nil {
		q.JobStateTimeLimitActions = u.JobStateTimeLimitActions
	}
	if err := d.commit(ctx, &store.Change{PutQueues: []qshare.JobQueue{q}}); err != nil {
		return qshare.JobQueue{}, err
	}
	d.applyQueue(&q)
	d.log.Info("job queue updated", "queue", q.Name, "state", q.State, "policy", q.SchedulingPolicyARN)
	return q, nil
}

func policyType(p *qshare.SchedulingPolicy) string {
	if p.QuotaSharePolicy != nil {
		return "quota-share"
	}
	return "fair-share"
}

// DeleteQueue deletes a DISABLED job queue that has no quota shares. As in
// AWS Batch, its unfinished jobs are terminated: the queue shows status
// DELETING until the last of them has stopped, and is gone after that.
func (d *Daemon) DeleteQueue(ctx context.Context, ref string) error {
	name, err := d.refName("jobQueue", kindQueue, ref)
	if err != nil {
		return err
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	d.mu.RLock()
	q := d.queues[name]
	var shares []string
	for k := range d.shares {
		if k.Queue == name {
			shares = append(shares, k.Name)
		}
	}
	active := d.activeJobs(name, "")
	d.mu.RUnlock()
	if q == nil {
		return errNoQueue(name)
	}
	if q.Status == qshare.StatusDeleting {
		return nil
	}
	if q.State != qshare.Disabled {
		return qshare.Errorf(qshare.ECONFLICT, "Job queue %s is ENABLED: disable it with UpdateJobQueue (state DISABLED) before deleting it", name)
	}
	if len(shares) > 0 {
		sort.Strings(shares)
		return qshare.Errorf(qshare.ECONFLICT, "Job queue %s still has quota shares (%s): disable and delete them with DeleteQuotaShare first", name, strings.Join(shares, ", "))
	}
	if active == 0 {
		return d.removeQueue(ctx, q)
	}
	n := *q
	n.Status = qshare.StatusDeleting
	if err := commitPut(ctx, d, &store.Change{PutQueues: []qshare.JobQueue{n}}, d.queues, name, &n); err != nil {
		return err
	}
	d.log.Info("job queue deleting: terminating its jobs", "queue", name, "jobs", active)
	d.drainQueue(name)
	return nil
}

// drainQueue terminates the jobs of a DELETING queue and then removes it.
func (d *Daemon) drainQueue(name string) {
	d.drain(name, "", fmt.Sprintf("Terminated because job queue %s was deleted", name), func(ctx context.Context) {
		if cur := lookup(d, d.queues, name); cur != nil && cur.Status == qshare.StatusDeleting {
			if err := d.removeQueue(ctx, cur); err != nil {
				d.log.Error("job queue deletion failed; it stays DELETING until the next start", "queue", name, "err", err)
			}
		}
	})
}

// removeQueue deletes a queue record and forgets it. Callers hold resMu.
func (d *Daemon) removeQueue(ctx context.Context, q *qshare.JobQueue) error {
	name := q.Name
	if err := commitForget(ctx, d, &store.Change{DeleteQueues: []string{name}}, d.queues, name); err != nil {
		return err
	}
	d.engMu.Lock()
	if !d.isQuotaQueue(q) {
		if err := d.eng.RemoveShare(name, fifoShareName); err != nil {
			d.log.Error("engine refused to remove queue share", "queue", name, "err", err)
		}
	}
	if err := d.eng.RemoveQueue(name); err != nil {
		d.log.Error("engine refused to remove queue", "queue", name, "err", err)
	}
	d.engMu.Unlock()
	d.log.Info("job queue deleted", "queue", name)
	return nil
}

// Queues returns the named queues (names or ARNs; unknown ones left out), or
// every queue when refs is empty, in name order.
func (d *Daemon) Queues(refs []string) ([]qshare.JobQueue, error) {
	return listByRefs(d, d.queues, "jobQueues", kindQueue, refs)
}

// ---- quota shares ----

// ShareInput is a CreateQuotaShare request.
type ShareInput struct {
	Name              string
	Queue             string // name or ARN
	CapacityLimits    []qshare.CapacityLimit
	Strategy          qshare.Strategy
	BorrowLimit       *int64
	InSharePreemption qshare.State
	State             qshare.State
	Tags              map[string]string
}

// ShareUpdate is an UpdateQuotaShare request; nil members are left as they
// are. Sharing is set when resourceSharingConfiguration was given.
type ShareUpdate struct {
	ARN               string
	CapacityLimits    []qshare.CapacityLimit
	Sharing           bool
	Strategy          qshare.Strategy
	BorrowLimit       *int64
	InSharePreemption *qshare.State
	State             *qshare.State
}

func validateShareLimits(ls []qshare.CapacityLimit) error {
	return validateEnvLimits(ls)
}

// shareRef turns a quota share ARN into its key.
func (d *Daemon) shareRef(field, arn string) (store.ShareKey, error) {
	if arn == "" {
		return store.ShareKey{}, qshare.Errorf(qshare.EINVALID, "%s is required", field)
	}
	p, ok := d.parseARN(arn)
	if !ok || p.kind != kindShare {
		return store.ShareKey{}, qshare.Errorf(qshare.EINVALID, "%s %q is not a quota share ARN of this server: use %s", field, arn, d.QueueARN("QUEUE")+"/quota-share/NAME")
	}
	return store.ShareKey{Queue: p.queue, Name: p.name}, nil
}

func errNoShare(k store.ShareKey) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Quota share %s does not exist in job queue %s", k.Name, k.Queue)
}

// CreateShare creates a quota share in a job queue with a quota-share policy.
func (d *Daemon) CreateShare(ctx context.Context, in ShareInput) (qshare.QuotaShare, error) {
	if err := qshare.ValidateName("quotaShareName", in.Name); err != nil {
		return qshare.QuotaShare{}, err
	}
	queue, err := d.refName("jobQueue", kindQueue, in.Queue)
	if err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := validateShareLimits(in.CapacityLimits); err != nil {
		return qshare.QuotaShare{}, err
	}
	borrow, err := qshare.ValidateSharing("resourceSharingConfiguration", in.Strategy, in.BorrowLimit)
	if err != nil {
		return qshare.QuotaShare{}, err
	}
	if in.InSharePreemption == "" {
		return qshare.QuotaShare{}, qshare.Errorf(qshare.EINVALID, "preemptionConfiguration.inSharePreemption is required: use ENABLED or DISABLED")
	}
	if err := qshare.ValidateState("preemptionConfiguration.inSharePreemption", in.InSharePreemption, false); err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := qshare.ValidateState("state", in.State, true); err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := qshare.ValidateTags("tags", in.Tags); err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := d.lockChanges(); err != nil {
		return qshare.QuotaShare{}, err
	}
	defer d.resMu.Unlock()
	key := store.ShareKey{Queue: queue, Name: in.Name}
	d.mu.RLock()
	q := d.queues[queue]
	_, dup := d.shares[key]
	n := 0
	for k := range d.shares {
		if k.Queue == queue {
			n++
		}
	}
	d.mu.RUnlock()
	switch {
	case q == nil:
		return qshare.QuotaShare{}, errNoQueue(queue)
	case !d.isQuotaQueue(q):
		return qshare.QuotaShare{}, qshare.Errorf(qshare.EINVALID, "Job queue %s has no quota-share scheduling policy: quota shares need a queue whose schedulingPolicyArn names a policy with a quotaSharePolicy", queue)
	case dup:
		return qshare.QuotaShare{}, qshare.Errorf(qshare.EINVALID, "Quota share %s already exists in job queue %s", in.Name, queue)
	case n >= d.cfg.MaxSharesPerQueue:
		return qshare.QuotaShare{}, qshare.Errorf(qshare.EINVALID, "Job queue %s already has %d quota shares, the most allowed: delete one, or start the server with a higher --max-quota-shares-per-queue", queue, n)
	}
	return d.putShare(ctx, qshare.QuotaShare{Name: in.Name, ARN: d.ShareARN(queue, in.Name), JobQueue: queue,
		CapacityLimits: in.CapacityLimits, Strategy: in.Strategy, BorrowLimit: borrow,
		InSharePreemption: in.InSharePreemption, State: orEnabled(in.State), Status: qshare.StatusCreating,
		Tags: in.Tags, CreatedAt: d.now()}, "created")
}

// putShare commits a new or changed quota share and installs it; done is
// the log's verb. Callers hold resMu.
func (d *Daemon) putShare(ctx context.Context, s qshare.QuotaShare, done string) (qshare.QuotaShare, error) {
	if err := d.commit(ctx, &store.Change{PutShares: []qshare.QuotaShare{s}}); err != nil {
		return qshare.QuotaShare{}, err
	}
	d.applyShare(&s)
	d.log.Info("quota share "+done, "queue", s.JobQueue, "share", s.Name, "limits", qshare.Limits(s.CapacityLimits).String(),
		"strategy", s.Strategy, "borrowLimit", s.BorrowLimit, "inSharePreemption", s.InSharePreemption, "state", s.State)
	return s, nil
}

func shareConfig(s *qshare.QuotaShare) engine.ShareConfig {
	return engine.ShareConfig{Queue: s.JobQueue, Name: s.Name, Limits: qshare.Limits(s.CapacityLimits),
		Strategy: s.Strategy, BorrowLimit: s.BorrowLimit, InSharePreemption: s.InSharePreemption == qshare.Enabled,
		Disabled: s.State == qshare.Disabled}
}

// applyShare installs a committed CREATING or UPDATING quota share in memory
// and has the control loop apply and settle it. Callers hold resMu.
func (d *Daemon) applyShare(s *qshare.QuotaShare) {
	install(d, d.shares, store.ShareKey{Queue: s.JobQueue, Name: s.Name}, s)
	d.settleShare(s)
}

// UpdateShare changes a quota share.
func (d *Daemon) UpdateShare(ctx context.Context, u ShareUpdate) (qshare.QuotaShare, error) {
	key, err := d.shareRef("quotaShareArn", u.ARN)
	if err != nil {
		return qshare.QuotaShare{}, err
	}
	if u.CapacityLimits != nil {
		if err := validateShareLimits(u.CapacityLimits); err != nil {
			return qshare.QuotaShare{}, err
		}
	}
	var borrow int64
	if u.Sharing {
		if borrow, err = qshare.ValidateSharing("resourceSharingConfiguration", u.Strategy, u.BorrowLimit); err != nil {
			return qshare.QuotaShare{}, err
		}
	}
	if err := validateNewState("preemptionConfiguration.inSharePreemption", u.InSharePreemption); err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := validateNewState("state", u.State); err != nil {
		return qshare.QuotaShare{}, err
	}
	if err := d.lockChanges(); err != nil {
		return qshare.QuotaShare{}, err
	}
	defer d.resMu.Unlock()
	old := lookup(d, d.shares, key)
	if old == nil {
		return qshare.QuotaShare{}, errNoShare(key)
	}
	if old.Status == qshare.StatusDeleting {
		return qshare.QuotaShare{}, qshare.Errorf(qshare.ECONFLICT, "Quota share %s is being deleted: it can no longer change", key.Name)
	}
	s := *old
	s.Status = changing(old.Status)
	if u.CapacityLimits != nil {
		s.CapacityLimits = u.CapacityLimits
	}
	if u.Sharing {
		s.Strategy, s.BorrowLimit = u.Strategy, borrow
	}
	if u.InSharePreemption != nil {
		s.InSharePreemption = *u.InSharePreemption
	}
	if u.State != nil {
		s.State = *u.State
	}
	return d.putShare(ctx, s, "updated")
}

// DeleteShare deletes a DISABLED quota share. As in AWS Batch, its
// unfinished jobs are terminated: the share shows status DELETING until the
// last of them has stopped, and is gone after that.
func (d *Daemon) DeleteShare(ctx context.Context, arn string) error {
	key, err := d.shareRef("quotaShareArn", arn)
	if err != nil {
		return err
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	d.mu.RLock()
	s := d.shares[key]
	active := d.activeJobs(key.Queue, key.Name)
	d.mu.RUnlock()
	if s == nil {
		return errNoShare(key)
	}
	if s.Status == qshare.StatusDeleting {
		return nil
	}
	if s.State != qshare.Disabled {
		return qshare.Errorf(qshare.ECONFLICT, "Quota share %s is ENABLED: disable it with UpdateQuotaShare (state DISABLED) before deleting it", key.Name)
	}
	if active == 0 {
		return d.removeShare(ctx, key)
	}
	n := *s
	n.Status = qshare.StatusDeleting
	if err := commitPut(ctx, d, &store.Change{PutShares: []qshare.QuotaShare{n}}, d.shares, key, &n); err != nil {
		return err
	}
	d.log.Info("quota share deleting: terminating its jobs", "queue", key.Queue, "share", key.Name, "jobs", active)
	d.drainShare(key)
	return nil
}

// drainShare terminates the jobs of a DELETING share and then removes it.
func (d *Daemon) drainShare(key store.ShareKey) {
	d.drain(key.Queue, key.Name, fmt.Sprintf("Terminated because quota share %s was deleted", key.Name), func(ctx context.Context) {
		if cur := lookup(d, d.shares, key); cur != nil && cur.Status == qshare.StatusDeleting {
			if err := d.removeShare(ctx, key); err != nil {
				d.log.Error("quota share deletion failed; it stays DELETING until the next start", "share", key.Name, "err", err)
			}
		}
	})
}

// removeShare deletes a share record and forgets it. Callers hold resMu.
func (d *Daemon) removeShare(ctx context.Context, key store.ShareKey) error {
	if err := commitForget(ctx, d, &store.Change{DeleteShares: []store.ShareKey{key}}, d.shares, key); err != nil {
		return err
	}
	d.engMu.Lock()
	if err := d.eng.RemoveShare(key.Queue, key.Name); err != nil {
		d.log.Error("engine refused to remove share", "queue", key.Queue, "share", key.Name, "err", err)
	}
	d.engMu.Unlock()
	d.log.Info("quota share deleted", "queue", key.Queue, "share", key.Name)
	return nil
}

// drain terminates the unfinished jobs of a queue (and share, if not ""),
// waits in the background until every one of them has stopped, and then
// runs finish with resMu held.
func (d *Daemon) drain(queue, share, reason string, finish func(context.Context)) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx := d.lctx
		for {
			d.mu.RLock()
			var ids []string
			if x := d.byQueue[queue]; x != nil {
				for _, k := range x.ids {
					if j := d.jobs[k.id]; j != nil && !j.Status.Terminal() && (share == "" || j.QuotaShare == share) {
						ids = append(ids, k.id)
					}
				}
			}
			d.mu.RUnlock()
			if len(ids) == 0 {
				break
			}
			_ = d.command(ctx, func(c *cycle) error {
				for _, id := range ids {
					c.terminate(id, reason)
				}
				return nil
			})
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		d.resMu.Lock()
		defer d.resMu.Unlock()
		finish(ctx)
	}()
}

// Share returns the quota share with the given ARN.
func (d *Daemon) Share(arn string) (qshare.QuotaShare, error) {
	key, err := d.shareRef("quotaShareArn", arn)
	if err != nil {
		return qshare.QuotaShare{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.shares[key]
	if s == nil {
		return qshare.QuotaShare{}, errNoShare(key)
	}
	return *s, nil
}

// Shares returns the quota shares of a job queue (name or ARN), in name order.
func (d *Daemon) Shares(queueRef string) ([]qshare.QuotaShare, error) {
	queue, err := d.refName("jobQueue", kindQueue, queueRef)
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.queues[queue] == nil {
		return nil, errNoQueue(queue)
	}
	var out []qshare.QuotaShare
	for k, s := range d.shares {
		if k.Queue == queue {
			out = append(out, *s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"qshare"
	"qshare/engine"
	"qshare/store"
)

// The job queue operations: create, update, delete and describe.

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
	if err := checkTagsOf(kindQueue, in.Tags); err != nil {
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
func (d *Daemon) envName(q *qshare.JobQueue) string { return engine.EnvironmentName(q) }

// applyQueue installs a committed CREATING or UPDATING job queue in memory
// and has the control loop apply and settle it. Callers hold resMu.
func (d *Daemon) applyQueue(q *qshare.JobQueue) {
	install(d, d.queues, q.Name, q)
	d.settleQueue(q)
}

// fifoShare is the engine share of a job queue without a quota-share
// policy (engine.QueueShareOf), on the environment the daemon holds now.
func (d *Daemon) fifoShare(q *qshare.JobQueue) engine.ShareConfig {
	c := engine.QueueShareOf(q, lookup(d, d.envs, d.envName(q)))
	c.FairShare = engine.FairShareOf(lookup(d, d.policies, engine.PolicyName(q)))
	return c
}

// isQuotaQueue reports whether the queue has a quota-share policy.
func (d *Daemon) isQuotaQueue(q *qshare.JobQueue) bool {
	return engine.HasQuotaShares(lookup(d, d.policies, engine.PolicyName(q)))
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
		if err := d.eng.RemoveShare(name, engine.QueueShare); err != nil {
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

package daemon

import (
	"context"
	"strings"

	"qshare"
	"qshare/engine"
	"qshare/store"
)

// The scheduling policy operations: create, update, delete and list.

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
	if err := checkTagsOf(kindPolicy, in.Tags); err != nil {
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
	if p.QuotaSharePolicy == nil {
		// A fair-share policy's weights, decay and reservation take effect
		// at the next pass in every queue that uses it.
		d.post(op{kind: opCommand, reply: make(chan error, 1), fn: func(*cycle) error {
			d.mu.RLock()
			var qs []*qshare.JobQueue
			for _, q := range d.queues {
				if engine.PolicyName(q) == name {
					qs = append(qs, q)
				}
			}
			d.mu.RUnlock()
			for _, q := range qs {
				if err := d.engineQueue(q); err != nil {
					return err
				}
			}
			return nil
		}})
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

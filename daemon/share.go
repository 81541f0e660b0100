package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"qshare"
	"qshare/store"
)

// The quota share operations: create, update, delete, describe and list.

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
	if err := checkTagsOf(kindShare, in.Tags); err != nil {
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
	plans := d.sharePlans(key)
	d.mu.RUnlock()
	if s == nil {
		return errNoShare(key)
	}
	if len(plans) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "Quota share %s has capacity plans (%s): delete them first", key.Name, strings.Join(plans, ", "))
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

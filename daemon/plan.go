package daemon

import (
	"context"
	"sort"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/store"
)

// Capacity plans (a qshare extension, issue 21): capacity of one instance
// type that a quota share has for a window of time. A plan is put whole
// (created or replaced) and deleted; it has no status and is in force at
// once, as a scheduling policy is. The engine applies its window's edges at
// the passes whose time reaches them (engine.NextWake names the next one).

// PlanInput is a capacity plan as a client gives it: everything but its ARN
// and creation time, which the server sets.
type PlanInput struct {
	Name           string
	JobQueue       string
	QuotaShare     string
	InstanceType   string
	InstanceCount  int64
	StartTime      time.Time
	EndTime        time.Time
	WarningSeconds *int64
	// CheckOld, when set, is called with the plan this one replaces, inside
	// the change (no other change of plans can come between), and its
	// error refuses the change: how the API checks that the caller may
	// update the old plan's share, against the plan actually replaced.
	CheckOld func(old qshare.CapacityPlan) error
}

func errNoPlan(name string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Capacity plan %s does not exist: check the name, or create it", name)
}

// PutPlan creates a capacity plan, or replaces the one of the same name. Its
// share must exist in a job queue with a quota-share policy. A plan that
// jobs name cannot move to another share or instance type (ECONFLICT).
func (d *Daemon) PutPlan(ctx context.Context, in PlanInput) (qshare.CapacityPlan, error) {
	p := qshare.CapacityPlan{Name: in.Name, JobQueue: in.JobQueue, QuotaShare: in.QuotaShare, InstanceType: in.InstanceType,
		InstanceCount: in.InstanceCount, StartTime: in.StartTime.UTC(), EndTime: in.EndTime.UTC(), WarningSeconds: in.WarningSeconds}
	if err := qshare.ValidateCapacityPlan("", &p); err != nil {
		return qshare.CapacityPlan{}, err
	}
	p.ARN = qshare.PlanARN(d.cfg.Region, d.cfg.AccountID, p.Name)
	if err := d.lockChanges(); err != nil {
		return qshare.CapacityPlan{}, err
	}
	defer d.resMu.Unlock()
	q := lookup(d, d.queues, p.JobQueue)
	if q == nil {
		return qshare.CapacityPlan{}, errNoQueue(p.JobQueue)
	}
	if !d.isQuotaQueue(q) {
		return qshare.CapacityPlan{}, qshare.Errorf(qshare.EINVALID, "jobQueue %s has no quota-share scheduling policy: a capacity plan gives capacity to a quota share", p.JobQueue)
	}
	key := store.ShareKey{Queue: p.JobQueue, Name: p.QuotaShare}
	if s := lookup(d, d.shares, key); s == nil || s.Status == qshare.StatusDeleting {
		return qshare.CapacityPlan{}, errNoShare(key)
	}
	d.mu.RLock()
	old := d.plans[p.Name]
	users := d.planUsers(p.ARN)
	d.mu.RUnlock()
	p.CreatedAt = d.now()
	if old != nil && in.CheckOld != nil {
		if err := in.CheckOld(*old); err != nil {
			return qshare.CapacityPlan{}, err
		}
	}
	if old != nil {
		p.CreatedAt = old.CreatedAt
		if users > 0 && (old.JobQueue != p.JobQueue || old.QuotaShare != p.QuotaShare || old.InstanceType != p.InstanceType) {
			return qshare.CapacityPlan{}, qshare.Errorf(qshare.ECONFLICT, "Capacity plan %s has %d unfinished job(s): it cannot move to another quota share or instance type until they are done", p.Name, users)
		}
	}
	if err := commitPut(ctx, d, &store.Change{PutPlans: []qshare.CapacityPlan{p}}, d.plans, p.Name, &p); err != nil {
		return qshare.CapacityPlan{}, err
	}
	if err := d.command(ctx, func(*cycle) error { return d.eng.SetPlan(engine.PlanOf(&p)) }); err != nil {
		d.log.Error("engine refused capacity plan", "plan", p.Name, "err", err)
		return qshare.CapacityPlan{}, err
	}
	d.log.Info("capacity plan put", "plan", p.Name, "queue", p.JobQueue, "share", p.QuotaShare, "instanceType", p.InstanceType,
		"instances", p.InstanceCount, "start", p.StartTime, "end", p.EndTime, "warning", p.Warning())
	return p, nil
}

// DeletePlan deletes a capacity plan that no unfinished job names
// (ECONFLICT otherwise); its capacity leaves its share at once, which
// preempts nothing.
func (d *Daemon) DeletePlan(ctx context.Context, name string) error {
	return d.DeletePlanChecked(ctx, name, nil)
}

// DeletePlanChecked is DeletePlan that first calls check (when set) with
// the plan it deletes, inside the change, and is refused by its error (see
// PlanInput.CheckOld).
func (d *Daemon) DeletePlanChecked(ctx context.Context, name string, check func(qshare.CapacityPlan) error) error {
	if err := qshare.ValidateName("name", name); err != nil {
		return err
	}
	if err := d.lockChanges(); err != nil {
		return err
	}
	defer d.resMu.Unlock()
	d.mu.RLock()
	p := d.plans[name]
	users := 0
	if p != nil {
		users = d.planUsers(p.ARN)
	}
	d.mu.RUnlock()
	if p == nil {
		return errNoPlan(name)
	}
	if check != nil {
		if err := check(*p); err != nil {
			return err
		}
	}
	if users > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "Capacity plan %s has %d unfinished job(s): terminate them, or let them finish, before deleting it", name, users)
	}
	if err := commitForget(ctx, d, &store.Change{DeletePlans: []string{name}}, d.plans, name); err != nil {
		return err
	}
	arn := p.ARN
	if err := d.command(ctx, func(*cycle) error { return d.eng.RemovePlan(arn) }); err != nil {
		d.log.Error("engine refused to remove capacity plan", "plan", name, "err", err)
		return err
	}
	d.log.Info("capacity plan deleted", "plan", name)
	return nil
}

// Plan returns the capacity plan with the given name.
func (d *Daemon) Plan(name string) (qshare.CapacityPlan, error) {
	if err := qshare.ValidateName("name", name); err != nil {
		return qshare.CapacityPlan{}, err
	}
	p := lookup(d, d.plans, name)
	if p == nil {
		return qshare.CapacityPlan{}, errNoPlan(name)
	}
	return *p, nil
}

// Plans returns every capacity plan, in name order.
func (d *Daemon) Plans() []qshare.CapacityPlan {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]qshare.CapacityPlan, 0, len(d.plans))
	for _, p := range d.plans {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// planUsers counts the unfinished jobs that name the plan with ARN arn.
// Callers hold d.mu.
func (d *Daemon) planUsers(arn string) int {
	n := 0
	for _, j := range d.jobs {
		if j.CapacityPlan == arn && !j.Status.Terminal() {
			n++
		}
	}
	return n
}

// sharePlans names the capacity plans that give capacity to a share.
// Callers hold d.mu.
func (d *Daemon) sharePlans(key store.ShareKey) []string {
	var out []string
	for _, p := range d.plans {
		if p.JobQueue == key.Queue && p.QuotaShare == key.Name {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// checkPlan checks a submit's ResourceConfig.TrainingPlanArn: a plan of
// this server, of the job's share, of the job's only instance type, with
// at least as many instances as the job needs. Callers hold d.mu.
func (d *Daemon) checkPlan(arn, queue, share string, demand qshare.Capacity) error {
	const field = "serviceRequestPayload ResourceConfig.TrainingPlanArn"
	region, account, name, ok := qshare.ParsePlanARN(arn)
	if !ok {
		return qshare.Errorf(qshare.EINVALID, "%s %q is not a training-plan ARN: use arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME", field, arn)
	}
	p := d.plans[name]
	if p == nil || region != d.cfg.Region || account != d.cfg.AccountID {
		return qshare.Errorf(qshare.EINVALID, "%s names capacity plan %s, which this server does not have", field, name)
	}
	if p.JobQueue != queue || p.QuotaShare != share {
		return qshare.Errorf(qshare.EINVALID, "%s names capacity plan %s, which gives capacity to quota share %s of job queue %s: submit the job there", field, name, p.QuotaShare, p.JobQueue)
	}
	for t, n := range demand {
		if t != p.InstanceType {
			return qshare.Errorf(qshare.EINVALID, "%s names capacity plan %s, which has only %s: the job asks for %s", field, name, p.InstanceType, t)
		}
		if n > p.InstanceCount {
			return qshare.Errorf(qshare.EINVALID, "%s names capacity plan %s, which has %d %s: the job asks for %d", field, name, p.InstanceCount, p.InstanceType, n)
		}
	}
	return nil
}

package daemon

import (
	"context"
	"strings"

	"qshare"
	"qshare/executor"
	"qshare/store"
)

// The service environment operations: create, update, delete and describe.

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
	if err := d.checkExecutorTag("tags", in.Tags); err != nil {
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
	e.StatusReason = d.capacityWarning(&e)
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

// capacityWarning asks the environment's executor whether its hosts can
// give an environment with these limits what it promises (GPUs, say), and
// returns its warning, or "". The warning is kept as the environment's
// statusReason, so that describing it shows the problem, and logged.
func (d *Daemon) capacityWarning(e *qshare.ServiceEnvironment) string {
	if cc, ok := d.execs.Get(envExecutor(e)).(executor.CapacityChecker); ok {
		return cc.CheckCapacity(qshare.Limits(e.CapacityLimits))
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
// While an environment's executor reports trouble
// (executor.HealthReporter), it leads that environment's statusReason.
func (d *Daemon) Environments(refs []string) ([]qshare.ServiceEnvironment, error) {
	es, err := listByRefs(d, d.envs, "serviceEnvironments", kindEnvironment, refs)
	return d.withHealth(es), err
}

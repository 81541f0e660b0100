package daemon

import (
	"context"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/store"
)

// The status lifecycle of service environments, job queues and quota shares,
// as in AWS Batch: a create is committed CREATING and an update UPDATING,
// durably, before the request is answered; the control loop then applies the
// change to the engine, in the order the changes were committed, and only
// after that is the resource committed VALID (INVALID, with the reason, if
// the engine refused it). A resource that changes again before it has
// settled is settled by its newest change. A resource left CREATING or
// UPDATING by a stop is settled by the next start, which has given the
// engine every stored resource (settleRecovered).
//
// Jobs may be submitted to a queue or share that is still CREATING: the
// engine learns about the resource before it learns about any job submitted
// after the create was answered, so such a job waits RUNNABLE like any other.

// errNotStarted is the answer to a resource change before Start.
func errNotStarted() error {
	return qshare.Errorf(qshare.EINTERNAL, "the server is starting; retry the request")
}

// changing is the status of a resource being changed from one with status
// old: a resource never settled stays CREATING, any other is UPDATING.
func changing(old qshare.ResourceStatus) qshare.ResourceStatus {
	if old == qshare.StatusCreating {
		return qshare.StatusCreating
	}
	return qshare.StatusUpdating
}

// settle hands a committed change to the control loop. current reports
// whether memory still holds the changed record; apply gives it to the
// engine (the loop holds engMu); done commits the settled record and
// installs it (with resMu held, and only if current). A change superseded
// before the loop reaches it is skipped: the newer one settles the resource.
func (d *Daemon) settle(current func() bool, apply func() error, done func(ctx context.Context, engErr error) error) {
	var (
		applied bool
		engErr  error
	)
	reply := make(chan error, 1)
	d.post(op{kind: opCommand, reply: reply, fn: func(*cycle) error {
		if current() {
			applied, engErr = true, apply()
		}
		return nil
	}})
	ctx := d.lctx
	d.bg.Go(func() {
		select {
		case <-reply: // the loop ran apply, or answered at shutdown without running it
		case <-ctx.Done():
			return // the next start settles it
		}
		if !applied {
			return
		}
		for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			d.resMu.Lock()
			var err error
			if current() {
				err = done(ctx, engErr)
			}
			d.resMu.Unlock()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	})
}

// commitSettled commits a settled record. A failure is logged (quietly at
// shutdown, when the next start settles the resource) and retried by settle.
func (d *Daemon) commitSettled(ctx context.Context, c *store.Change) error {
	err := d.st.Commit(ctx, c)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("store commit of a settled resource failed; retrying", "err", err)
	}
	return err
}

// settledStatus is VALID, or INVALID when the engine refused the change.
func settledStatus(engErr error) qshare.ResourceStatus {
	if engErr != nil {
		return qshare.StatusInvalid
	}
	return qshare.StatusValid
}

func (d *Daemon) settleEnv(e *qshare.ServiceEnvironment) {
	current := func() bool { return lookup(d, d.envs, e.Name) == e }
	d.settle(current, func() error { return d.engineEnv(e) }, func(ctx context.Context, engErr error) error {
		n := *e
		n.Status = settledStatus(engErr)
		if engErr != nil {
			n.StatusReason = "The scheduler refused the service environment: " + qshare.ErrorMessageOf(engErr)
		}
		if err := d.commitSettled(ctx, &store.Change{PutEnvironments: []qshare.ServiceEnvironment{n}}); err != nil {
			return err
		}
		install(d, d.envs, n.Name, &n)
		d.log.Info("service environment settled", "environment", n.Name, "from", e.Status, "to", n.Status, "reason", n.StatusReason)
		return nil
	})
}

func (d *Daemon) settleQueue(q *qshare.JobQueue) {
	current := func() bool { return lookup(d, d.queues, q.Name) == q }
	d.settle(current, func() error { return d.engineQueue(q) }, func(ctx context.Context, engErr error) error {
		n := *q
		n.Status = settledStatus(engErr)
		n.StatusReason = ""
		if engErr != nil {
			n.StatusReason = "The scheduler refused the job queue: " + qshare.ErrorMessageOf(engErr)
		}
		if err := d.commitSettled(ctx, &store.Change{PutQueues: []qshare.JobQueue{n}}); err != nil {
			return err
		}
		install(d, d.queues, n.Name, &n)
		d.log.Info("job queue settled", "queue", n.Name, "from", q.Status, "to", n.Status, "reason", n.StatusReason)
		return nil
	})
}

func (d *Daemon) settleShare(s *qshare.QuotaShare) {
	key := store.ShareKey{Queue: s.JobQueue, Name: s.Name}
	current := func() bool { return lookup(d, d.shares, key) == s }
	d.settle(current, func() error { return d.engineShare(s) }, func(ctx context.Context, engErr error) error {
		n := *s
		n.Status = settledStatus(engErr)
		if err := d.commitSettled(ctx, &store.Change{PutShares: []qshare.QuotaShare{n}}); err != nil {
			return err
		}
		install(d, d.shares, key, &n)
		if engErr != nil {
			// DescribeQuotaShare has no statusReason: the log says why.
			d.log.Error("quota share INVALID: the scheduler refused it", "queue", s.JobQueue, "share", s.Name, "err", engErr)
		}
		d.log.Info("quota share settled", "queue", n.JobQueue, "share", n.Name, "from", s.Status, "to", n.Status)
		return nil
	})
}

// engineEnv gives a service environment to the engine, and the queues
// without a quota-share policy that own it their new limits. The loop holds
// engMu.
func (d *Daemon) engineEnv(e *qshare.ServiceEnvironment) error {
	if err := d.eng.SetEnvironment(engine.EnvironmentOf(e)); err != nil {
		d.log.Error("engine refused environment", "environment", e.Name, "err", err)
		return err
	}
	d.mu.RLock()
	var fifo []*qshare.JobQueue
	for _, q := range d.queues {
		if d.envName(q) == e.Name {
			fifo = append(fifo, q)
		}
	}
	d.mu.RUnlock()
	// Queues without a quota-share policy own the whole environment.
	for _, q := range fifo {
		if d.isQuotaQueue(q) {
			continue
		}
		if err := d.eng.SetShare(d.fifoShare(q)); err != nil && q.Status != qshare.StatusCreating {
			// A CREATING queue may not have reached the engine yet: it
			// takes the environment's limits when it does.
			d.log.Error("engine refused queue share", "queue", q.Name, "err", err)
		}
	}
	return nil
}

// engineQueue gives a job queue to the engine. The loop holds engMu.
func (d *Daemon) engineQueue(q *qshare.JobQueue) error {
	if err := d.eng.SetQueue(engine.QueueOf(q)); err != nil {
		d.log.Error("engine refused queue", "queue", q.Name, "err", err)
		return err
	}
	if !d.isQuotaQueue(q) {
		// A queue without a quota-share policy is one FIFO line: the engine
		// sees it as a single share that owns the whole environment.
		if err := d.eng.SetShare(d.fifoShare(q)); err != nil {
			d.log.Error("engine refused queue share", "queue", q.Name, "err", err)
			return err
		}
	}
	return nil
}

// engineShare gives a quota share to the engine. The loop holds engMu.
func (d *Daemon) engineShare(s *qshare.QuotaShare) error {
	if err := d.eng.SetShare(engine.ShareOf(s)); err != nil {
		d.log.Error("engine refused share", "queue", s.JobQueue, "share", s.Name, "err", err)
		return err
	}
	return nil
}

// settleRecovered commits VALID the resources that a stop left CREATING or
// UPDATING: recover has given the engine every stored resource, so their
// change has taken effect. Recover calls it before the loop runs.
func (d *Daemon) settleRecovered(ctx context.Context) error {
	unsettled := func(s qshare.ResourceStatus) bool {
		return s == qshare.StatusCreating || s == qshare.StatusUpdating
	}
	var c store.Change
	for _, e := range d.envs {
		if unsettled(e.Status) {
			n := *e
			n.Status = qshare.StatusValid
			c.PutEnvironments = append(c.PutEnvironments, n)
		}
	}
	for _, q := range d.queues {
		if unsettled(q.Status) {
			n := *q
			n.Status = qshare.StatusValid
			c.PutQueues = append(c.PutQueues, n)
		}
	}
	for _, s := range d.shares {
		if unsettled(s.Status) {
			n := *s
			n.Status = qshare.StatusValid
			c.PutShares = append(c.PutShares, n)
		}
	}
	if c.Empty() {
		return nil
	}
	if err := d.st.Commit(ctx, &c); err != nil {
		return err
	}
	for i := range c.PutEnvironments {
		e := &c.PutEnvironments[i]
		d.envs[e.Name] = e
		d.log.Info("recovery: service environment settled", "environment", e.Name, "to", e.Status)
	}
	for i := range c.PutQueues {
		q := &c.PutQueues[i]
		d.queues[q.Name] = q
		d.log.Info("recovery: job queue settled", "queue", q.Name, "to", q.Status)
	}
	for i := range c.PutShares {
		s := &c.PutShares[i]
		d.shares[store.ShareKey{Queue: s.JobQueue, Name: s.Name}] = s
		d.log.Info("recovery: quota share settled", "queue", s.JobQueue, "share", s.Name, "to", s.Status)
	}
	return nil
}

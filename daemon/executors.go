package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"qshare"
	"qshare/engine"
	"qshare/executor"
)

// The server's named executors (Config.Executors). A service environment
// names the one that runs its jobs with the tag qshare:executor; an
// attempt records, when it is scheduled, the one that runs it
// (Attempt.ExecutorName), and every later call about the attempt (Start,
// Stop, Wait, Recover, Forget, its logs) goes to that one, whatever its
// environment says by then. Attempts and environments from before names
// existed have none, which is executor.DefaultName. The engine knows
// nothing of executors: each environment already carries its own limits.

// Executors returns the daemon's named executors.
func (d *Daemon) Executors() *executor.Set { return d.execs }

// envExecutor is the name of the executor that runs e's jobs.
func envExecutor(e *qshare.ServiceEnvironment) string {
	if n := e.Tags[qshare.TagExecutor]; n != "" {
		return n
	}
	return executor.DefaultName
}

// EnvironmentExecutor returns the name of the executor that runs the jobs
// of the service environment e (its tag qshare:executor, else "default").
func EnvironmentExecutor(e *qshare.ServiceEnvironment) string { return envExecutor(e) }

// queueExecutor is the name of the executor that runs the jobs of the job
// queue now: its environment's. A queue or environment that does not
// exist (the caller reports that) has the default.
func (d *Daemon) queueExecutor(queue string) string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	q := d.queues[queue]
	if q == nil {
		return executor.DefaultName
	}
	e := d.envs[engine.EnvironmentName(q)]
	if e == nil {
		return executor.DefaultName
	}
	return envExecutor(e)
}

// AttemptExecutor returns the name of the executor that ran (or runs) the
// attempt with this ID, as recorded with it: the router of the log
// endpoints (executor.Set.ByAttempt). An attempt the daemon does not hold
// has the default, which then answers that it does not know it.
func (d *Daemon) AttemptExecutor(attemptID string) string {
	i := strings.LastIndexByte(attemptID, '-')
	if i <= 0 {
		return executor.DefaultName
	}
	d.mu.RLock()
	j := d.jobs[attemptID[:i]]
	d.mu.RUnlock()
	if j != nil {
		if a := attemptByID(j, attemptID); a != nil && a.ExecutorName != "" {
			return a.ExecutorName
		}
	}
	return executor.DefaultName
}

// checkExecutorTag refuses tags whose qshare:executor names no executor of
// this server, under field; without the tag, a server that has no executor
// named default.
func (d *Daemon) checkExecutorTag(field string, tags map[string]string) error {
	n, ok := tags[qshare.TagExecutor]
	if !ok {
		if d.execs.Has(executor.DefaultName) {
			return nil
		}
		return qshare.Errorf(qshare.EINVALID, "%s has no key %s, and this server has no executor named %s: name one of %s in the tag",
			field, qshare.TagExecutor, executor.DefaultName, strings.Join(d.execs.Names(), ", "))
	}
	if !d.execs.Has(n) || n == "" {
		return qshare.Errorf(qshare.EINVALID, "%s key %s is %q: this server has no executor of that name; it has %s (qshare serve --executors)",
			field, qshare.TagExecutor, truncateID(n), strings.Join(d.execs.Names(), ", "))
	}
	return nil
}

// checkExecutorChange refuses a change of the environment's executor
// (from the tags old to the tags new) unless the environment is DISABLED
// and runs no attempt: an attempt belongs to the executor that started it,
// and an ENABLED environment could start one on the old executor while the
// change commits. Callers hold resMu, so the state cannot change under
// them; the loop answers whether an attempt runs.
func (d *Daemon) checkExecutorChange(ctx context.Context, e *qshare.ServiceEnvironment, tags map[string]string) error {
	from, to := envExecutor(e), envExecutor(&qshare.ServiceEnvironment{Tags: tags})
	if from == to {
		return nil
	}
	if err := d.checkExecutorTag("tags", map[string]string{qshare.TagExecutor: to}); err != nil {
		return err
	}
	if e.State != qshare.Disabled {
		return qshare.Errorf(qshare.EINVALID, "Service environment %s is %s: its executor (tag %s, now %s) can change only while it is DISABLED and runs no attempt; disable it with UpdateServiceEnvironment first",
			e.Name, e.State, qshare.TagExecutor, from)
	}
	var busy []string
	err := d.command(ctx, func(c *cycle) error {
		for _, r := range c.d.runs {
			if j := c.job(r.job); j != nil && d.queueEnv(j.JobQueue) == e.Name {
				busy = append(busy, r.job)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(busy) > 0 {
		sort.Strings(busy)
		more := ""
		if len(busy) > 5 {
			busy, more = busy[:5], fmt.Sprintf(" and %d more", len(busy)-5)
		}
		return qshare.Errorf(qshare.EINVALID, "Service environment %s still has unfinished attempts on executor %s (jobs %s%s): its executor can change only once they have ended; terminate them, or wait",
			e.Name, from, strings.Join(busy, ", "), more)
	}
	return nil
}

// queueEnv is the name of the environment a job queue draws on now.
func (d *Daemon) queueEnv(queue string) string {
	if q := lookup(d, d.queues, queue); q != nil {
		return engine.EnvironmentName(q)
	}
	return ""
}

// checkStoredExecutors refuses to lead a store whose environments or
// unfinished attempts name an executor that this server does not have (its
// executors file dropped a name still in use): their jobs would have
// nowhere to run, or their running attempts nobody to recover them.
func (d *Daemon) checkStoredExecutors(envs []qshare.ServiceEnvironment, jobs []qshare.Job) error {
	var missing []string
	for i := range envs {
		if n := envExecutor(&envs[i]); !d.execs.Has(n) {
			missing = append(missing, fmt.Sprintf("service environment %s names executor %q", envs[i].Name, n))
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Status.Terminal() {
			continue
		}
		if a := j.LatestAttempt(); a != nil && a.StoppedAt.IsZero() && !d.execs.Has(a.ExecutorName) {
			missing = append(missing, fmt.Sprintf("attempt %s of job %s ran on executor %q", a.ID, j.ID, a.ExecutorName))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	more := ""
	if len(missing) > 5 {
		missing, more = missing[:5], fmt.Sprintf(" (and %d more)", len(missing)-5)
	}
	return fmt.Errorf("daemon: the store uses executors this server does not define: %s%s; this server has %s: put the names back in the executors file (qshare serve --executors), or move the environments to another executor first",
		strings.Join(missing, "; "), more, strings.Join(d.execs.Names(), ", "))
}

// anyPendingReasoner reports whether some executor can say why an attempt
// waits (executor.PendingReasoner).
func (d *Daemon) anyPendingReasoner() bool {
	found := false
	d.execs.Each(func(_ string, ex executor.Executor) {
		_, ok := ex.(executor.PendingReasoner)
		found = found || ok
	})
	return found
}

// pendingReasonsVersion sums the versions of the executors' reasons
// (executor.PendingReasonsVersioner: counters, so the sum changes when
// any does); ok is false when some PendingReasoner has no version, and
// the reasons must be looked at every cycle.
func (d *Daemon) pendingReasonsVersion() (version uint64, ok bool) {
	ok = true
	d.execs.Each(func(_ string, ex executor.Executor) {
		if _, pr := ex.(executor.PendingReasoner); !pr {
			return
		}
		if v, vok := ex.(executor.PendingReasonsVersioner); vok {
			version += v.PendingReasonsVersion()
		} else {
			ok = false
		}
	})
	return version, ok
}

// storedExecutor is the name an attempt records: "" for the default, so
// that a server with one executor stores attempts as it always did.
func storedExecutor(name string) string {
	if name == executor.DefaultName {
		return ""
	}
	return name
}

// nameOrDefault is an executor's name as it is shown: "" is the default.
func nameOrDefault(name string) string {
	if name == "" {
		return executor.DefaultName
	}
	return name
}

package daemon

import (
	"sort"

	"qshare"
	"qshare/engine"
	"qshare/executor"
)

// Lending returns who lends to whom in a job queue (a name or an ARN), or,
// when queueRef is "", in every job queue with a quota-share policy, in name
// order. It is the engine's own attribution (engine.Lending), read under
// engMu, so it agrees with the decisions the engine has made. A queue that
// has not reached the engine yet (CREATING) has no shares in its answer.
// Each answer names its environment's executor and that executor's health.
func (d *Daemon) Lending(queueRef string) ([]qshare.Lending, error) {
	var names []string
	if queueRef != "" {
		name, err := d.refName("jobQueue", kindQueue, queueRef)
		if err != nil {
			return nil, err
		}
		if lookup(d, d.queues, name) == nil {
			return nil, errNoQueue(name)
		}
		names = []string{name}
	} else {
		d.mu.RLock()
		var quota []*qshare.JobQueue
		for _, q := range d.queues {
			quota = append(quota, q)
		}
		d.mu.RUnlock()
		for _, q := range quota {
			if d.isQuotaQueue(q) {
				names = append(names, q.Name)
			}
		}
		sort.Strings(names)
	}
	out := make([]qshare.Lending, 0, len(names))
	d.engMu.Lock()
	for _, n := range names {
		l, ok := d.eng.Lending(n)
		if !ok {
			q := lookup(d, d.queues, n)
			if q == nil {
				continue
			}
			l = qshare.Lending{JobQueue: n, ServiceEnvironment: d.envName(q),
				Capacity: []qshare.EnvironmentLending{}, QuotaShares: []qshare.ShareLending{}}
		}
		out = append(out, l)
	}
	d.engMu.Unlock()
	d.withExecutors(out)
	return out, nil
}

// EngineConfig returns the configuration the daemon's engine holds now, in
// name order (engine.Engine.Config): what the daemon has given it of every
// environment, queue and share it applied or recovered.
func (d *Daemon) EngineConfig() engine.Config {
	d.engMu.Lock()
	defer d.engMu.Unlock()
	return d.eng.Config()
}

// withExecutors names, in each of ls, its environment's executor and what
// that executor says of its service now (executorHealth). Call it without
// engMu: Health does not block, but needs no engine.
func (d *Daemon) withExecutors(ls []qshare.Lending) {
	for i := range ls {
		l := &ls[i]
		l.Executor = d.envExecutorNamed(l.ServiceEnvironment)
		l.ExecutorHealth = d.executorHealth(l.Executor)
	}
}

// envExecutorNamed is the name of the executor of the environment of that
// name; one that does not exist has the default.
func (d *Daemon) envExecutorNamed(env string) string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if e := d.envs[env]; e != nil {
		return envExecutor(e)
	}
	return executor.DefaultName
}

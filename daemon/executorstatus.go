package daemon

import (
	"context"
	"fmt"
	"sort"
	"time"

	"qshare"
	"qshare/executor"
)

// What the executor reports beside the attempts' ends, through its
// optional interfaces: why a started attempt waits in a scheduler of its
// own (the job's statusReason), whether the service that runs the
// attempts answers (the environments' statusReason), and, after a restart,
// the attempts it started that the store does not hold (swept), and what
// it keeps for jobs that the store holds finished or not at all.

// pendingReasons puts the executor's reason into the statusReason of each
// RUNNING job whose attempt waits in the executor's own scheduler
// (executor.PendingReasoner: a Slurm job PENDING for Resources), and
// "Attempt N is running" back once it runs. A job that is being stopped
// keeps the stop's reason. Only a change of reason changes the job.
//
// It looks at every run, so where the executor says when its reasons
// change (executor.PendingReasonsVersioner), it looks only then, or when
// a run has begun since: with thousands of attempts running, a look on
// every cycle cost 8% of qshare's CPU in bench kube.
func (c *cycle) pendingReasons() {
	d := c.d
	if !d.anyPendingReasoner() {
		return
	}
	if version, ok := d.pendingReasonsVersion(); ok {
		if !d.pendingDirty && version == d.pendingVersion {
			return
		}
		d.pendingVersion, d.pendingDirty = version, false
	}
	for _, r := range d.runs {
		if r.phase != phaseRunning || r.stop != stopNone {
			continue
		}
		ex := d.execs.Get(r.exec)
		pr, ok := ex.(executor.PendingReasoner)
		if !ok {
			continue
		}
		why := pr.PendingReason(r.attempt)
		if why == r.pending && r.pendingSeen {
			continue
		}
		// The first look also puts right what a server before a restart
		// stored (a wait that is over by now).
		r.pending, r.pendingSeen = why, true
		j := c.job(r.job)
		if j == nil || j.Status != qshare.JobRunning || j.IsTerminated {
			continue
		}
		reason := fmt.Sprintf("Attempt %d is running", r.n)
		if why != "" {
			reason = fmt.Sprintf("Attempt %d waits to run in %s: %s", r.n, ex.Name(), why)
		}
		if j.StatusReason != reason {
			c.edit(r.job).StatusReason = reason
		}
	}
}

// executorHealth is what the named executor says is wrong with the
// service that runs its attempts (executor.HealthReporter), or "".
func (d *Daemon) executorHealth(name string) string {
	if h, ok := d.execs.Get(name).(executor.HealthReporter); ok {
		return h.Health()
	}
	return ""
}

// withHealth puts each environment's executor's trouble, while it lasts,
// in front of the environment's statusReason: an executor that is down
// shows in its own environments only. It is not stored: it says how
// things are now, and goes when the trouble does.
func (d *Daemon) withHealth(es []qshare.ServiceEnvironment) []qshare.ServiceEnvironment {
	for i := range es {
		h := d.executorHealth(envExecutor(&es[i]))
		if h == "" {
			continue
		}
		if es[i].StatusReason == "" {
			es[i].StatusReason = h
		} else {
			es[i].StatusReason = h + "; " + es[i].StatusReason
		}
	}
	return es
}

// sweep has each executor end what it started that the store does not
// hold (executor.Sweeper), and release what it keeps for jobs that are not
// unfinished in the store (executor.JobSweeper), once after a restart,
// retrying each while it cannot (its service does not answer) and backing
// off up to 30 s. Each executor sweeps on its own, so that one whose
// service is down holds back no other. keep holds the attempts of every
// unfinished job, live the unfinished jobs: an ID that another executor
// runs is not in this one's system, so the whole of each is safe to give.
func (d *Daemon) sweep(ctx context.Context, keep, live map[string]bool) {
	type step struct {
		of, done string // what it sweeps, and the log line of what it swept
		sweep    func() ([]string, error)
	}
	d.execs.Each(func(name string, ex executor.Executor) {
		var steps []step
		if sw, ok := ex.(executor.Sweeper); ok {
			steps = append(steps, step{"attempts", "recovery: ended what the executor ran for attempts the store does not hold",
				func() ([]string, error) { return sw.Sweep(ctx, keep) }})
		}
		if js, ok := ex.(executor.JobSweeper); ok {
			steps = append(steps, step{"jobs", "recovery: released what the executor kept for jobs that are finished or not in the store",
				func() ([]string, error) { return js.SweepJobs(ctx, live) }})
		}
		if len(steps) == 0 {
			return
		}
		d.bg.Go(func() {
			for _, st := range steps {
				for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
					swept, err := st.sweep()
					if len(swept) > 0 {
						sort.Strings(swept)
						d.log.Warn(st.done, "executor", name, st.of, swept)
					}
					if err == nil {
						break
					}
					d.log.Warn("recovery: the executor could not sweep what the store does not hold; retrying", "executor", name, "of", st.of, "err", err)
					select {
					case <-ctx.Done():
						return
					case <-time.After(delay):
					}
				}
			}
		})
	})
}

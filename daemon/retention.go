package daemon

import (
	"context"
	"slices"
	"time"

	"qshare/store"
)

// Job retention: finished jobs (SUCCEEDED, FAILED) whose StoppedAt is older
// than Config.JobRetention are deleted from the store and then forgotten, in
// batches, by a background pass that runs every tenth of the retention (at
// least every second, at most every hour). With JobRetention 0 every job is
// kept forever.
//
// A finished job changes only by TagResource; a tag change that races a
// deletion may put the job back (in the store and in memory), and the next
// pass deletes it again.

// retentionBatch is the most jobs one deletion commit carries.
const retentionBatch = 1000

func retentionInterval(keep time.Duration) time.Duration {
	return min(max(keep/10, time.Second), time.Hour)
}

// retain runs the retention passes until ctx ends. The caller has added to d.bg.
func (d *Daemon) retain(ctx context.Context) {
	t := time.NewTicker(retentionInterval(d.cfg.JobRetention))
	defer t.Stop()
	for {
		if _, err := d.PurgeFinishedJobs(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("job retention: deleting finished jobs failed; retried at the next pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expired returns the IDs of the finished jobs that stopped before cutoff.
func (d *Daemon) expired(cutoff time.Time) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var ids []string
	for id, j := range d.jobs {
		if !j.Status.Terminal() {
			continue
		}
		at := j.StoppedAt
		if at.IsZero() {
			at = j.CreatedAt
		}
		if at.Before(cutoff) {
			ids = append(ids, id)
		}
	}
	return ids
}

// PurgeFinishedJobs deletes the finished jobs that stopped longer than
// Config.JobRetention ago, from the store and then from memory, and returns
// how many it deleted. It does nothing when JobRetention is 0.
func (d *Daemon) PurgeFinishedJobs(ctx context.Context) (int, error) {
	if d.cfg.JobRetention <= 0 {
		return 0, nil
	}
	ids := d.expired(d.now().Add(-d.cfg.JobRetention))
	if len(ids) == 0 {
		return 0, nil
	}
	slices.Sort(ids)
	n := 0
	for len(ids) > 0 {
		batch := ids[:min(len(ids), retentionBatch)]
		ids = ids[len(batch):]
		if err := d.st.Commit(ctx, &store.Change{DeleteJobs: batch}); err != nil {
			return n, err
		}
		d.forgetJobs(batch)
		n += len(batch)
	}
	d.log.Info("job retention: finished jobs deleted", "jobs", n, "retention", d.cfg.JobRetention.String())
	return n, nil
}

// forgetJobs removes deleted jobs from memory: the job map, the queue
// indexes, their client tokens and the payload cache.
func (d *Daemon) forgetJobs(ids []string) {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	queues := map[string]bool{}
	for _, id := range ids {
		j := d.jobs[id]
		if j == nil {
			continue
		}
		queues[j.JobQueue] = true
		if e := d.tokens[j.ClientToken]; j.ClientToken != "" && e != nil && e.job == id {
			delete(d.tokens, j.ClientToken)
		}
		d.dropJob(id)
		d.dropMeta(id)
	}
	for q := range queues {
		x := d.byQueue[q]
		if x == nil {
			continue
		}
		x.ids = slices.DeleteFunc(x.ids, func(k jobKey) bool { return gone[k.id] })
		if len(x.ids) == 0 {
			delete(d.byQueue, q)
		}
	}
}

package daemon

import (
	"sort"
	"time"

	"qshare"
	"qshare/engine"
)

// FrontJob is a RUNNABLE job at the front of a queue or share, and since
// when it has been waiting there.
type FrontJob struct {
	JobARN string
	Since  time.Time
}

// ShareUsage is what one quota share's jobs hold.
type ShareUsage struct {
	Share string
	Usage qshare.Capacity
}

// Snapshot is GetJobQueueSnapshot: the front of a job queue, the front of
// each of its quota shares, and what its dispatched jobs hold.
type Snapshot struct {
	// Front is up to 100 RUNNABLE jobs in the order the scheduler considers them.
	Front []FrontJob
	// ShareFronts maps each quota share with a RUNNABLE job to its head.
	ShareFronts map[string][]FrontJob
	// Total is the capacity held by the queue's jobs.
	Total qshare.Capacity
	// Shares lists the shares that hold capacity, most first (at most 20).
	Shares []ShareUsage
	// QuotaShares is true for a queue with a quota-share policy.
	QuotaShares bool
	// FairShare is true for a queue with a fair-share policy; then
	// ActiveShares counts its share identifiers with running jobs, and
	// Identifiers lists those that hold capacity, most first (at most 20).
	FairShare    bool
	ActiveShares int
	Identifiers  []ShareUsage
	At           time.Time
}

// Snapshot returns the snapshot of a job queue (name or ARN).
func (d *Daemon) Snapshot(ref string) (Snapshot, error) {
	queue, err := d.refName("jobQueue", kindQueue, ref)
	if err != nil {
		return Snapshot{}, err
	}
	d.mu.RLock()
	q := d.queues[queue]
	d.mu.RUnlock()
	if q == nil {
		return Snapshot{}, errNoQueue(queue)
	}
	snap := Snapshot{ShareFronts: map[string][]FrontJob{}, Total: qshare.Capacity{}, QuotaShares: d.isQuotaQueue(q), At: d.now()}
	d.engMu.Lock()
	front := d.eng.Front(queue, 100)
	views := d.eng.Shares(queue)
	fair := d.eng.FairShare(queue)
	d.engMu.Unlock()
	if fair != nil {
		snap.FairShare = true
		for _, u := range fair {
			if u.Holding > 0 {
				snap.ActiveShares++
				snap.Identifiers = append(snap.Identifiers, ShareUsage{Share: u.ShareIdentifier, Usage: u.Capacity})
			}
		}
		sort.SliceStable(snap.Identifiers, func(a, b int) bool {
			if x, y := snap.Identifiers[a].Usage.Total(), snap.Identifiers[b].Usage.Total(); x != y {
				return x > y
			}
			return snap.Identifiers[a].Share < snap.Identifiers[b].Share
		})
		if len(snap.Identifiers) > 20 {
			snap.Identifiers = snap.Identifiers[:20]
		}
	}

	since := func(id string) FrontJob {
		d.mu.RLock()
		j := d.jobs[id]
		d.mu.RUnlock()
		if j == nil {
			return FrontJob{JobARN: d.JobARN(id)}
		}
		return FrontJob{JobARN: j.ARN, Since: j.RunnableSince}
	}
	for _, id := range front {
		snap.Front = append(snap.Front, since(id))
	}
	for _, v := range views {
		snap.Total.Add(v.Usage)
		if v.Name == engine.QueueShare {
			continue
		}
		if v.Head != "" {
			snap.ShareFronts[v.Name] = []FrontJob{since(v.Head)}
		}
		if v.Usage.Total() > 0 {
			snap.Shares = append(snap.Shares, ShareUsage{Share: v.Name, Usage: v.Usage.Clone()})
		}
	}
	sort.SliceStable(snap.Shares, func(i, j int) bool { return snap.Shares[i].Usage.Total() > snap.Shares[j].Usage.Total() })
	if len(snap.Shares) > 20 {
		snap.Shares = snap.Shares[:20]
	}
	return snap, nil
}

package api

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"qshare/auth"
	"qshare/daemon"
)

// QueuePath is where the server mounts QueueHandler. It is a qshare
// extension, beside LendingPath: GetJobQueueSnapshot gives the front of a
// queue and of each share as bare job ARNs, and a reader (the dashboard's
// Queue view) would need one DescribeServiceJob per job to say who each one
// is and why it waits. This endpoint answers with both in one request.
const QueuePath = "/qshare/v1/queue"

// QueueJob is one RUNNABLE job at the front of a queue or share.
type QueueJob struct {
	// Position is the job's place in the order the scheduler considers the
	// queue's jobs, from 1; 0 in ShareFronts for a head beyond the first
	// 100 of the queue.
	Position           int    `json:"position"`
	JobID              string `json:"jobId"`
	JobArn             string `json:"jobArn"`
	JobName            string `json:"jobName"`
	QuotaShareName     string `json:"quotaShareName,omitempty"`
	ShareIdentifier    string `json:"shareIdentifier,omitempty"`
	SchedulingPriority int    `json:"schedulingPriority"`
	Status             string `json:"status"`
	// StatusReason is the scheduler's words for why the job waits.
	StatusReason string `json:"statusReason,omitempty"`
	// RunnableSince is when the job became RUNNABLE, in Unix milliseconds.
	RunnableSince *int64 `json:"runnableSince,omitempty"`
}

// ShareFront is the head of one quota share.
type ShareFront struct {
	QuotaShareName string   `json:"quotaShareName"`
	Head           QueueJob `json:"head"`
}

// QueueResponse is the body of a successful GET QueuePath.
type QueueResponse struct {
	JobQueue string `json:"jobQueue"`
	// QuotaShares is true for a queue with a quota-share policy.
	QuotaShares bool `json:"quotaShares"`
	// Front is up to 100 RUNNABLE jobs, in the order the scheduler
	// considers them (GetJobQueueSnapshot's frontOfQueue).
	Front []QueueJob `json:"front"`
	// ShareFronts is the head of each share with a RUNNABLE job, in share
	// name order (GetJobQueueSnapshot's frontOfQuotaShares).
	ShareFronts []ShareFront `json:"shareFronts"`
	// LastUpdatedAt is when the snapshot was taken, in Unix milliseconds.
	LastUpdatedAt int64 `json:"lastUpdatedAt"`
}

// QueueHandler serves GET QueuePath?jobQueue=NAME_OR_ARN: the snapshot of
// GetJobQueueSnapshot, each job with its name, share, priority and status
// reason. A job that finished between the snapshot and the look-up is left
// out. Errors are those of LendingHandler: a missing, unknown or malformed
// queue, an unknown parameter or another method is a ClientException.
func QueueHandler(d *daemon.Daemon) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref, ok := jobQueueParam(w, r, QueuePath, true)
		if !ok {
			return
		}
		if err := auth.Authorize(r.Context(), actionPrefix+"GetJobQueueSnapshot", refARN(ref, d.QueueARN)); err != nil {
			writeError(w, err)
			return
		}
		s, err := d.Snapshot(ref)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, queueViewOut(r.Context(), d, s, ref))
	})
}

// queueViewOut builds the answer of QueuePath from a snapshot. With
// authentication, a job the caller may not describe
// (batch:DescribeServiceJob on its share's ARN and its own, as
// DescribeServiceJob checks) is left out: the others keep their positions,
// so a gap says that other teams' jobs come first.
func queueViewOut(ctx context.Context, d *daemon.Daemon, s daemon.Snapshot, ref string) QueueResponse {
	if i := strings.LastIndex(ref, "/"); strings.HasPrefix(ref, "arn:") && i >= 0 {
		ref = ref[i+1:]
	}
	out := QueueResponse{JobQueue: ref, QuotaShares: s.QuotaShares, Front: []QueueJob{}, ShareFronts: []ShareFront{}, LastUpdatedAt: s.At.UnixMilli()}
	pos := map[string]int{}
	look := func(arn string) (QueueJob, bool) {
		j, err := d.Job(arn)
		if err != nil || !auth.May(ctx, ActionDescribeServiceJob, d.JobShareARN(j), j.ARN) {
			return QueueJob{}, false
		}
		return QueueJob{JobID: j.ID, JobArn: j.ARN, JobName: j.Name, QuotaShareName: j.QuotaShare, ShareIdentifier: j.ShareIdentifier,
			SchedulingPriority: j.Priority, Status: string(j.Status), StatusReason: j.StatusReason, RunnableSince: ms(j.RunnableSince)}, true
	}
	for i, f := range s.Front {
		pos[f.JobARN] = i + 1
		if qj, ok := look(f.JobARN); ok {
			qj.Position = i + 1
			out.Front = append(out.Front, qj)
		}
	}
	names := make([]string, 0, len(s.ShareFronts))
	for n := range s.ShareFronts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, f := range s.ShareFronts[n] {
			if qj, ok := look(f.JobARN); ok {
				qj.Position = pos[f.JobARN]
				out.ShareFronts = append(out.ShareFronts, ShareFront{QuotaShareName: n, Head: qj})
			}
		}
	}
	return out
}

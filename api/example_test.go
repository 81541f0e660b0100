package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestWorkedExample runs the spec's worked example (§6.10) end to end
// through the AWS SDK, with long simulated jobs, and checks the job states,
// the preemption summaries and the snapshot after each step.
func TestWorkedExample(t *testing.T) {
	s := newServer(t)
	queue := s.setup("my-sm-training-qm-jq", 3,
		shareSpec{name: "QS1", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(200), inShare: true},
		shareSpec{name: "QS2", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend},
		shareSpec{name: "QS3", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve},
	)
	long := payload(g5, 1, time.Hour, 0)

	// Step 1: three jobs in QS1. high runs on QS1's own instance, med borrows
	// QS2's, low waits: the only free instance is QS3's, which is reserved.
	high := s.submit(queue, "QS1", "qs1_job_high", 3, long)
	med := s.submit(queue, "QS1", "qs1_job_med", 2, long)
	low := s.submit(queue, "QS1", "qs1_job_low", 1, long)
	s.waitStatus(high, types.ServiceJobStatusRunning)
	s.waitStatus(med, types.ServiceJobStatusRunning)
	if st := s.describe(low); st.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("step 1: low is %s, want RUNNABLE", st.Status)
	}
	s.checkSnapshot(queue, "step 1", map[string]float64{"QS1": 2}, 2, map[string]string{"QS1": low}, 1)

	// Step 2: QS2 gets a job and reclaims its instance from med.
	qs2 := s.submit(queue, "QS2", "qs2_job_1", 1, long)
	s.waitStatus(qs2, types.ServiceJobStatusRunning)
	m := s.waitStatus(med, types.ServiceJobStatusRunnable)
	checkPreempted(t, "step 2 med", m, 1)
	if h := s.describe(high); h.Status != types.ServiceJobStatusRunning || h.PreemptionSummary != nil {
		t.Fatalf("step 2: high is %s with preemptions %v, want RUNNING, never preempted", h.Status, h.PreemptionSummary)
	}
	s.checkSnapshot(queue, "step 2", map[string]float64{"QS1": 1, "QS2": 1}, 2, map[string]string{"QS1": med}, 2)

	// Step 3: low becomes the most important job of QS1 and preempts high.
	up, err := s.c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: s.describe(low).JobArn, SchedulingPriority: aws.Int32(4)})
	must(t, err)
	if *up.JobId != low {
		t.Fatalf("UpdateServiceJob returned job %s, want %s", *up.JobId, low)
	}
	s.waitStatus(low, types.ServiceJobStatusRunning)
	h := s.waitStatus(high, types.ServiceJobStatusRunnable)
	checkPreempted(t, "step 3 high", h, 1)
	m = s.describe(med)
	if m.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("step 3: med is %s, want RUNNABLE", m.Status)
	}
	checkPreempted(t, "step 3 med", m, 1)
	if q := s.describe(qs2); q.Status != types.ServiceJobStatusRunning {
		t.Fatalf("step 3: qs2_job_1 is %s, want RUNNING", q.Status)
	}
	s.checkSnapshot(queue, "step 3", map[string]float64{"QS1": 1, "QS2": 1}, 2, map[string]string{"QS1": high}, 2)

	// The job's attempts tell the story: high ran, was preempted, and waits.
	if n := len(h.Attempts); n != 1 || h.Attempts[0].StoppedAt == nil || h.LatestAttempt == nil {
		t.Fatalf("step 3: high has attempts %+v, want one stopped attempt", h.Attempts)
	}

	// Clean up as the reference client does (disable, delete, wait until
	// gone), with jobs still queued and running: deleting a share
	// terminates its jobs.
	s.deleteAll(queue, "QS1", "QS2", "QS3")
	for _, id := range []string{high, med, low, qs2} {
		d := s.waitStatus(id, types.ServiceJobStatusFailed)
		if !aws.ToBool(d.IsTerminated) || !strings.Contains(aws.ToString(d.StatusReason), "was deleted") {
			t.Fatalf("job %s after its share was deleted: terminated=%v reason %q", aws.ToString(d.JobName), aws.ToBool(d.IsTerminated), aws.ToString(d.StatusReason))
		}
	}
}

// deleteAll deletes the setup's resources in the reference client's order,
// waiting for each deletion to finish.
func (s *server) deleteAll(queue string, shares ...string) {
	t, c := s.t, s.c
	t.Helper()
	wait := func(what string, gone func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !gone() {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not gone", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, name := range shares {
		arn := queue + "/quota-share/" + name
		_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(arn), State: types.QuotaShareStateDisabled})
		must(t, err)
		_, err = c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: aws.String(arn)})
		must(t, err)
		wait("quota share "+name, func() bool {
			_, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(arn)})
			return err != nil && strings.Contains(err.Error(), "does not exist")
		})
	}
	_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String(queue), State: types.JQStateDisabled})
	must(t, err)
	_, err = c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String(queue)})
	must(t, err)
	wait("job queue", func() bool {
		out, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{queue}})
		return err == nil && len(out.JobQueues) == 0
	})
}

func checkPreempted(t *testing.T, what string, j *batch.DescribeServiceJobOutput, n int32) {
	t.Helper()
	ps := j.PreemptionSummary
	if ps == nil || aws.ToInt32(ps.PreemptedAttemptCount) != n || len(ps.RecentPreemptedAttempts) != int(n) {
		t.Fatalf("%s: preemptionSummary = %+v, want %d preemption(s)", what, ps, n)
	}
	if ps.RecentPreemptedAttempts[0].StatusReason == nil || ps.RecentPreemptedAttempts[0].StoppedAt == nil {
		t.Fatalf("%s: preempted attempt lacks reason or stop time: %+v", what, ps.RecentPreemptedAttempts[0])
	}
}

// checkSnapshot checks per-share utilization, the total, and the head of
// each share (share name -> job ID), and how many jobs are RUNNABLE.
func (s *server) checkSnapshot(queue, step string, perShare map[string]float64, total float64, heads map[string]string, runnable int) {
	t := s.t
	t.Helper()
	snap, err := s.c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String(queue)})
	must(t, err)
	u := snap.QueueUtilization
	if u == nil || len(u.TotalCapacityUsage) != 1 || aws.ToFloat64(u.TotalCapacityUsage[0].Quantity) != total || aws.ToString(u.TotalCapacityUsage[0].CapacityUnit) != g5 {
		t.Fatalf("%s: totalCapacityUsage = %+v, want %v %s", step, u, total, g5)
	}
	got := map[string]float64{}
	for _, su := range u.QuotaShareUtilization.TopCapacityUtilization {
		for _, c := range su.CapacityUsage {
			got[aws.ToString(su.QuotaShareName)] += aws.ToFloat64(c.Quantity)
		}
	}
	if len(got) != len(perShare) {
		t.Fatalf("%s: share utilization = %v, want %v", step, got, perShare)
	}
	for k, v := range perShare {
		if got[k] != v {
			t.Fatalf("%s: share utilization = %v, want %v", step, got, perShare)
		}
	}
	fronts := snap.FrontOfQuotaShares.QuotaShares
	if len(fronts) != len(heads) {
		t.Fatalf("%s: frontOfQuotaShares = %v, want heads %v", step, fronts, heads)
	}
	for share, id := range heads {
		f := fronts[share]
		if len(f) != 1 || aws.ToString(f[0].JobArn) != *s.describe(id).JobArn || f[0].EarliestTimeAtPosition == nil {
			t.Fatalf("%s: front of %s = %+v, want job %s", step, share, f, id)
		}
	}
	if len(snap.FrontOfQueue.Jobs) != runnable {
		t.Fatalf("%s: frontOfQueue has %d jobs, want %d", step, len(snap.FrontOfQueue.Jobs), runnable)
	}
}

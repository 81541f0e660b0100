package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestJobStateTimeLimitAction terminates a head job that waits longer than
// maxTimeSeconds for the configured reason, and lets the next job run. The
// daemon's clock is moved forward; the executor's is real.
func TestJobStateTimeLimitAction(t *testing.T) {
	var clk clock
	s := newServer(t, clk.option())
	s.reserved(2)
	reason := "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
	_, err := s.c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), JobStateTimeLimitActions: []types.JobStateTimeLimitAction{{
		Action: types.JobStateTimeLimitActionsActionTerminate, MaxTimeSeconds: aws.Int32(600), Reason: aws.String(reason),
		State: types.JobStateTimeLimitActionsStateRunnable}}})
	must(t, err)
	big := s.submit("q", "A", "too-big", 5, payload(g5, 3, time.Millisecond, 0))
	small := s.submit("q", "A", "small", 1, payload(g5, 1, time.Millisecond, 0))
	// The big job heads the share and can never fit, so it blocks the share.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(aws.ToString(s.describe(big).StatusReason), reason) {
		if time.Now().After(deadline) {
			t.Fatalf("big job reason %q", aws.ToString(s.describe(big).StatusReason))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := s.describe(small); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("small job is %s behind a blocked head", d.Status)
	}
	time.Sleep(100 * time.Millisecond)
	if d := s.describe(big); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("big job is %s before its time limit", d.Status)
	}
	clk.setAhead(601 * time.Second)
	d := s.waitStatus(big, types.ServiceJobStatusFailed)
	if aws.ToString(d.StatusReason) != "Terminated by JobStateTimeLimit action due to reason: "+reason || !aws.ToBool(d.IsTerminated) {
		t.Fatalf("big job: %q terminated=%v", aws.ToString(d.StatusReason), aws.ToBool(d.IsTerminated))
	}
	s.waitStatus(small, types.ServiceJobStatusSucceeded)
}

// TestRecoveryInProcess stops a server (cleanly, with attempts running in
// the simulated executor) and starts another on the same data: running jobs
// are re-attached, a termination decided before the stop is carried out, and
// the waiting job then runs.
func TestRecoveryInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir)
	s.reserved(2)
	long := s.submit("q", "A", "long", 3, payload(g5, 1, time.Hour, 0))
	stubborn := s.submit("q", "A", "stubborn", 2, strings.Replace(payload(g5, 1, time.Hour, 0), `"QSHARE_SIM_EXIT_CODE"`, `"QSHARE_SIM_ON_STOP":"ignore","QSHARE_STOP_GRACE":"400ms","QSHARE_SIM_EXIT_CODE"`, 1))
	waiting := s.submit("q", "A", "waiting", 1, payload(g5, 1, 50*time.Millisecond, 0))
	before := s.waitStatus(long, types.ServiceJobStatusRunning)
	s.waitStatus(stubborn, types.ServiceJobStatusRunning)
	_, err := s.c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(stubborn), Reason: aws.String("make room")})
	must(t, err)
	if d := s.describe(stubborn); !aws.ToBool(d.IsTerminated) || d.Status != types.ServiceJobStatusRunning {
		t.Fatalf("stubborn job right after terminate: %s terminated=%v", d.Status, aws.ToBool(d.IsTerminated))
	}
	s.close()

	s2 := startServer(t, dir)
	d := s2.waitStatus(stubborn, types.ServiceJobStatusFailed)
	if aws.ToString(d.StatusReason) != "make room" || len(d.Attempts) != 1 {
		t.Fatalf("stubborn job after restart: %q, %d attempts", aws.ToString(d.StatusReason), len(d.Attempts))
	}
	s2.waitStatus(waiting, types.ServiceJobStatusSucceeded)
	after := s2.describe(long)
	if after.Status != types.ServiceJobStatusRunning || len(after.Attempts) != 1 ||
		*after.Attempts[0].StartedAt != *before.Attempts[0].StartedAt {
		t.Fatalf("long job after restart: %s, attempts %+v (before %+v)", after.Status, after.Attempts, before.Attempts)
	}
	// The recovered attempt can still be stopped.
	_, err = s2.c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(long), Reason: aws.String("enough")})
	must(t, err)
	s2.waitStatus(long, types.ServiceJobStatusFailed)
}

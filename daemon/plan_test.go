package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor/simulated"
)

// TestCapacityPlan: a capacity plan is validated, stored and survives a
// restart; a job that names it waits with the plan's reason before its
// window, runs on its capacity once it opens (beside the share's own job,
// which fills the share's own capacity), and is stopped at the plan's
// close (its end less its warning) and requeued, waiting again with the
// reason that the plan ended, its attempt stopped between the close and
// the end. A share with a plan cannot be deleted, nor a plan that jobs
// name.
func TestCapacityPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := open(t, dir, simulated.New(simulated.Options{}))
	d := a.d
	setup(t, d, 1, false)
	start := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	warn := int64(1)
	in := daemon.PlanInput{Name: "P", JobQueue: "q", QuotaShare: "A", InstanceType: "ml.g5.xlarge", InstanceCount: 1,
		StartTime: start, EndTime: start.Add(3 * time.Second), WarningSeconds: &warn}
	for field, spoil := range map[string]func(p *daemon.PlanInput){
		"name":           func(p *daemon.PlanInput) { p.Name = "a/b" },
		"instanceType":   func(p *daemon.PlanInput) { p.InstanceType = "" },
		"instanceCount":  func(p *daemon.PlanInput) { p.InstanceCount = 0 },
		"endTime":        func(p *daemon.PlanInput) { p.EndTime = p.StartTime },
		"warningSeconds": func(p *daemon.PlanInput) { w := int64(3); p.WarningSeconds = &w },
		"Quota share":    func(p *daemon.PlanInput) { p.QuotaShare = "B" },
		"Job queue":      func(p *daemon.PlanInput) { p.JobQueue = "nope" },
	} {
		bad := in
		spoil(&bad)
		if _, err := d.PutPlan(ctx, bad); err == nil || !strings.Contains(qshare.ErrorMessageOf(err), field) {
			t.Errorf("PutPlan with a bad %s: %v; want an error naming it", field, err)
		}
	}
	p, err := d.PutPlan(ctx, in)
	must(t, err)
	if p.ARN != qshare.PlanARN(d.Region(), d.AccountID(), "P") {
		t.Fatalf("plan ARN %q", p.ARN)
	}
	a.close()
	a = open(t, dir, simulated.New(simulated.Options{}))
	defer func() { a.close() }()
	d = a.d
	if ps := d.Plans(); len(ps) != 1 || ps[0].ARN != p.ARN || !ps[0].EndTime.Equal(p.EndTime) {
		t.Fatalf("plans after a restart: %+v", ps)
	}

	own := submit(t, d, "own", 0, `"QSHARE_SIM_DURATION":"1h"`)
	waitFor(t, d, own, status(qshare.JobRunning), "RUNNING")
	planJob := func(arn, typ string) (*qshare.Job, error) {
		return d.Submit(ctx, daemon.SubmitInput{Name: "planned", Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING",
			Payload: `{"ResourceConfig":{"InstanceType":"` + typ + `","TrainingPlanArn":"` + arn + `"},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`})
	}
	for _, bad := range []struct{ arn, typ string }{
		{"arn:aws:sagemaker:us-east-1:1:training-job/P", "ml.g5.xlarge"},
		{qshare.PlanARN(d.Region(), d.AccountID(), "Q"), "ml.g5.xlarge"},
		{p.ARN, "ml.p5.48xlarge"},
	} {
		if _, err := planJob(bad.arn, bad.typ); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(qshare.ErrorMessageOf(err), "TrainingPlanArn") {
			t.Errorf("submit naming %s for %s: %v; want a ClientException naming TrainingPlanArn", bad.arn, bad.typ, err)
		}
	}
	j, err := planJob(p.ARN, "ml.g5.xlarge")
	must(t, err)
	waitFor(t, d, j.ID, func(j *qshare.Job) bool {
		return strings.HasPrefix(j.StatusReason, "waiting for capacity plan P, which starts at "+start.UTC().Format(time.RFC3339))
	}, "the plan's wait reason")
	if err := d.DeletePlan(ctx, "P"); qshare.ErrorCodeOf(err) != qshare.ECONFLICT {
		t.Fatalf("DeletePlan with a job naming it: %v; want a conflict", err)
	}
	disabled := qshare.Disabled
	_, err = d.UpdateShare(ctx, daemon.ShareUpdate{ARN: d.ShareARN("q", "A"), State: &disabled})
	must(t, err)
	if err := d.DeleteShare(ctx, d.ShareARN("q", "A")); qshare.ErrorCodeOf(err) != qshare.ECONFLICT {
		t.Fatalf("DeleteShare of a share with a plan: %v; want a conflict", err)
	}
	r := waitFor(t, d, j.ID, status(qshare.JobRunning), "RUNNING on the plan's capacity")
	if at := r.Attempts[0].ScheduledAt; at.Before(start) {
		t.Fatalf("the plan's job was scheduled at %v, before the plan's start %v", at, start)
	}
	r = waitFor(t, d, j.ID, func(j *qshare.Job) bool {
		return j.Status == qshare.JobRunnable && strings.HasPrefix(j.StatusReason, "waiting for capacity plan P, which ended at")
	}, "requeued at the plan's close, waiting with the reason that it ended")
	if a := r.Attempts[0]; !a.Preempted || a.StoppedAt.After(in.EndTime) || a.StoppedAt.Before(in.EndTime.Add(-time.Second)) {
		t.Fatalf("the plan's attempt: preempted %v, stopped at %v; want preempted between the close %v and the end %v", a.Preempted, a.StoppedAt, in.EndTime.Add(-time.Second), in.EndTime)
	}
	if a := r.Attempts[0]; !strings.Contains(a.StatusReason, ": capacity plan P ends at ") || r.Preemptions != 1 {
		t.Fatalf("the plan's attempt: reason %q, %d preemptions; want one preemption saying the plan ends", a.StatusReason, r.Preemptions)
	}
	if o, _ := d.Job(own); o.Status != qshare.JobRunning {
		t.Fatalf("the share's own job: %s; the plan's close must leave it running", o.Status)
	}
	must(t, d.Terminate(ctx, j.ID, "done"))
	waitFor(t, d, j.ID, status(qshare.JobFailed), "FAILED")
	must(t, d.DeletePlan(ctx, "P"))
	if _, err := d.Plan("P"); qshare.ErrorCodeOf(err) != qshare.ENOTFOUND {
		t.Fatalf("Plan after DeletePlan: %v", err)
	}
}

// TestPlanCheckOldInsideTheChange: the check of the plan a PUT replaces, or
// a deletion removes, is made inside the change with the plan actually
// there, and its refusal changes nothing (issue 30, point 7: the API
// checked the old plan's share before the change, so a plan moved to
// another share meanwhile was replaced unchecked).
func TestPlanCheckOldInsideTheChange(t *testing.T) {
	ctx := context.Background()
	d := openSetUp(t)
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	in := daemon.PlanInput{Name: "P", JobQueue: "q", QuotaShare: "A", InstanceType: "ml.g5.xlarge", InstanceCount: 1,
		StartTime: start, EndTime: start.Add(time.Hour)}
	_, err := d.PutPlan(ctx, in)
	must(t, err)
	var saw []string
	refuse := func(old qshare.CapacityPlan) error {
		saw = append(saw, old.QuotaShare)
		return qshare.Errorf(qshare.EDENIED, "not share %s", old.QuotaShare)
	}
	again := in
	again.InstanceCount = 2
	again.CheckOld = refuse
	if _, err := d.PutPlan(ctx, again); qshare.ErrorCodeOf(err) != qshare.EDENIED {
		t.Fatalf("PutPlan refused by CheckOld: %v", err)
	}
	if err := d.DeletePlanChecked(ctx, "P", refuse); qshare.ErrorCodeOf(err) != qshare.EDENIED {
		t.Fatalf("DeletePlanChecked refused: %v", err)
	}
	if p, err := d.Plan("P"); err != nil || p.InstanceCount != 1 {
		t.Fatalf("the plan after refused changes: %+v, %v", p, err)
	}
	if strings.Join(saw, ",") != "A,A" {
		t.Errorf("the checks saw the old plans' shares %v, want A,A", saw)
	}
}

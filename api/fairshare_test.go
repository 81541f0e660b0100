package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestFairShareQueue through the AWS SDK: a fair-share queue takes jobs with
// a shareIdentifier, GetJobQueueSnapshot fills fairshareUtilization (the
// active identifiers and what they use) and ListServiceJobs filters by
// SHARE_IDENTIFIER.
func TestFairShareQueue(t *testing.T) {
	s := newServer(t)
	c := s.c
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("fairpol"),
		FairsharePolicy: &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(600), ComputeReservation: aws.Int32(0),
			ShareDistribution: []types.ShareAttributes{{ShareIdentifier: aws.String("teamA"), WeightFactor: aws.Float32(0.5)}}}})
	must(t, err)
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("fair-env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(3)}}})
	must(t, err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fair"), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("fair-env")}}})
	must(t, err)
	s.waitQueueStatus("fair", types.JQStatusValid)
	submit := func(name, ident string, n int) string {
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("fair"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ShareIdentifier: aws.String(ident),
			ServiceRequestPayload: aws.String(payload(g5, n, time.Hour, 0))})
		must(t, err)
		return *out.JobId
	}
	a := submit("a", "teamA", 2)
	b := submit("b", "teamB", 1)
	s.waitStatus(a, types.ServiceJobStatusRunning)
	s.waitStatus(b, types.ServiceJobStatusRunning)

	snap, err := c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("fair")})
	must(t, err)
	fu := snap.QueueUtilization.FairshareUtilization
	if fu == nil || aws.ToInt64(fu.ActiveShareCount) != 2 || len(fu.TopCapacityUtilization) != 2 {
		t.Fatalf("fairshareUtilization = %+v", fu)
	}
	top := fu.TopCapacityUtilization[0]
	if aws.ToString(top.ShareIdentifier) != "teamA" || len(top.CapacityUsage) != 1 || aws.ToFloat64(top.CapacityUsage[0].Quantity) != 2 {
		t.Fatalf("top identifier = %s %+v, want teamA using 2", aws.ToString(top.ShareIdentifier), top.CapacityUsage)
	}
	if snap.QueueUtilization.QuotaShareUtilization != nil {
		t.Errorf("a fair-share queue has quotaShareUtilization %+v", snap.QueueUtilization.QuotaShareUtilization)
	}
	out, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("fair"),
		Filters: []types.KeyValuesPair{{Name: aws.String("SHARE_IDENTIFIER"), Values: []string{"teamB"}}}})
	must(t, err)
	if len(out.JobSummaryList) != 1 || aws.ToString(out.JobSummaryList[0].JobId) != b {
		t.Fatalf("SHARE_IDENTIFIER teamB lists %+v", out.JobSummaryList)
	}
}

// TestPolicyKindFixed: a scheduling policy's kind is fixed at creation, and
// so is a job queue's: UpdateSchedulingPolicy cannot turn a quota-share
// policy into a fair-share one or back, and UpdateJobQueue cannot give a
// quota-share queue a fair-share policy or back. Each refusal is a
// ClientException, as AWS answers it, and changes nothing.
func TestPolicyKindFixed(t *testing.T) {
	s := newServer(t)
	c := s.c
	qsARN := s.setup("q", 1)
	fair, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("fairpol"),
		FairsharePolicy: &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(600)}})
	must(t, err)
	quotaPol := s.createPolicy("other-quota")
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String(qsARN), SchedulingPolicyArn: fair.Arn})
	clientErr(t, err, "job queue q has a quota-share policy: it can only be replaced by another policy of the same type")
	_, err = c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: fair.Arn,
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	clientErr(t, err, "is a fair-share policy: its type cannot be changed")
	_, err = c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: quotaPol, FairsharePolicy: &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(60)}})
	clientErr(t, err, "is a quota-share policy: its type cannot be changed")
	out, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
	must(t, err)
	if len(out.JobQueues) != 1 || !strings.HasSuffix(aws.ToString(out.JobQueues[0].SchedulingPolicyArn), "/q-policy") {
		t.Fatalf("the refused update changed the queue: %+v", out.JobQueues)
	}
	// Another policy of the same kind is allowed.
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String(qsARN), SchedulingPolicyArn: quotaPol})
	must(t, err)
}

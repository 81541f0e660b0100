package api_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestValidation sends one invalid request per rule and checks that the SDK
// surfaces a ClientException whose message names the problem.
func TestValidation(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.c
	queue := s.setup("q", 4,
		shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(100)},
		shareSpec{name: "OFF", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(queue + "/quota-share/OFF"), State: types.QuotaShareStateDisabled})
	must(t, err)
	// A FIFO queue (no policy) and a fair-share queue, each on its own environment.
	for _, name := range []string{"fifo", "fair"} {
		_, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(name + "-env"),
			ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
			CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(2)}}})
		must(t, err)
	}
	fair, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("fairpol"),
		FairsharePolicy: &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(60)}})
	must(t, err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fifo"), Priority: aws.Int32(1),
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("fifo-env")}}})
	must(t, err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fair"), Priority: aws.Int32(1), SchedulingPolicyArn: fair.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("fair-env")}}})
	must(t, err)

	ok := payload(g5, 1, time.Millisecond, 0)
	submit := func(mod func(*batch.SubmitServiceJobInput)) error {
		in := &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(ok)}
		mod(in)
		_, err := c.SubmitServiceJob(ctx, in)
		return err
	}
	limit := func(unit string, n int32) []types.QuotaShareCapacityLimit {
		return []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(unit), MaxCapacity: aws.Int32(n)}}
	}
	share := func(mod func(*batch.CreateQuotaShareInput)) error {
		in := &batch.CreateQuotaShareInput{QuotaShareName: aws.String("new"), JobQueue: aws.String("q"), CapacityLimits: limit(g5, 1),
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}}
		mod(in)
		_, err := c.CreateQuotaShare(ctx, in)
		return err
	}
	env := func(mod func(*batch.CreateServiceEnvironmentInput)) error {
		in := &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("newenv"), ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
			CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}}}
		mod(in)
		_, err := c.CreateServiceEnvironment(ctx, in)
		return err
	}
	queueIn := func(mod func(*batch.CreateJobQueueInput)) error {
		in := &batch.CreateJobQueueInput{JobQueueName: aws.String("newq"), Priority: aws.Int32(1),
			ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("newq-env")}}}
		mod(in)
		_, err := c.CreateJobQueue(ctx, in)
		return err
	}
	must(t, env(func(in *batch.CreateServiceEnvironmentInput) { in.ServiceEnvironmentName = aws.String("newq-env") }))
	rules := make([]types.ServiceJobEvaluateOnExit, 6)
	for i := range rules {
		rules[i] = types.ServiceJobEvaluateOnExit{Action: types.ServiceJobRetryActionExit, OnStatusReason: aws.String("*")}
	}

	for _, tc := range []struct {
		name  string
		err   error
		wants []string
	}{
		// Names.
		{"job name", submit(func(in *batch.SubmitServiceJobInput) { in.JobName = aws.String("bad name!") }), []string{"jobName", "letters, digits"}},
		{"long job name", submit(func(in *batch.SubmitServiceJobInput) { in.JobName = aws.String(strings.Repeat("a", 129)) }), []string{"jobName"}},
		{"share name", share(func(in *batch.CreateQuotaShareInput) { in.QuotaShareName = aws.String("a/b") }), []string{"quotaShareName"}},
		{"environment name", env(func(in *batch.CreateServiceEnvironmentInput) { in.ServiceEnvironmentName = aws.String("") }), []string{"serviceEnvironmentName", "required"}},
		{"queue name", queueIn(func(in *batch.CreateJobQueueInput) { in.JobQueueName = aws.String("x y") }), []string{"jobQueueName"}},
		{"policy name", func() error {
			_, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("p:q")})
			return err
		}(), []string{"name"}},
		// Priorities.
		{"priority high", submit(func(in *batch.SubmitServiceJobInput) { in.SchedulingPriority = aws.Int32(10000) }), []string{"schedulingPriority", "0 to 9999"}},
		{"priority low", submit(func(in *batch.SubmitServiceJobInput) { in.SchedulingPriority = aws.Int32(-1) }), []string{"schedulingPriority"}},
		{"update priority", func() error {
			_, err := c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String("x"), SchedulingPriority: aws.Int32(10000)})
			return err
		}(), []string{"0 to 9999"}},
		// Retry strategy.
		{"attempts 0", submit(func(in *batch.SubmitServiceJobInput) {
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(0)}
		}), []string{"retryStrategy.attempts", "1 to 10"}},
		{"attempts 11", submit(func(in *batch.SubmitServiceJobInput) {
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(11)}
		}), []string{"1 to 10"}},
		{"six rules", submit(func(in *batch.SubmitServiceJobInput) {
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2), EvaluateOnExit: rules}
		}), []string{"evaluateOnExit", "at most 5"}},
		{"rule action", submit(func(in *batch.SubmitServiceJobInput) {
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{{Action: "MAYBE"}}}
		}), []string{"RETRY or EXIT"}},
		// Capacity limits.
		{"no limits", share(func(in *batch.CreateQuotaShareInput) { in.CapacityLimits = []types.QuotaShareCapacityLimit{} }), []string{"capacityLimits", "1 to 5"}},
		{"six limits", share(func(in *batch.CreateQuotaShareInput) {
			in.CapacityLimits = nil
			for _, u := range []string{"a", "b", "c", "d", "e", "f"} {
				in.CapacityLimits = append(in.CapacityLimits, limit("ml."+u, 1)...)
			}
		}), []string{"at most 5"}},
		{"zero capacity", share(func(in *batch.CreateQuotaShareInput) { in.CapacityLimits = limit(g5, 0) }), []string{"maxCapacity", "at least 1"}},
		{"duplicate unit", share(func(in *batch.CreateQuotaShareInput) { in.CapacityLimits = append(limit(g5, 1), limit(g5, 2)...) }), []string{"more than once"}},
		{"NUM_INSTANCES", env(func(in *batch.CreateServiceEnvironmentInput) {
			in.CapacityLimits = []types.CapacityLimit{{CapacityUnit: aws.String("NUM_INSTANCES"), MaxCapacity: aws.Int32(1)}}
		}), []string{"NUM_INSTANCES"}},
		{"env six limits", env(func(in *batch.CreateServiceEnvironmentInput) {
			in.CapacityLimits = nil
			for _, u := range []string{"a", "b", "c", "d", "e", "f"} {
				in.CapacityLimits = append(in.CapacityLimits, types.CapacityLimit{CapacityUnit: aws.String(u), MaxCapacity: aws.Int32(1)})
			}
		}), []string{"at most 5"}},
		// Borrow limit.
		{"borrow with LEND", share(func(in *batch.CreateQuotaShareInput) { in.ResourceSharingConfiguration.BorrowLimit = aws.Int32(10) }), []string{"borrowLimit", "only allowed with strategy LEND_AND_BORROW"}},
		{"borrow below -1", share(func(in *batch.CreateQuotaShareInput) {
			in.ResourceSharingConfiguration = &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, BorrowLimit: aws.Int32(-2)}
		}), []string{"borrowLimit -2"}},
		{"bad strategy", share(func(in *batch.CreateQuotaShareInput) { in.ResourceSharingConfiguration.Strategy = "SHARE" }), []string{"RESERVE, LEND or LEND_AND_BORROW"}},
		{"bad in-share", share(func(in *batch.CreateQuotaShareInput) { in.PreemptionConfiguration.InSharePreemption = "ON" }), []string{"inSharePreemption"}},
		{"share on FIFO queue", share(func(in *batch.CreateQuotaShareInput) { in.JobQueue = aws.String("fifo") }), []string{"no quota-share scheduling policy"}},
		{"share on missing queue", share(func(in *batch.CreateQuotaShareInput) { in.JobQueue = aws.String("nope") }), []string{"does not exist"}},
		// Payload and request sizes.
		{"payload 10 KiB", submit(func(in *batch.SubmitServiceJobInput) {
			in.ServiceRequestPayload = aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"X":"` + strings.Repeat("x", 10*1024) + `"}`)
		}), []string{"serviceRequestPayload", "10 KiB"}},
		{"request 30 KiB", submit(func(in *batch.SubmitServiceJobInput) {
			// Quotes inside the payload are escaped twice on the wire: a
			// 9 KiB payload becomes an 18 KiB member; tags add 15 KiB.
			in.Tags = map[string]string{}
			for i := range 40 {
				in.Tags[strings.Repeat("k", 100)+string(rune('A'+i))] = strings.Repeat("v", 256)
			}
			in.ServiceRequestPayload = aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"X":"` + strings.Repeat(`\"`, 4*1024) + `"}`)
		}), []string{"larger than 30720 bytes"}},
		{"payload not JSON", submit(func(in *batch.SubmitServiceJobInput) { in.ServiceRequestPayload = aws.String("{") }), []string{"serviceRequestPayload"}},
		{"payload without type", submit(func(in *batch.SubmitServiceJobInput) { in.ServiceRequestPayload = aws.String(`{"ResourceConfig":{}}`) }), []string{"instance type"}},
		// quotaShareName rules.
		{"no share on QM queue", submit(func(in *batch.SubmitServiceJobInput) { in.QuotaShareName = nil }), []string{"quotaShareName must be specified."}},
		{"unknown share", submit(func(in *batch.SubmitServiceJobInput) { in.QuotaShareName = aws.String("ZZ") }), []string{"Quota share ZZ does not exist"}},
		{"disabled share", submit(func(in *batch.SubmitServiceJobInput) { in.QuotaShareName = aws.String("OFF") }), []string{"Quota share OFF is DISABLED"}},
		{"share on FIFO", submit(func(in *batch.SubmitServiceJobInput) { in.JobQueue = aws.String("fifo") }), []string{"quotaShareName is only allowed"}},
		{"fair share queue without shareIdentifier", submit(func(in *batch.SubmitServiceJobInput) {
			in.JobQueue, in.QuotaShareName = aws.String("fair"), nil
		}), []string{"shareIdentifier must be specified."}},
		{"quotaShareName on a fair share queue", submit(func(in *batch.SubmitServiceJobInput) {
			in.JobQueue, in.ShareIdentifier = aws.String("fair"), aws.String("a")
		}), []string{"quotaShareName is for quota-share queues", "give shareIdentifier"}},
		{"bad shareIdentifier", submit(func(in *batch.SubmitServiceJobInput) {
			in.JobQueue, in.QuotaShareName, in.ShareIdentifier = aws.String("fair"), nil, aws.String("team a*")
		}), []string{"shareIdentifier", "letters, digits and underscores"}},
		{"shareIdentifier on QM", submit(func(in *batch.SubmitServiceJobInput) { in.ShareIdentifier = aws.String("a") }), []string{"shareIdentifier is for fair-share queues"}},
		{"unknown queue", submit(func(in *batch.SubmitServiceJobInput) { in.JobQueue = aws.String("nope") }), []string{"Job queue nope does not exist"}},
		{"foreign ARN", submit(func(in *batch.SubmitServiceJobInput) {
			in.JobQueue = aws.String("arn:aws:batch:eu-west-1:111111111111:job-queue/q")
		}), []string{"not a job-queue ARN of this server"}},
		{"tags", submit(func(in *batch.SubmitServiceJobInput) { in.Tags = map[string]string{"": "x"} }), []string{"tags key"}},
		{"timeout", submit(func(in *batch.SubmitServiceJobInput) {
			in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(0)}
		}), []string{"attemptDurationSeconds"}},
		{"preemption retries", submit(func(in *batch.SubmitServiceJobInput) {
			in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(-1)}
		}), []string{"preemptionRetriesBeforeTermination"}},
		{"job type", submit(func(in *batch.SubmitServiceJobInput) { in.ServiceJobType = "EKS" }), []string{"serviceJobType"}},
		{"sim duration", submit(func(in *batch.SubmitServiceJobInput) {
			in.ServiceRequestPayload = aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"soon"}}`)
		}), []string{"QSHARE_SIM_DURATION"}},
		// Queues.
		{"queue priority", queueIn(func(in *batch.CreateJobQueueInput) { in.Priority = aws.Int32(1001) }), []string{"priority 1001"}},
		{"queue type", queueIn(func(in *batch.CreateJobQueueInput) { in.JobQueueType = types.JobQueueTypeEcs }), []string{"SAGEMAKER_TRAINING"}},
		{"compute environments", queueIn(func(in *batch.CreateJobQueueInput) {
			in.ComputeEnvironmentOrder = []types.ComputeEnvironmentOrder{{Order: aws.Int32(1), ComputeEnvironment: aws.String("ce")}}
		}), []string{"computeEnvironmentOrder"}},
		{"two environments", queueIn(func(in *batch.CreateJobQueueInput) {
			in.ServiceEnvironmentOrder = append(in.ServiceEnvironmentOrder, types.ServiceEnvironmentOrder{Order: aws.Int32(2), ServiceEnvironment: aws.String("fifo-env")})
		}), []string{"exactly one service environment"}},
		{"shared environment", queueIn(func(in *batch.CreateJobQueueInput) {
			in.ServiceEnvironmentOrder[0].ServiceEnvironment = aws.String("q-env")
		}), []string{"already used by job queue q"}},
		{"time limit", queueIn(func(in *batch.CreateJobQueueInput) {
			in.JobStateTimeLimitActions = []types.JobStateTimeLimitAction{{Action: types.JobStateTimeLimitActionsActionTerminate,
				MaxTimeSeconds: aws.Int32(10), Reason: aws.String("X"), State: types.JobStateTimeLimitActionsStateRunnable}}
		}), []string{"maxTimeSeconds 10", "600 to 86400"}},
		{"time limit action", queueIn(func(in *batch.CreateJobQueueInput) {
			in.JobStateTimeLimitActions = []types.JobStateTimeLimitAction{{Action: types.JobStateTimeLimitActionsActionCancel,
				MaxTimeSeconds: aws.Int32(600), Reason: aws.String("X"), State: types.JobStateTimeLimitActionsStateRunnable}}
		}), []string{"use TERMINATE"}},
		{"missing policy", queueIn(func(in *batch.CreateJobQueueInput) {
			in.SchedulingPolicyArn = aws.String("arn:aws:batch:us-east-1:000000000000:scheduling-policy/nope")
		}), []string{"Scheduling policy", "does not exist"}},
		{"policy type switch", func() error {
			_, err := c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: fair.Arn,
				QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
			return err
		}(), []string{"cannot be changed"}},
		{"policy both types", func() error {
			_, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("both"), FairsharePolicy: &types.FairsharePolicy{},
				QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
			return err
		}(), []string{"not both"}},
		{"policy added later", func() error {
			_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("fifo"), SchedulingPolicyArn: fair.Arn})
			return err
		}(), []string{"cannot be added later"}},
		{"list without queue", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{})
			return err
		}(), []string{"jobQueue must be specified"}},
		{"two filters", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{
				{Name: aws.String("JOB_NAME"), Values: []string{"a"}}, {Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"A"}}}})
			return err
		}(), []string{"one filter at a time"}},
		{"bad filter", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{{Name: aws.String("COLOR"), Values: []string{"a"}}}})
			return err
		}(), []string{"filter name"}},
		{"bad created at", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{"yesterday"}}}})
			return err
		}(), []string{"milliseconds"}},
		{"describe missing job", func() error {
			_, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String("00000000-0000-0000-0000-000000000000")})
			return err
		}(), []string{"does not exist"}},
		{"terminate without reason", func() error {
			_, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String("x"), Reason: aws.String("")})
			return err
		}(), []string{"reason is required"}},
		{"share ARN of another kind", func() error {
			_, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(queue)})
			return err
		}(), []string{"not a quota share ARN"}},
	} {
		t.Run(tc.name, func(t *testing.T) { clientErr(t, tc.err, tc.wants...) })
	}

	// Disabled queue and environment refuse submits.
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), State: types.JQStateDisabled})
	must(t, err)
	clientErr(t, submit(func(*batch.SubmitServiceJobInput) {}), "Job queue q is DISABLED")
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), State: types.JQStateEnabled})
	must(t, err)
	_, err = c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"), State: types.ServiceEnvironmentStateDisabled})
	must(t, err)
	clientErr(t, submit(func(*batch.SubmitServiceJobInput) {}), "service environment", "DISABLED")

	// The quota-share limit per queue.
	s2 := newServer(t, func(c *daemonConfig) { c.MaxSharesPerQueue = 2 })
	s2.setup("q", 4, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend},
		shareSpec{name: "B", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend})
	_, err = s2.c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("C"), JobQueue: aws.String("q"), CapacityLimits: limit(g5, 1),
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	clientErr(t, err, "already has 2 quota shares", "--max-quota-shares-per-queue")
}

// TestPayloadValidationAttacks replays, through the AWS SDK for Go, the
// payloads of issue 14 (finding 5) that a submit used to accept, and that
// then failed later, exposed a server path, or were silently ignored:
// each is now a ClientException that names the member, no job is created,
// and no message holds a path of the server's.
func TestPayloadValidationAttacks(t *testing.T) {
	s := newServer(t)
	s.reserved(4)
	long := strings.Repeat("a", 5000)
	good := func() map[string]any {
		return map[string]any{
			"TrainingJobName":        "train",
			"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "ContainerEntrypoint": []string{"true"}},
			"ResourceConfig":         map[string]any{"InstanceType": g5, "InstanceCount": 1},
			"Environment":            map[string]string{"QSHARE_SIM_DURATION": "1ms"},
		}
	}
	cwd, err := os.Getwd()
	must(t, err)
	serverPaths := []string{s.dir, cwd}

	for _, tc := range []struct {
		name   string
		mod    func(p map[string]any)
		member string
	}{
		{"LocalPath with NUL", func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"LocalPath": "/opt/ml/ck\x00pt"} }, "CheckpointConfig.LocalPath"},
		{"LocalPath of 5000 characters", func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"LocalPath": "/opt/ml/" + long} }, "CheckpointConfig.LocalPath"},
		{"TrainingJobName with NUL", func(p map[string]any) { p["TrainingJobName"] = "train\x00x" }, "TrainingJobName"},
		{"TrainingJobName of 5000 characters", func(p map[string]any) { p["TrainingJobName"] = long }, "TrainingJobName"},
		{"TrainingJobName ../../etc", func(p map[string]any) { p["TrainingJobName"] = "../../etc" }, "TrainingJobName"},
		{"MaxRuntimeInSeconds -5", func(p map[string]any) { p["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": -5} }, "StoppingCondition.MaxRuntimeInSeconds"},
		{"Environment key with a newline", func(p map[string]any) { p["Environment"] = map[string]string{"A\nB": "x"} }, "Environment key"},
		{"QSHARE_SUPERVISE=1", func(p map[string]any) { p["Environment"] = map[string]string{"QSHARE_SUPERVISE": "1"} }, "Environment.QSHARE_SUPERVISE"},
		{"HyperParameters value of 5000 characters", func(p map[string]any) { p["HyperParameters"] = map[string]string{"lr": long} }, "HyperParameters"},
		{"channel name ../x", func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": "../x", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3Uri": "file:///data"}}}}
		}, "InputDataConfig[0].ChannelName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := good()
			tc.mod(p)
			b, err := json.Marshal(p)
			must(t, err)
			_, err = s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
				JobName: aws.String("attack"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
				ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(string(b)),
			})
			clientErr(t, err, "serviceRequestPayload", tc.member)
			var ce *types.ClientException
			errors.As(err, &ce)
			for _, p := range serverPaths {
				if strings.Contains(ce.ErrorMessage(), p) {
					t.Fatalf("the message %q holds the server path %s", ce.ErrorMessage(), p)
				}
			}
		})
	}
	out, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	must(t, err)
	if len(out.JobSummaryList) != 0 {
		t.Fatalf("refused submits created %d jobs", len(out.JobSummaryList))
	}
	// The same payload without the attack is accepted: the rules refuse
	// the attack, not the shape.
	b, err := json.Marshal(good())
	must(t, err)
	s.submit("q", "A", "fine", 0, string(b))
}

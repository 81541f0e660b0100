package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor"
	"qshare/trainingjob"
)

func TestClientTokenReplay(t *testing.T) {
	s := newServer(t)
	s.reserved(2)
	in := &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0)),
		ClientToken: aws.String("token-1")}
	// Concurrent retries of the same request get the same job.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			out, err := s.c.SubmitServiceJob(ctx, in)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = *out.JobId
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("same clientToken gave jobs %v", ids)
		}
	}
	// A different request under the same token is refused.
	other := *in
	other.JobName = aws.String("k")
	_, err := s.c.SubmitServiceJob(ctx, &other)
	clientErr(t, err, "clientToken", "different request", ids[0])
	// Only one job exists.
	out, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	must(t, err)
	if len(out.JobSummaryList) != 1 {
		t.Fatalf("%d jobs after replays, want 1", len(out.JobSummaryList))
	}
	// Without a token the SDK fills one per call: two calls, two jobs.
	a := s.submit("q", "A", "x", 0, payload(g5, 1, time.Hour, 0))
	b := s.submit("q", "A", "x", 0, payload(g5, 1, time.Hour, 0))
	if a == b {
		t.Fatal("two submits without a token gave one job")
	}
}

func TestJobIDOrARN(t *testing.T) {
	s := newServer(t)
	queue := s.reserved(2)
	id := s.submit(queue, "A", "j", 1, payload(g5, 1, time.Hour, 0))
	arn := "arn:aws:batch:us-east-1:000000000000:service-job/" + id
	for _, ref := range []string{id, arn} {
		d, err := s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(ref)})
		must(t, err)
		if *d.JobId != id || *d.JobArn != arn || *d.JobQueue != queue || aws.ToString(d.QuotaShareName) != "A" {
			t.Fatalf("describe by %s: %+v", ref, d)
		}
		up, err := s.c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(ref), SchedulingPriority: aws.Int32(7)})
		must(t, err)
		if *up.JobArn != arn {
			t.Fatalf("UpdateServiceJob by %s returned ARN %s", ref, *up.JobArn)
		}
	}
	if d := s.describe(id); aws.ToInt32(d.SchedulingPriority) != 7 {
		t.Fatalf("priority = %d", aws.ToInt32(d.SchedulingPriority))
	}
	_, err := s.c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(arn), Reason: aws.String("done with it")})
	must(t, err)
	d := s.waitStatus(id, types.ServiceJobStatusFailed)
	if !aws.ToBool(d.IsTerminated) || aws.ToString(d.StatusReason) != "done with it" || d.StoppedAt == nil {
		t.Fatalf("terminated job: %+v", d)
	}
	// Terminating again is harmless; an ARN of another kind is not a job.
	_, err = s.c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(arn), Reason: aws.String("again")})
	must(t, err)
	_, err = s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(queue)})
	clientErr(t, err, "not a service job ARN")
}

// TestJobDetail follows one job from submit to SUCCEEDED and checks what
// DescribeServiceJob and ListServiceJobs say about it.
func TestJobDetail(t *testing.T) {
	s := newServer(t)
	queue := s.reserved(4)
	p := `{"TrainingJobName":"my-training-job","ResourceConfig":{"InstanceGroups":[
		{"InstanceGroupName":"a","InstanceType":"ml.g5.xlarge","InstanceCount":2},
		{"InstanceGroupName":"b","InstanceType":"ml.g5.xlarge","InstanceCount":1}]},
		"Environment":{"QSHARE_SIM_DURATION":"50ms"}}`
	out, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String(queue), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(p), SchedulingPriority: aws.Int32(5),
		RetryStrategy:           &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)},
		PreemptionConfiguration: &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(3)},
		TimeoutConfig:           &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(600)},
		Tags:                    map[string]string{"team": "a"}})
	must(t, err)
	d := s.waitStatus(*out.JobId, types.ServiceJobStatusSucceeded)
	if len(d.CapacityUsage) != 1 || aws.ToFloat64(d.CapacityUsage[0].Quantity) != 3 || aws.ToString(d.CapacityUsage[0].CapacityUnit) != g5 {
		t.Fatalf("capacityUsage = %+v", d.CapacityUsage)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].StartedAt == nil || d.Attempts[0].StoppedAt == nil || d.ScheduledAt == nil || d.StartedAt == nil || d.StoppedAt == nil || d.CreatedAt == nil {
		t.Fatalf("times: %+v", d)
	}
	if *d.ScheduledAt < *d.CreatedAt || *d.StartedAt < *d.ScheduledAt || *d.StoppedAt < *d.StartedAt {
		t.Fatalf("times out of order: created %d scheduled %d started %d stopped %d", *d.CreatedAt, *d.ScheduledAt, *d.StartedAt, *d.StoppedAt)
	}
	ri := d.LatestAttempt.ServiceResourceId
	if ri == nil || ri.Name != types.ServiceResourceIdNameSagemakerTrainingJobArn || aws.ToString(ri.Value) != trainingjob.AttemptARN("us-east-1", "000000000000", trainingjob.AttemptName("my-training-job", aws.ToString(d.JobId), 1)) {
		t.Fatalf("latestAttempt = %+v", ri)
	}
	if aws.ToInt32(d.RetryStrategy.Attempts) != 2 || aws.ToInt32(d.PreemptionConfiguration.PreemptionRetriesBeforeTermination) != 3 ||
		aws.ToInt32(d.TimeoutConfig.AttemptDurationSeconds) != 600 || d.Tags["team"] != "a" || aws.ToString(d.ServiceRequestPayload) != p ||
		aws.ToBool(d.IsTerminated) || d.PreemptionSummary != nil || aws.ToString(d.StatusReason) == "" {
		t.Fatalf("detail: %+v", d)
	}
	l, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: types.ServiceJobStatusSucceeded})
	must(t, err)
	if len(l.JobSummaryList) != 1 || *l.JobSummaryList[0].JobId != *out.JobId || aws.ToString(l.JobSummaryList[0].QuotaShareName) != "A" ||
		l.JobSummaryList[0].LatestAttempt == nil || len(l.JobSummaryList[0].CapacityUsage) != 1 {
		t.Fatalf("summary: %+v", l.JobSummaryList)
	}
}

func TestListServiceJobs(t *testing.T) {
	s := newServer(t)
	s.setup("q", 2, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "B", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	// One job per share runs (holding its instance), the rest wait.
	running := s.submit("q", "A", "runner", 9, payload(g5, 1, time.Hour, 0))
	s.waitStatus(running, types.ServiceJobStatusRunning)
	runningB := s.submit("q", "B", "runnerB", 9, payload(g5, 1, time.Hour, 0))
	s.waitStatus(runningB, types.ServiceJobStatusRunning)
	var ids []string
	for i := range 25 {
		share := "A"
		if i%5 == 0 {
			share = "B"
		}
		ids = append(ids, s.submit("q", share, fmt.Sprintf("train-%02d", i), 0, payload(g5, 1, time.Hour, 0)))
		if i == 12 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	list := func(in *batch.ListServiceJobsInput, limit int32) []types.ServiceJobSummary {
		t.Helper()
		in.JobQueue = aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q")
		all, _ := allPages(t, batch.NewListServiceJobsPaginator(s.c, in, func(o *batch.ListServiceJobsPaginatorOptions) { o.Limit = limit }),
			func(out *batch.ListServiceJobsOutput) []types.ServiceJobSummary { return out.JobSummaryList })
		return all
	}
	// No filter, no status: RUNNING only.
	if got := list(&batch.ListServiceJobsInput{}, 0); len(got) != 2 || *got[0].JobId != runningB || *got[1].JobId != running {
		t.Fatalf("default listing = %d jobs", len(got))
	}
	// RUNNABLE, across pages of 4, newest first, each once.
	got := list(&batch.ListServiceJobsInput{JobStatus: types.ServiceJobStatusRunnable}, 4)
	if len(got) != 25 {
		t.Fatalf("RUNNABLE listing = %d jobs, want 25", len(got))
	}
	for i, j := range got {
		if *j.JobId != ids[len(ids)-1-i] {
			t.Fatalf("RUNNABLE listing position %d is %s, want %s (newest first)", i, *j.JobName, ids[len(ids)-1-i])
		}
	}
	// Name filter: exact (case-insensitive) and prefix; status ignored.
	if got := list(&batch.ListServiceJobsInput{JobStatus: types.ServiceJobStatusSucceeded, Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"TRAIN-03"}}}}, 0); len(got) != 1 || *got[0].JobId != ids[3] {
		t.Fatalf("JOB_NAME exact = %d", len(got))
	}
	if got := list(&batch.ListServiceJobsInput{Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"train-1*"}}}}, 3); len(got) != 10 {
		t.Fatalf("JOB_NAME prefix = %d, want 10", len(got))
	}
	// Share filter combines with status.
	if got := list(&batch.ListServiceJobsInput{Filters: []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"B"}}}}, 2); len(got) != 6 {
		t.Fatalf("QUOTA_SHARE_NAME B = %d, want 6", len(got))
	}
	if got := list(&batch.ListServiceJobsInput{JobStatus: types.ServiceJobStatusRunning, Filters: []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"A"}}}}, 0); len(got) != 1 {
		t.Fatalf("QUOTA_SHARE_NAME A RUNNING = %d, want 1", len(got))
	}
	// Created-at filters split the jobs at a time between two submits.
	mid := *s.describe(ids[13]).CreatedAt
	before := list(&batch.ListServiceJobsInput{Filters: []types.KeyValuesPair{{Name: aws.String("BEFORE_CREATED_AT"), Values: []string{fmt.Sprint(mid)}}}}, 0)
	after := list(&batch.ListServiceJobsInput{Filters: []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{fmt.Sprint(mid - 1)}}}}, 0)
	if len(before) < 13 || len(after) < 12 || len(before)+len(after) != 27 {
		t.Fatalf("BEFORE %d + AFTER %d, want 27 in all", len(before), len(after))
	}
}

func TestRetries(t *testing.T) {
	s := newServer(t)
	s.reserved(4)
	sub := func(name string, code int, rs *types.ServiceJobRetryStrategy) string {
		out, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, 10*time.Millisecond, code)), RetryStrategy: rs})
		must(t, err)
		return *out.JobId
	}
	// No strategy: one attempt.
	one := sub("one", 3, nil)
	// Three attempts, no rules: retried until attempts run out.
	three := sub("three", 3, &types.ServiceJobRetryStrategy{Attempts: aws.Int32(3)})
	// First matching rule wins: code 3 matches EXIT before the catch-all RETRY.
	exit := sub("exit", 3, &types.ServiceJobRetryStrategy{Attempts: aws.Int32(5), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{
		{Action: types.ServiceJobRetryActionExit, OnStatusReason: aws.String("*code 3*")},
		{Action: types.ServiceJobRetryActionRetry, OnStatusReason: aws.String("*")}}})
	// Action matching is case-insensitive ("Retry", as the SageMaker SDK's tests send).
	retry := sub("retry", 4, &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{
		{Action: "Retry", OnStatusReason: aws.String("*code 4")}}})
	// No rule matches: retried.
	nomatch := sub("nomatch", 5, &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{
		{Action: types.ServiceJobRetryActionExit, OnStatusReason: aws.String("Received status from SageMaker:*")}}})
	for id, attempts := range map[string]int{one: 1, three: 3, exit: 1, retry: 2, nomatch: 2} {
		d := s.waitStatus(id, types.ServiceJobStatusFailed)
		if len(d.Attempts) != attempts {
			t.Errorf("job %s: %d attempts, want %d (reason %q)", *d.JobName, len(d.Attempts), attempts, aws.ToString(d.StatusReason))
		}
		for _, a := range d.Attempts {
			if !strings.Contains(aws.ToString(a.StatusReason), "exited with code") {
				t.Errorf("job %s: attempt reason %q", *d.JobName, aws.ToString(a.StatusReason))
			}
		}
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.reserved(2)
	out, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("slow"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0)),
		TimeoutConfig: &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(1)},
		RetryStrategy: &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)}})
	must(t, err)
	// MaxRuntimeInSeconds of the payload bounds an attempt too.
	p := strings.Replace(payload(g5, 1, time.Hour, 0), `"MaxRuntimeInSeconds":86400`, `"MaxRuntimeInSeconds":1`, 1)
	rt := s.submit("q", "A", "maxruntime", 0, p)
	d := s.waitStatus(*out.JobId, types.ServiceJobStatusFailed)
	if len(d.Attempts) != 2 || !strings.Contains(aws.ToString(d.Attempts[0].StatusReason), "timeout") {
		t.Fatalf("timed-out job: %d attempts, reasons %q / %q", len(d.Attempts), aws.ToString(d.Attempts[0].StatusReason), aws.ToString(d.StatusReason))
	}
	if r := s.waitStatus(rt, types.ServiceJobStatusFailed); !strings.Contains(aws.ToString(r.StatusReason), "timeout") {
		t.Fatalf("MaxRuntime job reason %q", aws.ToString(r.StatusReason))
	}
}

func TestPreemptionRetries(t *testing.T) {
	s := newServer(t)
	s.setup("q", 1, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: true})
	out, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("victim"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0)),
		PreemptionConfiguration: &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(0)}})
	must(t, err)
	s.waitStatus(*out.JobId, types.ServiceJobStatusRunning)
	hi := s.submit("q", "A", "important", 5, payload(g5, 1, time.Hour, 0))
	s.waitStatus(hi, types.ServiceJobStatusRunning)
	d := s.waitStatus(*out.JobId, types.ServiceJobStatusFailed)
	if d.PreemptionSummary == nil || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 || !strings.Contains(aws.ToString(d.StatusReason), "no preemption retries left") {
		t.Fatalf("victim: %+v reason %q", d.PreemptionSummary, aws.ToString(d.StatusReason))
	}
}

// TestTerminate terminates a RUNNABLE and a RUNNING job, the latter through
// the bulk TerminateServiceJobs (not in the pinned SDK: raw HTTP).
func TestTerminate(t *testing.T) {
	s := newServer(t)
	s.reserved(1)
	run := s.submit("q", "A", "run", 1, payload(g5, 1, time.Hour, 0))
	s.waitStatus(run, types.ServiceJobStatusRunning)
	wait := s.submit("q", "A", "wait", 0, payload(g5, 1, time.Hour, 0))
	next := s.submit("q", "A", "next", 0, payload(g5, 1, 10*time.Millisecond, 0))
	_, err := s.c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(wait), Reason: aws.String("not needed")})
	must(t, err)
	if d := s.describe(wait); d.Status != types.ServiceJobStatusFailed || !aws.ToBool(d.IsTerminated) || aws.ToString(d.StatusReason) != "not needed" {
		t.Fatalf("terminated RUNNABLE job: %s %q", d.Status, aws.ToString(d.StatusReason))
	}
	body := fmt.Sprintf(`{"jobs":[%q,"arn:aws:batch:us-east-1:000000000000:service-job/unknown","arn:aws:batch:us-east-1:000000000000:job-queue/q"],"reason":"bulk"}`, run)
	resp, b := s.post("/v1/terminateservicejobs", body)
	var res struct {
		Successful []string
		Errors     []struct{ Job, Code, Message string }
	}
	if err := json.Unmarshal(b, &res); err != nil || resp.StatusCode != 200 {
		t.Fatalf("TerminateServiceJobs: %d %s", resp.StatusCode, b)
	}
	if len(res.Successful) != 2 || len(res.Errors) != 1 || res.Errors[0].Code != "ClientException" {
		t.Fatalf("TerminateServiceJobs result: %s", b)
	}
	d := s.waitStatus(run, types.ServiceJobStatusFailed)
	if !aws.ToBool(d.IsTerminated) || aws.ToString(d.StatusReason) != "bulk" || len(d.Attempts) != 1 || d.Attempts[0].StoppedAt == nil {
		t.Fatalf("terminated RUNNING job: %+v", d)
	}
	// Its capacity went to the next job.
	s.waitStatus(next, types.ServiceJobStatusSucceeded)
}

// TestFIFOQueue runs jobs on a queue without a scheduling policy: one line,
// first in first out, bounded by the environment.
func TestFIFOQueue(t *testing.T) {
	s := newServer(t)
	_, err := s.c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("e"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}}})
	must(t, err)
	_, err = s.c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fifo"), Priority: aws.Int32(1),
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("e")}}})
	must(t, err)
	a := s.submit("fifo", "", "a", 0, payload(g5, 1, 20*time.Millisecond, 0))
	b := s.submit("fifo", "", "b", 0, payload(g5, 1, 20*time.Millisecond, 0))
	da := s.waitStatus(a, types.ServiceJobStatusSucceeded)
	db := s.waitStatus(b, types.ServiceJobStatusSucceeded)
	if *db.ScheduledAt < *da.StoppedAt {
		t.Fatalf("b scheduled at %d before a stopped at %d: capacity 1 was over-used", *db.ScheduledAt, *da.StoppedAt)
	}
	snap, err := s.c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("fifo")})
	must(t, err)
	if snap.FrontOfQuotaShares != nil {
		t.Fatalf("FIFO queue has share fronts: %+v", snap.FrontOfQuotaShares)
	}
	// Deleting a queue with a running job terminates it.
	long := s.submit("fifo", "", "long", 0, payload(g5, 1, time.Hour, 0))
	s.waitStatus(long, types.ServiceJobStatusRunning)
	s.deleteAll("arn:aws:batch:us-east-1:000000000000:job-queue/fifo")
	if d := s.waitStatus(long, types.ServiceJobStatusFailed); !strings.Contains(aws.ToString(d.StatusReason), "job queue fifo was deleted") {
		t.Fatalf("job of a deleted queue: %q", aws.ToString(d.StatusReason))
	}
}

// TestWireErrors checks the error wire format and what malformed requests get.
func TestWireErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	post := func(path, body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, b := s.post(path, body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: body %q is not a JSON object", path, b)
		}
		return resp, m
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/createjobqueue", `{"jobQueueName": 5}`, "member jobQueueName should be a string, not a JSON number"},
		{"/v1/createjobqueue", `{"priority": "high"}`, "member priority should be an integer"},
		{"/v1/createjobqueue", `{"priority": 1.5}`, "priority should be an integer"},
		{"/v1/createjobqueue", `[1]`, "expected a JSON object"},
		{"/v1/createjobqueue", `{`, "ends too early"},
		{"/v1/createjobqueue", `{} {}`, "after the JSON object"},
		{"/v1/submitservicejob", `{"jobName":"` + strings.Repeat("x", 31*1024) + `"}`, "larger than 30720 bytes"},
		{"/v1/nosuchoperation", `{}`, "unknown operation"},
	} {
		resp, m := post(tc.path, tc.body)
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" || m["__type"] != "ClientException" ||
			!strings.Contains(fmt.Sprint(m["message"]), tc.want) || resp.Header.Get("X-Amzn-RequestId") == "" {
			t.Errorf("%s %s: %d %v %v, want ClientException containing %q", tc.path, tc.body[:min(len(tc.body), 40)], resp.StatusCode, resp.Header, m, tc.want)
		}
	}
	// Unknown members are tolerated.
	resp, _ := post("/v1/describeserviceenvironments", `{"futureMember": {"x": [1,2]}}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Amzn-RequestId") == "" {
		t.Fatalf("unknown member: %d", resp.StatusCode)
	}
	// GET on an operation is refused, not a 404 page.
	r, err := http.Get(s.url + "/v1/describejobqueues")
	must(t, err)
	r.Body.Close()
	if r.StatusCode != 400 || r.Header.Get("X-Amzn-ErrorType") != "ClientException" {
		t.Fatalf("GET: %d", r.StatusCode)
	}
}

// TestServerException checks that a failure of the store reaches the SDK as
// a ServerException (HTTP 500, retried by the SDK) and applies nothing.
func TestServerException(t *testing.T) {
	s := newServer(t)
	s.reserved(1)
	s.db.Close()
	_, err := s.c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0))})
	var se *types.ServerException
	if !errors.As(err, &se) || !strings.Contains(se.ErrorMessage(), "could not be saved") {
		t.Fatalf("err = %v (%T), want a ServerException", err, err)
	}
	l, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	must(t, err)
	if len(l.JobSummaryList) != 0 {
		t.Fatalf("a failed submit left %d jobs", len(l.JobSummaryList))
	}
}

// TestUnknownInstanceType: a job for an instance type the environment has no
// limit for is accepted and waits with a MISCONFIGURATION reason, without
// blocking the other shares.
func TestUnknownInstanceType(t *testing.T) {
	s := newServer(t)
	s.setup("q", 2, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "B", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	odd := s.submit("q", "A", "odd", 0, payload("ml.p4d.24xlarge", 1, time.Millisecond, 0))
	other := s.submit("q", "B", "other", 0, payload(g5, 1, time.Millisecond, 0))
	s.waitStatus(other, types.ServiceJobStatusSucceeded)
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := s.describe(odd)
		if d.Status != types.ServiceJobStatusRunnable {
			t.Fatalf("odd job is %s", d.Status)
		}
		if strings.HasPrefix(aws.ToString(d.StatusReason), "MISCONFIGURATION:") {
			t.Logf("reason: %s", aws.ToString(d.StatusReason))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("odd job reason %q", aws.ToString(d.StatusReason))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientTokenExpiry: after 24 hours a clientToken starts a new job.
func TestClientTokenExpiry(t *testing.T) {
	var clk clock
	s := newServer(t, clk.option())
	s.reserved(2)
	in := &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0)),
		ClientToken: aws.String("daily")}
	a, err := s.c.SubmitServiceJob(ctx, in)
	must(t, err)
	clk.setAhead(23 * time.Hour)
	b, err := s.c.SubmitServiceJob(ctx, in)
	must(t, err)
	clk.setAhead(25 * time.Hour)
	c, err := s.c.SubmitServiceJob(ctx, in)
	must(t, err)
	if *a.JobId != *b.JobId || *c.JobId == *a.JobId {
		t.Fatalf("jobs %s, %s (23 h later), %s (25 h later): want the first two equal, the third new", *a.JobId, *b.JobId, *c.JobId)
	}
}

// TestCapacityChanges: raising an environment's limit starts waiting jobs;
// lowering a share's limit below its usage lets another share reclaim.
func TestCapacityChanges(t *testing.T) {
	s := newServer(t)
	queue := s.setup("q", 1, shareSpec{name: "A", limit: 2, strategy: types.QuotaShareResourceSharingStrategyLend},
		shareSpec{name: "B", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend})
	a1 := s.submit("q", "A", "a1", 0, payload(g5, 1, time.Hour, 0))
	a2 := s.submit("q", "A", "a2", 0, payload(g5, 1, time.Hour, 0))
	s.waitStatus(a1, types.ServiceJobStatusRunning)
	time.Sleep(50 * time.Millisecond)
	if d := s.describe(a2); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("a2 is %s with an environment of 1", d.Status)
	}
	_, err := s.c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"),
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(2)}}})
	must(t, err)
	s.waitStatus(a2, types.ServiceJobStatusRunning)
	// A now holds 2 but its limit drops to 1; B's job needs its own instance back.
	_, err = s.c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(queue + "/quota-share/A"),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}}})
	must(t, err)
	b := s.submit("q", "B", "b", 0, payload(g5, 1, time.Hour, 0))
	s.waitStatus(b, types.ServiceJobStatusRunning)
	d1, d2 := s.describe(a1), s.describe(a2)
	if (d1.Status == types.ServiceJobStatusRunning) == (d2.Status == types.ServiceJobStatusRunning) {
		t.Fatalf("after the reclaim a1 is %s and a2 is %s: want exactly one running", d1.Status, d2.Status)
	}
}

// TestEndedAttemptsAreForgotten checks that the daemon tells the executor
// to drop every attempt whose end it has committed (so a long-running
// server's executor does not grow without bound), and never one that is
// still running.
func TestEndedAttemptsAreForgotten(t *testing.T) {
	s := newServer(t)
	s.reserved(4)
	ok := s.submit("q", "A", "ok", 1, payload(g5, 1, 10*time.Millisecond, 0))
	failed := s.submit("q", "A", "failed", 1, payload(g5, 1, 10*time.Millisecond, 3))
	long := s.submit("q", "A", "long", 1, payload(g5, 1, time.Hour, 0))
	s.waitStatus(ok, types.ServiceJobStatusSucceeded)
	s.waitStatus(failed, types.ServiceJobStatusFailed)
	s.waitStatus(long, types.ServiceJobStatusRunning)

	waitErr := func(attempt string) error {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := s.ex.Wait(c, attempt)
		return err
	}
	for _, attempt := range []string{ok + "-1", failed + "-1"} {
		deadline := time.Now().Add(5 * time.Second) // Forget runs right after the commit
		for err := waitErr(attempt); !errors.Is(err, executor.ErrUnknownAttempt); err = waitErr(attempt) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %s ended and was recorded, but the executor still knows it (Wait = %v)", attempt, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := waitErr(long + "-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait of the running attempt = %v, want it still running (deadline exceeded)", err)
	}
}

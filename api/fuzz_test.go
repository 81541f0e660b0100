package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/api"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/internal/batchclient"
	"qshare/store"
)

// memStore keeps nothing: the daemon holds its state in memory, and the
// fuzzer tests decoding and validation, not durability.
type memStore struct{}

func (memStore) Load(context.Context) (*store.State, error)  { return &store.State{}, nil }
func (memStore) Commit(context.Context, *store.Change) error { return nil }
func (memStore) Close() error                                { return nil }

var _ store.Store = memStore{}

// recorder wraps a handler and keeps the body of every request, by
// operation: the SDK's own requests, to seed the fuzzer.
type recorder struct {
	h      http.Handler
	mu     sync.Mutex
	bodies map[string][][]byte
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	op := req.URL.Path
	if len(op) > 4 {
		op = op[4:]
	}
	r.bodies[op] = append(r.bodies[op], b)
	r.mu.Unlock()
	r.h.ServeHTTP(w, req)
}

// fuzzHandler returns the API handler over a daemon with a store that
// keeps nothing and the simulated executor.
func fuzzHandler(tb testing.TB) http.Handler {
	d, err := daemon.New(daemon.Config{Store: memStore{}, Executor: simulated.New(simulated.Options{}),
		Logger: slog.New(slog.DiscardHandler), Tick: 50 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return api.New(d, slog.New(slog.DiscardHandler))
}

// sdkRequests runs the AWS SDK through every operation against h and
// returns the request bodies it sent, by operation.
func sdkRequests(tb testing.TB, h http.Handler) map[string][][]byte {
	rec := &recorder{h: h, bodies: map[string][][]byte{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c := batchclient.New(srv.URL, "us-east-1", batchclient.NoRetry)
	ctx := context.Background()
	pol, _ := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo},
		Tags:             map[string]string{"team": "ml"}})
	c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(4)}}})
	polARN := aws.String("pol")
	if pol != nil {
		polARN = pol.Arn
	}
	c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), Priority: aws.Int32(1), SchedulingPolicyArn: polARN,
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}},
		JobStateTimeLimitActions: []types.JobStateTimeLimitAction{{Action: types.JobStateTimeLimitActionsActionCancel, MaxTimeSeconds: aws.Int32(600),
			Reason: aws.String("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"), State: types.JobStateTimeLimitActionsStateRunnable}}})
	sh, _ := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("A"), JobQueue: aws.String("q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(2)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, BorrowLimit: aws.Int32(100)},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateEnabled}})
	shARN := aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/A")
	if sh != nil {
		shARN = sh.QuotaShareArn
	}
	job, _ := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j1"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		SchedulingPriority: aws.Int32(3), ServiceJobType: types.ServiceJobTypeSagemakerTraining, ClientToken: aws.String("tok-1"),
		RetryStrategy:           &types.ServiceJobRetryStrategy{Attempts: aws.Int32(3), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{{Action: types.ServiceJobRetryActionRetry, OnStatusReason: aws.String("Essential*")}}},
		PreemptionConfiguration: &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(2)},
		TimeoutConfig:           &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(3600)},
		Tags:                    map[string]string{"k": "v"},
		ServiceRequestPayload:   aws.String(`{"TrainingJobName":"t","ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":10},"StoppingCondition":{"MaxRuntimeInSeconds":600},"Environment":{"QSHARE_SIM_DURATION":"1s"}}`)})
	jobID := aws.String("00000000-0000-0000-0000-000000000000")
	if job != nil {
		jobID = job.JobId
	}
	c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: jobID, SchedulingPriority: aws.Int32(5)})
	c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: jobID})
	c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: types.ServiceJobStatusRunnable, MaxResults: aws.Int32(10)})
	c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"A"}}}})
	c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("q")})
	c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: shARN})
	c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q"), MaxResults: aws.Int32(5)})
	c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: shARN, State: types.QuotaShareStateEnabled,
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(3)}}})
	c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"env"}})
	c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("env"), State: types.ServiceEnvironmentStateEnabled,
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(6)}}})
	c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
	c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), Priority: aws.Int32(2), State: types.JQStateEnabled})
	c.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: []string{aws.ToString(polARN)}})
	c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{MaxResults: aws.Int32(10)})
	c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: polARN,
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: jobID, Reason: aws.String("done")})
	c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: shARN})
	c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String("q")})
	c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: polARN})
	c.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: aws.String("env")})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.bodies
}

// FuzzOperation posts fuzzed bodies to every operation of the real API
// handler, seeded with the requests the AWS SDK sends. Invariant: no panic,
// never a 500, and every rejection is a 400 ClientException with a message.
// The daemon behind it lives across inputs, so inputs also meet the state
// earlier ones made.
//
//	go test ./api -run '^$' -fuzz FuzzOperation -fuzztime 60s
func FuzzOperation(f *testing.F) {
	seedHandler := fuzzHandler(f)
	for op, bodies := range sdkRequests(f, seedHandler) {
		for i, name := range operations {
			if name == op {
				for _, b := range bodies {
					f.Add(uint8(i), b)
				}
			}
		}
	}
	f.Add(uint8(18), []byte(`{"jobName":"x","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","serviceRequestPayload":"{}"}`))
	f.Add(uint8(0), []byte(`{"serviceEnvironmentName":1}`))
	f.Add(uint8(21), []byte(`{"jobQueue":"q","nextToken":"!!"}`))
	f.Add(uint8(24), []byte(`null`))
	f.Add(uint8(23), []byte(`{"jobs":["00000000-0000-0000-0000-000000000000","arn:aws:batch:us-east-1:000000000000:service-job/x"],"reason":"r"}`))
	h := fuzzHandler(f)
	// State for the inputs to meet.
	sdkRequests(f, h)
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		name := operations[int(op)%len(operations)]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/"+name, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			if !json.Valid(out) {
				t.Fatalf("%s: 200 with a body that is not JSON: %q", name, out)
			}
			return
		}
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s: status %d with a body that is not an error object: %q", name, res.StatusCode, out)
		}
		if res.StatusCode != http.StatusBadRequest || e.Type != "ClientException" || e.Message == "" {
			t.Fatalf("%s %q: status %d %s %q: want a 400 ClientException with a message", name, body, res.StatusCode, e.Type, e.Message)
		}
		if got := res.Header.Get("X-Amzn-ErrorType"); got != "ClientException" {
			t.Fatalf("%s: X-Amzn-ErrorType %q", name, got)
		}
	})
}

// FuzzTags drives the tagging operations (TagResource POST, UntagResource
// DELETE with tagKeys in the query, ListTagsForResource GET on
// /v1/tags/{resourceArn}) with a fuzzed method, ARN path, query and body,
// seeded from the SDK's own requests. Same invariant as FuzzOperation.
//
//	go test ./api -run '^$' -fuzz FuzzTags -fuzztime 60s
func FuzzTags(f *testing.F) {
	h := fuzzHandler(f)
	rec := &recorder{h: h, bodies: map[string][][]byte{}}
	srv := httptest.NewServer(rec)
	c := batchclient.New(srv.URL, "us-east-1", batchclient.NoRetry)
	ctx := context.Background()
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("tagged"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	if err != nil {
		f.Fatal(err)
	}
	c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: pol.Arn, Tags: map[string]string{"team": "ml", "cost": "42"}})
	c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: pol.Arn})
	c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: pol.Arn, TagKeys: []string{"cost"}})
	srv.Close()
	escaped := url.PathEscape(aws.ToString(pol.Arn))
	for _, b := range rec.bodies["tags/"+aws.ToString(pol.Arn)] {
		f.Add(uint8(0), escaped, "", b)
	}
	f.Add(uint8(0), escaped, "", []byte(`{"tags":{"a":"b"}}`))
	f.Add(uint8(1), escaped, "tagKeys=team&tagKeys=cost", []byte(nil))
	f.Add(uint8(2), escaped, "", []byte(nil))
	f.Add(uint8(2), "arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Ajob-queue%2Fnope", "", []byte(nil))
	f.Add(uint8(3), "%zz", "", []byte(`{}`))
	methods := []string{http.MethodPost, http.MethodDelete, http.MethodGet, http.MethodPut}
	f.Fuzz(func(t *testing.T, m uint8, path, query string, body []byte) {
		target := "/v1/tags/" + path
		if query != "" {
			target += "?" + query
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || strings.ContainsAny(target, " \t\r\n") {
			return // not a request a client can send
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, methods[int(m)%len(methods)], "/", bytes.NewReader(body))
		req.URL = u
		req.RequestURI = u.RequestURI()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			if len(out) > 0 && !json.Valid(out) {
				t.Fatalf("%s %s: 200 with a body that is not JSON: %q", req.Method, target, out)
			}
			return
		}
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s %s: status %d with a body that is not an error object: %q", req.Method, target, res.StatusCode, out)
		}
		if res.StatusCode != http.StatusBadRequest || e.Type != "ClientException" || e.Message == "" {
			t.Fatalf("%s %s %q: status %d %s %q: want a 400 ClientException with a message", req.Method, target, body, res.StatusCode, e.Type, e.Message)
		}
	})
}

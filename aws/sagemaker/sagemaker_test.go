package sagemaker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	btypes "github.com/aws/aws-sdk-go-v2/service/batch/types"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"

	"qshare/auth"
	"qshare/internal/batchclient"
	"qshare/internal/sdkenv"
	"qshare/trainingjob"
)

var ctx = context.Background()

type env struct {
	*sdkenv.Env
	sm *sm.Client
}

func newEnv(t *testing.T) *env {
	e := sdkenv.New(t, nil)
	return &env{e, sm.NewFromConfig(e.Config(), func(o *sm.Options) { o.BaseEndpoint = aws.String(e.URL) })}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// payload is a CreateTrainingJob request as ModelTrainer builds it, that
// runs for dur in the simulated executor and exits with code.
func payload(name string, dur time.Duration, code int) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName": name,
		"AlgorithmSpecification": map[string]any{"TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311",
			"TrainingInputMode": "File", "ContainerEntrypoint": []string{"/bin/sh", "-c"}, "ContainerArguments": []string{"echo 'Hello World'"},
			"MetricDefinitions": []map[string]string{{"Name": "loss", "Regex": "loss=([0-9.]+)"}}},
		"RoleArn":           "arn:aws:iam::000000000000:role/SageMakerRole",
		"HyperParameters":   map[string]string{"epochs": "3"},
		"OutputDataConfig":  map[string]string{"S3OutputPath": "s3://bucket/out/"},
		"ResourceConfig":    map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
		"StoppingCondition": map[string]any{"MaxRuntimeInSeconds": 300},
		"Environment":       map[string]string{"QSHARE_SIM_DURATION": dur.String(), "QSHARE_SIM_EXIT_CODE": fmt.Sprint(code)},
	})
	return string(b)
}

// submit submits a job of payload(name+timestamp) and waits for one of the statuses.
func (e *env) submit(t *testing.T, name string, dur time.Duration, code int, until ...btypes.ServiceJobStatus) (string, string) {
	t.Helper()
	return e.Submit(t, name, payload(name+"-2026-12-04-21-12-44-123", dur, code), until...)
}

func TestDescribeTrainingJob(t *testing.T) {
	e := newEnv(t)
	id, name := e.submit(t, "hello-world-simple-job", 50*time.Millisecond, 0, btypes.ServiceJobStatusSucceeded)
	if len(name) > 63 || !trainingjob.ValidTrainingJobName(name) {
		t.Fatalf("training job name %q is not valid", name)
	}
	out, err := e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(strings.ToUpper(name))})
	must(t, err)
	if aws.ToString(out.TrainingJobName) != name || out.TrainingJobStatus != types.TrainingJobStatusCompleted || out.SecondaryStatus != types.SecondaryStatusCompleted {
		t.Fatalf("describe = %s %s %s", aws.ToString(out.TrainingJobName), out.TrainingJobStatus, out.SecondaryStatus)
	}
	if got := aws.ToString(out.TrainingJobArn); got != trainingjob.AttemptARN("us-east-1", "000000000000", name) {
		t.Errorf("TrainingJobArn = %s", got)
	}
	if got, want := aws.ToString(out.ModelArtifacts.S3ModelArtifacts), "s3://bucket/out/"+name+"/output/model.tar.gz"; got != want {
		t.Errorf("S3ModelArtifacts = %s, want %s", got, want)
	}
	var statuses []string
	for _, tr := range out.SecondaryStatusTransitions {
		statuses = append(statuses, string(tr.Status))
		if tr.StartTime == nil || tr.EndTime == nil || tr.EndTime.Before(*tr.StartTime) {
			t.Errorf("transition %s: start %v end %v", tr.Status, tr.StartTime, tr.EndTime)
		}
	}
	if got := strings.Join(statuses, ","); got != "Starting,Downloading,Training,Uploading,Completed" {
		t.Errorf("transitions = %s", got)
	}
	if out.CreationTime == nil || out.TrainingStartTime == nil || out.TrainingEndTime == nil || out.LastModifiedTime == nil ||
		out.TrainingStartTime.Before(*out.CreationTime) || out.TrainingEndTime.Before(*out.TrainingStartTime) {
		t.Errorf("times: created %v start %v end %v", out.CreationTime, out.TrainingStartTime, out.TrainingEndTime)
	}
	if aws.ToInt32(out.BillableTimeInSeconds) < 1 || aws.ToInt32(out.TrainingTimeInSeconds) != aws.ToInt32(out.BillableTimeInSeconds) {
		t.Errorf("BillableTimeInSeconds = %d, TrainingTimeInSeconds = %d", aws.ToInt32(out.BillableTimeInSeconds), aws.ToInt32(out.TrainingTimeInSeconds))
	}
	// The request's own fields, as the SDK sent them.
	if aws.ToString(out.RoleArn) != "arn:aws:iam::000000000000:role/SageMakerRole" || out.HyperParameters["epochs"] != "3" ||
		out.ResourceConfig.InstanceType != types.TrainingInstanceTypeMlG5Xlarge || aws.ToInt32(out.ResourceConfig.InstanceCount) != 1 ||
		aws.ToInt32(out.StoppingCondition.MaxRuntimeInSeconds) != 300 || out.Environment["QSHARE_SIM_DURATION"] != "50ms" ||
		len(out.AlgorithmSpecification.MetricDefinitions) != 1 || aws.ToString(out.OutputDataConfig.S3OutputPath) != "s3://bucket/out/" {
		t.Errorf("echoed request fields: %+v", out)
	}
	if out.FailureReason != nil {
		t.Errorf("FailureReason = %q for a completed job", aws.ToString(out.FailureReason))
	}
	tags, err := e.sm.ListTags(ctx, &sm.ListTagsInput{ResourceArn: out.TrainingJobArn})
	must(t, err)
	if len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "team" || aws.ToString(tags.Tags[0].Value) != "a" {
		t.Errorf("ListTags = %+v", tags.Tags)
	}
	_ = id
}

func TestDescribeFailedTrainingJob(t *testing.T) {
	e := newEnv(t)
	_, name := e.submit(t, "fails", 10*time.Millisecond, 3, btypes.ServiceJobStatusFailed)
	out, err := e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	if out.TrainingJobStatus != types.TrainingJobStatusFailed || out.SecondaryStatus != types.SecondaryStatusFailed ||
		!strings.Contains(aws.ToString(out.FailureReason), "code 3") {
		t.Fatalf("describe = %s %s %q", out.TrainingJobStatus, out.SecondaryStatus, aws.ToString(out.FailureReason))
	}
	last := out.SecondaryStatusTransitions[len(out.SecondaryStatusTransitions)-1]
	if last.Status != types.SecondaryStatusFailed || !strings.Contains(aws.ToString(last.StatusMessage), "code 3") {
		t.Errorf("last transition = %s %q", last.Status, aws.ToString(last.StatusMessage))
	}
}

// TestStopTrainingJob: StopTrainingJob is Batch's terminate of the job
// whose attempt the training job is.
func TestStopTrainingJob(t *testing.T) {
	e := newEnv(t)
	id, name := e.submit(t, "long", time.Hour, 0, btypes.ServiceJobStatusRunning)
	out, err := e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	if out.TrainingJobStatus != types.TrainingJobStatusInProgress || out.SecondaryStatus != types.SecondaryStatusTraining || out.TrainingEndTime != nil {
		t.Fatalf("running job: %s %s end %v", out.TrainingJobStatus, out.SecondaryStatus, out.TrainingEndTime)
	}
	_, err = e.sm.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	d := batchclient.Await(t, e.Batch, id, "FAILED", 20*time.Second, func(d *batch.DescribeServiceJobOutput) bool { return d.Status == btypes.ServiceJobStatusFailed })
	if !aws.ToBool(d.IsTerminated) || !strings.Contains(aws.ToString(d.StatusReason), "StopTrainingJob") {
		t.Errorf("job after StopTrainingJob: terminated %v, reason %q", aws.ToBool(d.IsTerminated), aws.ToString(d.StatusReason))
	}
	out, err = e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	if out.TrainingJobStatus != types.TrainingJobStatusStopped || out.SecondaryStatus != types.SecondaryStatusStopped || out.FailureReason != nil {
		t.Errorf("stopped job: %s %s %q", out.TrainingJobStatus, out.SecondaryStatus, aws.ToString(out.FailureReason))
	}
	_, err = e.sm.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String(name)})
	wantAPIError(t, err, "ValidationException", "status Stopped")
}

func TestListTrainingJobs(t *testing.T) {
	e := newEnv(t)
	var names []string
	for i, code := range []int{0, 3, 0} {
		status := btypes.ServiceJobStatusSucceeded
		if code != 0 {
			status = btypes.ServiceJobStatusFailed
		}
		_, n := e.submit(t, fmt.Sprintf("job-%d", i), 10*time.Millisecond, code, status)
		names = append(names, n)
	}
	all, err := e.sm.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{})
	must(t, err)
	if len(all.TrainingJobSummaries) != 3 || aws.ToString(all.TrainingJobSummaries[0].TrainingJobName) != names[2] || all.NextToken != nil {
		t.Fatalf("ListTrainingJobs, newest first: %+v", all.TrainingJobSummaries)
	}
	// Pages of one, by name, ascending: every job once, in order.
	var paged []string
	p := sm.NewListTrainingJobsPaginator(e.sm, &sm.ListTrainingJobsInput{MaxResults: aws.Int32(1), SortBy: types.SortByName, SortOrder: types.SortOrderAscending})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		must(t, err)
		for _, s := range page.TrainingJobSummaries {
			paged = append(paged, aws.ToString(s.TrainingJobName))
		}
	}
	if strings.Join(paged, ",") != strings.Join(names, ",") {
		t.Errorf("pages by name: %v, want %v", paged, names)
	}
	for _, c := range []struct {
		in   sm.ListTrainingJobsInput
		want []string
	}{
		{sm.ListTrainingJobsInput{StatusEquals: types.TrainingJobStatusFailed}, names[1:2]},
		{sm.ListTrainingJobsInput{NameContains: aws.String("JOB-2")}, names[2:3]},
		{sm.ListTrainingJobsInput{CreationTimeAfter: aws.Time(time.Now().Add(time.Hour))}, nil},
		{sm.ListTrainingJobsInput{CreationTimeBefore: aws.Time(time.Now().Add(time.Hour)), SortOrder: types.SortOrderAscending}, names},
		{sm.ListTrainingJobsInput{WarmPoolStatusEquals: types.WarmPoolResourceStatusAvailable}, nil},
	} {
		out, err := e.sm.ListTrainingJobs(ctx, &c.in)
		must(t, err)
		var got []string
		for _, s := range out.TrainingJobSummaries {
			got = append(got, aws.ToString(s.TrainingJobName))
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("ListTrainingJobs(%+v) = %v, want %v", c.in, got, c.want)
		}
	}
	_, err = e.sm.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{MaxResults: aws.Int32(101)})
	wantAPIError(t, err, "ValidationException", "maxResults")
	_, err = e.sm.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{NextToken: aws.String("!!")})
	wantAPIError(t, err, "ValidationException", "NextToken")
}

func TestRefusals(t *testing.T) {
	e := newEnv(t)
	_, err := e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("awsbatchx01a2307ef70a74a8b148db4c9a80f0f7-1")})
	var nf *types.ResourceNotFound
	if !errors.As(err, &nf) {
		t.Errorf("describe of a missing job: %v, want ResourceNotFound", err)
	}
	_, err = e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("awsbatchold7c763339ef63f6dbbe26ff972441a681")})
	if !errors.As(err, &nf) {
		t.Errorf("describe of a missing job of the older form: %v, want ResourceNotFound", err)
	}
	_, err = e.sm.CreateTrainingJob(ctx, &sm.CreateTrainingJobInput{TrainingJobName: aws.String("x"), RoleArn: aws.String("arn:aws:iam::000000000000:role/r"),
		AlgorithmSpecification: &types.AlgorithmSpecification{TrainingInputMode: types.TrainingInputModeFile},
		OutputDataConfig:       &types.OutputDataConfig{S3OutputPath: aws.String("s3://b/o")},
		ResourceConfig:         &types.ResourceConfig{VolumeSizeInGB: aws.Int32(1)}, StoppingCondition: &types.StoppingCondition{}})
	wantAPIError(t, err, "ValidationException", "SubmitServiceJob")
	_, err = e.sm.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q")})
	wantAPIError(t, err, "ValidationException", "not the ARN of a training job")

	// Raw requests: every refusal is JSON in SageMaker's shape.
	for _, c := range []struct {
		target, ctype, body, wantType string
	}{
		{"SageMaker.CreateEndpoint", "application/x-amz-json-1.1", `{}`, "UnknownOperationException"},
		{"", "application/x-amz-json-1.1", `{}`, "UnknownOperationException"},
		{"SageMaker.DescribeTrainingJob", "application/x-amz-json-1.1", `{"TrainingJobName":`, "SerializationException"},
		{"SageMaker.DescribeTrainingJob", "application/x-amz-json-1.1", `[1]`, "SerializationException"},
		{"SageMaker.DescribeTrainingJob", "application/x-amz-json-1.1", `{"TrainingJobName":7}`, "SerializationException"},
		{"SageMaker.DescribeTrainingJob", "text/plain", `{"TrainingJobName":"x"}`, "SerializationException"},
		{"SageMaker.DescribeTrainingJob", "application/x-amz-json-1.1", `{}`, "ValidationException"},
		{"SageMaker.ListTrainingJobs", "application/x-amz-json-1.1", `{"SortBy":"Size"}`, "ValidationException"},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.URL, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		req.Header.Set("X-Amz-Target", c.target)
		if c.target == "" {
			req.Header.Set("X-Amz-Target", "SageMaker.")
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &got) != nil || got.Type != c.wantType || got.Message == "" {
			t.Errorf("%s %q: %d %s, want 400 %s", c.target, c.body, resp.StatusCode, b, c.wantType)
		}
	}
}

// TestAuthorization: with authentication, each operation is checked with
// qshare's policy engine, on the training job's ARN.
func TestAuthorization(t *testing.T) {
	e := newEnv(t)
	_, name := e.submit(t, "mine", time.Hour, 0, btypes.ServiceJobStatusRunning)
	keys, err := auth.Parse([]byte(`principals:
  - name: reader
    accessKeys: [{id: AKIAQSHAREREADER0001, secret: readerreaderreaderreaderreaderreader12}]
    policies: [read]
  - name: stopper
    accessKeys: [{id: AKIAQSHARESTOPPER001, secret: stopperstopperstopperstopperstopper123}]
    policies: [read, stop]
policies:
  read:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: ["sagemaker:Describe*", "sagemaker:StopTrainingJob"], Resource: "arn:aws:sagemaker:*:*:training-job/awsbatchmine*"}]
  stop:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: batch:TerminateServiceJob, Resource: "*"}]
`), "000000000000")
	must(t, err)
	principal := func(keyID string) *auth.Principal {
		p, _, ok := keys.Principal(keyID)
		if !ok {
			t.Fatalf("no principal of %s", keyID)
		}
		return p
	}
	e.Principal.Store(principal("AKIAQSHAREREADER0001"))
	_, err = e.sm.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	_, err = e.sm.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{})
	wantAPIError(t, err, "AccessDeniedException", "sagemaker:ListTrainingJobs")
	_, err = e.sm.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String(name)})
	wantAPIError(t, err, "AccessDeniedException", "batch:TerminateServiceJob")
	e.Principal.Store(principal("AKIAQSHARESTOPPER001"))
	_, err = e.sm.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
}

func wantAPIError(t *testing.T, err error, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code || !strings.Contains(ae.ErrorMessage(), msg) {
		t.Errorf("error %v, want %s with %q", err, code, msg)
	}
}

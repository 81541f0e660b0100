package api_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

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

package sagemaker_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	btypes "github.com/aws/aws-sdk-go-v2/service/batch/types"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"qshare/executor/process"
	"qshare/internal/sdkenv"
)

// The process executor's supervisors are this test binary.
func TestMain(m *testing.M) {
	process.MaybeSupervise()
	os.Exit(m.Run())
}

// TestFinalMetricDataList: the last value each MetricDefinitions regex
// matches in the job's log, from a real process; a regex that does not
// compile or never matches gives nothing.
func TestFinalMetricDataList(t *testing.T) {
	ex, err := process.New(ctx, process.Options{DataDir: t.TempDir(), GPUs: []string{"none"}, PollInterval: 10 * time.Millisecond})
	must(t, err)
	e := sdkenv.New(t, ex)
	c := sm.NewFromConfig(e.Config(), func(o *sm.Options) { o.BaseEndpoint = aws.String(e.URL) })
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName": "metrics",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "TrainingInputMode": "File",
			"ContainerEntrypoint": []string{"/bin/sh", "-c", "echo 'epoch 1 loss=0.93 acc=0.5'; echo 'epoch 2 loss=0.41'; echo 'epoch 3 acc=0.8 loss=nan?'"},
			"MetricDefinitions": []map[string]string{{"Name": "train:loss", "Regex": `loss=([0-9.]+)`}, {"Name": "acc", "Regex": `acc=([0-9.]+)`},
				{"Name": "bad", "Regex": `(`}, {"Name": "never", "Regex": `f1=([0-9.]+)`}}},
		"ResourceConfig":    map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
		"StoppingCondition": map[string]any{"MaxRuntimeInSeconds": 60},
	})
	_, name := e.Submit(t, "metrics", string(b), btypes.ServiceJobStatusSucceeded)
	out, err := c.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	must(t, err)
	got := map[string]float64{}
	for _, m := range out.FinalMetricDataList {
		got[aws.ToString(m.MetricName)] = float64(aws.ToFloat32(m.Value))
		if m.Timestamp == nil || !m.Timestamp.Equal(*out.TrainingEndTime) {
			t.Errorf("metric %s at %v, want the job's end %v", aws.ToString(m.MetricName), m.Timestamp, out.TrainingEndTime)
		}
	}
	if len(got) != 2 || got["train:loss"] != float64(float32(0.41)) || got["acc"] != float64(float32(0.8)) {
		t.Errorf("FinalMetricDataList = %v, want train:loss 0.41 and acc 0.8", got)
	}
}

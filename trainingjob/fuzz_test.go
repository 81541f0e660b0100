package trainingjob

import (
	"testing"

	"qshare"
)

// FuzzParse feeds arbitrary payloads to the parser: it must never panic,
// it must answer as encoding/json alone does, and every rejection must be
// an EINVALID error with a message. Seeds are payloads
// as the SageMaker Python SDK and the qshare CLI send them.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"TrainingJobName":"qs1-job-high","AlgorithmSpecification":{"TrainingImage":"763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311","TrainingInputMode":"File","ContainerEntrypoint":["echo"],"ContainerArguments":["Hello World"]},"RoleArn":"arn:aws:iam::123456789012:role/SageMakerRole","OutputDataConfig":{"S3OutputPath":"s3://bucket/out"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":30},"StoppingCondition":{"MaxRuntimeInSeconds":300}}`,
		`{"ResourceConfig":{"InstanceGroups":[{"InstanceGroupName":"a","InstanceType":"ml.g5.xlarge","InstanceCount":2},{"InstanceGroupName":"b","InstanceType":"ml.p4d.24xlarge","InstanceCount":1}]}}`,
		`{"HyperParameters":{"epochs":"3"},"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3Uri":"file:///data/train"}}}],"Environment":{"QSHARE_SIM_DURATION":"5s"},"CheckpointConfig":{"LocalPath":"checkpoints"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge"}}`,
		`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":-1}}`,
		`{"ResourceConfig":{"InstanceCount":1e400}}`,
		`null`, `[]`, `""`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		r, err := Parse(payload)
		if err != nil {
			checkRejection(t, err)
			return
		}
		d, err := r.Demand()
		if err != nil {
			checkRejection(t, err)
			return
		}
		if len(d) == 0 {
			t.Fatalf("Demand of %q is empty without an error", payload)
		}
		for typ, n := range d {
			if typ == "" || n < 1 {
				t.Fatalf("Demand of %q has %q=%d", payload, typ, n)
			}
		}
		_ = r.Command()
		_ = r.MaxRuntimeSeconds()
	})
}

func checkRejection(t *testing.T, err error) {
	t.Helper()
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || err.Error() == "" {
		t.Fatalf("rejection %v has code %q, want EINVALID with a message", err, qshare.ErrorCodeOf(err))
	}
}

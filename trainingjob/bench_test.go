package trainingjob

import "testing"

// benchPayloads are a payload as internal/bench/ and the simulated executor's tests
// send it, and one as the SageMaker Python SDK does, with channels,
// hyperparameters and tags.
var benchPayloads = map[string]string{
	"bench": `{"TrainingJobName":"j","AlgorithmSpecification":{"TrainingImage":"qshare-bench:latest","TrainingInputMode":"File"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},"Environment":{"QSHARE_SIM_DURATION":"1ms"}}`,
	"sdk":   `{"TrainingJobName":"pytorch-training-2026-11-30-02-05-13-123","AlgorithmSpecification":{"TrainingImage":"763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311","TrainingInputMode":"File","ContainerEntrypoint":["python3","train.py"],"ContainerArguments":["--epochs","3","--lr","0.001"]},"RoleArn":"arn:aws:iam::123456789012:role/SageMakerRole","HyperParameters":{"epochs":"3","lr":"0.001","sagemaker_program":"\"train.py\"","sagemaker_submit_directory":"\"s3://bucket/src/sourcedir.tar.gz\""},"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3DataType":"S3Prefix","S3Uri":"file:///data/train","S3DataDistributionType":"FullyReplicated"}}},{"ChannelName":"test","DataSource":{"S3DataSource":{"S3DataType":"S3Prefix","S3Uri":"file:///data/test"}}}],"OutputDataConfig":{"S3OutputPath":"s3://bucket/out"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2,"VolumeSizeInGB":30},"StoppingCondition":{"MaxRuntimeInSeconds":86400},"Environment":{"QSHARE_SIM_DURATION":"5s","NCCL_DEBUG":"INFO"},"CheckpointConfig":{"S3Uri":"s3://bucket/ckpt","LocalPath":"/opt/ml/checkpoints"},"Tags":[{"Key":"team","Value":"ml"},{"Key":"project","Value":"qshare"}]}`,
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"bench", "sdk"} {
		p := benchPayloads[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := Parse(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidate times the SageMaker rules alone, on decoded payloads.
func BenchmarkValidate(b *testing.B) {
	for _, name := range []string{"bench", "sdk"} {
		r, err := decode(benchPayloads[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Validate(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package processe2e_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/aws/s3/s3test"
)

// TestExternalS3 runs a job on a `qshare serve --s3-endpoint` whose store
// is SeaweedFS's S3 gateway, which no one here wrote and which checks
// every signature: the job's channel comes from it and its model goes to
// it, signed with the key that the server passes to the job's environment
// (--pass-env), as the SDK's credential chain finds it. A job whose key is
// refused FAILS with SageMaker's reason. It skips where SeaweedFS is not
// built (.ci/build-seaweedfs).
func TestExternalS3(t *testing.T) {
	skipShort(t)
	ep, c := s3test.SeaweedFS(t, map[string]map[string]string{"ext-data": {
		"input/train/sm_train.sh": "#!/bin/sh\nset -e\ncat \"$SM_CHANNEL_TRAIN/data.csv\" > \"$SM_MODEL_DIR/model.txt\"\n",
		"input/train/data.csv":    "7,8,9\n",
	}})
	payload := map[string]any{
		"InputDataConfig": []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{
			"S3DataType": "S3Prefix", "S3Uri": "s3://ext-data/input/train", "S3DataDistributionType": "FullyReplicated"}}}},
		"OutputDataConfig": map[string]any{"S3OutputPath": "s3://ext-data/output"},
	}
	entry := []string{"/bin/sh", "-c", `sh "$SM_CHANNEL_TRAIN/sm_train.sh"`}
	serve := func(secret string) *server {
		return startServer(t, newDataDir(t), serverOpts{
			args: []string{"--s3-endpoint", ep.URL, "--pass-env", "AWS_ACCESS_KEY_ID", "--pass-env", "AWS_SECRET_ACCESS_KEY"},
			env:  []string{"AWS_ACCESS_KEY_ID=" + ep.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + secret},
		})
	}

	s := serve(ep.SecretAccessKey)
	s.setup(map[string]int32{cpu: 1}, share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	id := s.submit(job{name: "external", share: "QS1", entrypoint: entry, payload: payload})
	d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
	arn := aws.ToString(d.LatestAttempt.ServiceResourceId.Value)
	name := arn[strings.LastIndex(arn, "/")+1:]
	model := s3test.TarGz(t, c, "ext-data", "output/"+name+"/output/model.tar.gz")
	if model["model.txt"] != "7,8,9\n" {
		t.Fatalf("model.tar.gz in SeaweedFS holds %q, want the staged channel's data", model)
	}

	wrong := serve("not-the-secret")
	wrong.setup(map[string]int32{cpu: 1}, share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	bad := wrong.submit(job{name: "external-refused", share: "QS1", entrypoint: entry, payload: payload})
	d = wrong.AwaitStatus(bad, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !strings.HasPrefix(r, "ClientError: Data download failed: ") || !strings.Contains(r, "refused the credentials") {
		t.Errorf("a job whose key SeaweedFS refuses failed with %q, want SageMaker's reason", r)
	}
}

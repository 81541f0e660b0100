package processe2e_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"qshare/data"
	"qshare/internal/freeport"
	"qshare/internal/longtest"
	"qshare/internal/python"
)

// TestDataContract runs the SageMaker SDK's sm_drivers job on a real
// server with its embedded S3 store, filled by boto3 (a client no one here
// wrote) on the API's own address: the channel is staged before the
// script runs, and the model is in the store, under the attempt's training
// job name, once the job has SUCCEEDED. A job whose channel's prefix holds
// nothing FAILS with SageMaker's reason.
func TestDataContract(t *testing.T) {
	skipShort(t)
	py, ok := python.With("boto3")
	if !ok {
		t.Skip("python3 with boto3 is not installed: skipping the data contract's end-to-end test")
	}
	s := startServer(t, newDataDir(t), serverOpts{})
	s.setup(map[string]int32{cpu: 1}, share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	boto3 := func(script string, args ...string) string {
		t.Helper()
		pre := `import boto3, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="qshare", aws_secret_access_key="qshare",
                  config=boto3.session.Config(s3={"addressing_style": "path"}))
`
		out, err := exec.Command(py, append([]string{"-c", pre + script, s.endpoint}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("boto3: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	boto3(`s3.create_bucket(Bucket="qshare-data")
s3.put_object(Bucket="qshare-data", Key="input/sm_drivers/sm_train.sh", Body=b"#!/bin/sh\nset -e\ncat \"$SM_CHANNEL_SM_DRIVERS/data/train.csv\" > \"$SM_MODEL_DIR/model.txt\"\necho trained\n")
s3.put_object(Bucket="qshare-data", Key="input/sm_drivers/data/train.csv", Body=b"1,2,3\n")`)
	payload := func(prefix string) map[string]any {
		return map[string]any{
			"InputDataConfig": []map[string]any{{"ChannelName": "sm_drivers", "DataSource": map[string]any{"S3DataSource": map[string]any{
				"S3DataType": "S3Prefix", "S3Uri": "s3://qshare-data/" + prefix, "S3DataDistributionType": "FullyReplicated"}}}},
			"OutputDataConfig": map[string]any{"S3OutputPath": "s3://qshare-data/output"},
		}
	}
	entry := []string{"/bin/bash", "-c", `chmod +x "$SM_CHANNEL_SM_DRIVERS/sm_train.sh" && "$SM_CHANNEL_SM_DRIVERS/sm_train.sh"`}
	// trained waits for job id to succeed and returns the name of its
	// attempt and the model.txt in its model.tar.gz.
	trained := func(id string) (name, model string) {
		t.Helper()
		d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		arn := aws.ToString(d.LatestAttempt.ServiceResourceId.Value)
		name = arn[strings.LastIndex(arn, "/")+1:]
		return name, boto3(`import tarfile, io
b = s3.get_object(Bucket="qshare-data", Key="output/" + sys.argv[2] + "/output/model.tar.gz")["Body"].read()
print(tarfile.open(fileobj=io.BytesIO(b)).extractfile("model.txt").read().decode().strip())`, name)
	}
	id := s.submit(job{name: "sm-drivers", share: "QS1", entrypoint: entry, payload: payload("input/sm_drivers")})
	name, got := trained(id)
	if got != "1,2,3" {
		t.Fatalf("model.tar.gz of %s holds model.txt %q, want the staged channel's data", name, got)
	}
	if log := s.mustLogs(id, 1); !strings.Contains(log, "Downloading input data: ") || !strings.Contains(log, "trained") {
		t.Errorf("the job's log lacks the staging's progress or the script's output:\n%s", log)
	}

	// The SDK's own entry point, with its fixed /opt/ml paths: as root, the
	// process executor binds the job's directory there for the attempt.
	if os.Geteuid() != 0 {
		t.Log("not root: the SDK's /opt/ml entry point is not run here (the process executor refuses it at submit: TestOptMLRefusedWithout)")
	} else {
		boto3(`s3.put_object(Bucket="qshare-data", Key="input/ml_drivers/sm_train.sh", Body=b"#!/bin/sh\nset -e\ncat /opt/ml/input/data/sm_drivers/data/train.csv > /opt/ml/model/model.txt\necho 'export SM_X=from-env-file' > /opt/ml/input/sm_training.env\n. /opt/ml/input/sm_training.env\necho \"trained $SM_X $SM_MODEL_DIR\"\n")
s3.put_object(Bucket="qshare-data", Key="input/ml_drivers/data/train.csv", Body=b"4,5,6\n")`)
		sdk := []string{"/bin/bash", "-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"}
		id := s.submit(job{name: "sm-drivers-optml", share: "QS1", entrypoint: sdk, payload: payload("input/ml_drivers")})
		name, got := trained(id)
		if got != "4,5,6" {
			t.Fatalf("model.tar.gz of the /opt/ml job %s holds model.txt %q, want the staged channel's data", name, got)
		}
		if log := s.mustLogs(id, 1); !strings.Contains(log, "trained from-env-file /opt/ml/model") {
			t.Errorf("the /opt/ml job's log lacks its script's output:\n%s", log)
		}
	}

	bad := s.submit(job{name: "no-data", share: "QS1", entrypoint: entry, payload: payload("input/nothing-here")})
	d := s.AwaitStatus(bad, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !strings.Contains(r, "ClientError: Data download failed: ") || !strings.Contains(r, "no objects under the prefix") {
		t.Errorf("a job whose channel is empty failed with %q, want SageMaker's reason", r)
	}
}

// TestKillServerDuringUpload kills the server (the embedded store) with
// SIGKILL while a job's wrapper uploads its 256 MiB model in parts, and
// starts it again on the same address: the store forgets the multipart
// upload, and the wrapper sends the model again from its first byte
// (data.ObjectTries) or fails the job with the upload's reason. Either
// way the model's key never holds half an object: it is missing, or it is
// the whole model.tar.gz, byte for byte what the job wrote.
func TestKillServerDuringUpload(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "a job's 256 MiB model, and the server killed midway through its upload; in the README's command the data package's TestRunStoreDownDuringUpload stops the store under an upload, which the wrapper retries and then fails with its reason")
	dataDir := newDataDir(t)
	// A port below the kernel's ephemeral range (freeport), so that no
	// connection of the wrapper's, retrying while the server is down,
	// takes it before the server binds it again.
	ports, err := freeport.Ports(1)
	must(t, err)
	addr := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", ports[0])}
	s := startServer(t, dataDir, serverOpts{args: addr})
	s.setup(map[string]int32{cpu: 1}, share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	ctx := context.Background()
	s3c := func(endpoint string) *s3.Client {
		c, err := data.NewClient(ctx, data.Endpoint{URL: endpoint, Region: "us-east-1", AccessKeyID: "qshare", SecretAccessKey: "qshare"})
		must(t, err)
		return c.S3()
	}
	_, err = s3c(s.endpoint).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("models")})
	must(t, err)
	// The job writes 256 MiB of random weights and their digest.
	entry := []string{"/bin/sh", "-c", `head -c 268435456 /dev/urandom > "$SM_MODEL_DIR/weights.bin" && echo "digest $(sha256sum < "$SM_MODEL_DIR/weights.bin" | cut -c1-64)"`}
	id := s.submit(job{name: "big-model", share: "QS1", entrypoint: entry,
		payload: map[string]any{"OutputDataConfig": map[string]any{"S3OutputPath": "s3://models/out"}}})
	digest := regexp.MustCompile(`digest ([0-9a-f]{64})`).FindStringSubmatch(s.awaitLog(id, 1, "digest "))
	if digest == nil {
		t.Fatalf("the job's log has no digest:\n%s", s.mustLogs(id, 1))
	}
	// Kill the server once the store holds a part of the model's
	// multipart upload: the upload is midway.
	c := s3c(s.endpoint)
	deadline := time.Now().Add(waitLimit)
	for {
		if midway(ctx, c, "models") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no multipart upload of the model was seen within %s; the job's log:\n%s", waitLimit, s.mustLogs(id, 1))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	s2 := startServer(t, dataDir, serverOpts{args: addr})
	d := s2.Await(id, "SUCCEEDED or FAILED", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusSucceeded || d.Status == types.ServiceJobStatusFailed
	})
	arn := aws.ToString(d.LatestAttempt.ServiceResourceId.Value)
	key := "out/" + arn[strings.LastIndex(arn, "/")+1:] + "/output/model.tar.gz"
	obj, err := s3c(s2.endpoint).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String(key)})
	var nsk *s3types.NoSuchKey
	switch {
	case err == nil:
		defer obj.Body.Close()
		if got := tarDigest(t, obj.Body, "weights.bin"); got != digest[1] {
			t.Fatalf("%s holds weights.bin with digest %s, want the job's %s: half an object under the final key", key, got, digest[1])
		}
		if d.Status != types.ServiceJobStatusSucceeded {
			t.Errorf("the model is whole in the store, but the job is %s (%s)", d.Status, aws.ToString(d.StatusReason))
		}
		t.Logf("the upload was sent again after the restart: the job SUCCEEDED with its whole model")
	case errors.As(err, &nsk):
		if r := aws.ToString(d.StatusReason); d.Status != types.ServiceJobStatusFailed || !strings.Contains(r, "Artifact upload failed") {
			t.Fatalf("the model is not in the store, and the job is %s with %q, want FAILED with the upload's reason", d.Status, r)
		}
		t.Logf("the job failed clearly: %s", aws.ToString(d.StatusReason))
	default:
		t.Fatalf("GetObject of %s: %v", key, err)
	}
	if !strings.Contains(s2.mustLogs(id, 1), "digest ") {
		t.Errorf("the attempt's log was lost")
	}
}

// midway reports whether bucket has a multipart upload in progress that
// holds at least one part.
func midway(ctx context.Context, c *s3.Client, bucket string) bool {
	ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return false
	}
	for _, u := range ups.Uploads {
		parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		if err == nil && len(parts.Parts) > 0 {
			return true
		}
	}
	return false
}

// tarDigest returns the SHA-256 of the file name in the gzipped tar r.
func tarDigest(t *testing.T, r io.Reader, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(r)
	must(t, err)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("model.tar.gz: no %s (%v)", name, err)
		}
		if h.Name == name {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				t.Fatalf("model.tar.gz: reading %s: %v", name, err)
			}
			return hex.EncodeToString(sum.Sum(nil))
		}
	}
}

package container_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"qshare"
	"qshare/aws/s3/s3test"
	"qshare/data"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
	"qshare/trainingjob"
)

// TestDataContract runs an attempt with an S3 channel through the data
// contract (Options.Data): the channel is staged before the container
// starts, where the job reads it at /opt/ml/input/data/train, and the
// model it writes reaches S3OutputPath as model.tar.gz after its end.
func TestDataContract(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	ts := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer ts.Close()
	dc, err := data.NewClient(context.Background(), data.Endpoint{URL: ts.URL, Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := dc.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("in/train/part-0"), Body: strings.NewReader("rows\n")}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e, err := container.New(ctx, container.Options{DataDir: dir, Host: host, Pull: container.PullNever, GPUs: []string{"none"}, Data: dc})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
			"ContainerArguments": []string{"-run=0s", "-copy=/opt/ml/input/data/train/part-0:/opt/ml/model/seen"}},
		"InputDataConfig":  []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3DataType": "S3Prefix", "S3Uri": "s3://bkt/in/train"}}}},
		"OutputDataConfig": map[string]any{"S3OutputPath": "s3://bkt/out"},
		"ResourceConfig":   map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1},
	}
	s := spec("data", qshare.Capacity{"ml.m5.large": 1}, p)
	executortest.Start(t, e, s, 60*time.Second)
	if x := waitExit(t, e, s.AttemptID); !x.Succeeded() {
		t.Fatalf("exit = %+v", x)
	}
	name := trainingjob.AttemptName(s.JobName, s.JobID, 1)
	out, err := dc.S3().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("out/" + name + "/output/model.tar.gz")})
	if err != nil {
		t.Fatalf("the model is not at S3OutputPath: %v", err)
	}
	defer out.Body.Close()
	zr, err := gzip.NewReader(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == "seen" {
			var b bytes.Buffer
			io.Copy(&b, tr)
			found = b.String() == "rows\n"
		}
	}
	if !found {
		t.Errorf("model.tar.gz does not hold the staged channel's file as the job copied it")
	}
}

// TestStopUploadsAfterTheKill: a job that ignores SIGTERM outlives the
// stop's grace period and is killed; its model still reaches S3 (the
// executor uploads from the job's directory once the container has
// ended, whatever its end), and an upload that fails says so in the
// attempt's reason.
func TestStopUploadsAfterTheKill(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	ep, c := s3test.Start(t, map[string]map[string]string{"qshare-data": {}})
	dc, err := data.NewClient(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: host, Pull: container.PullNever, GPUs: []string{"none"}, Data: dc})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tc := range []struct{ name, out string }{{"uploaded", "s3://qshare-data/out"}, {"nobucket", "s3://no-such-bucket/out"}} {
		t.Run(tc.name, func(t *testing.T) {
			p := map[string]any{
				"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
					"ContainerArguments": []string{"-run=1h", "-onstop=ignore", "-write=/opt/ml/model/model.bin"}},
				"OutputDataConfig": map[string]any{"S3OutputPath": tc.out},
				"ResourceConfig":   map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1},
			}
			s := spec("killed-"+tc.name, qshare.Capacity{"ml.m5.large": 1}, p)
			h := executortest.Start(t, e, s, 60*time.Second)
			executortest.WaitForLog(t, h.LogPath, "ready\n", time.Minute)
			if err := e.Stop(context.Background(), s.AttemptID, 500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			x := waitExit(t, e, s.AttemptID)
			if !x.Stopped || x.Signal != "SIGKILL" {
				t.Fatalf("exit %+v, want killed at the grace period's end", x)
			}
			if tc.name == "nobucket" {
				if !strings.HasPrefix(x.Reason, data.KilledReason+"; after the kill, the model was not uploaded: ") || !strings.Contains(x.Reason, "NoSuchBucket") {
					t.Fatalf("reason %q, want the failed upload's", x.Reason)
				}
				return
			}
			name := trainingjob.AttemptName(s.JobName, s.JobID, 1)
			if m := s3test.TarGz(t, c, "qshare-data", "out/"+name+"/output/model.tar.gz"); m["model.bin"] == "" {
				t.Fatalf("model.tar.gz after the kill holds %q; exit %+v", m, x)
			}
		})
	}
}

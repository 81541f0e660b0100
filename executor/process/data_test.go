package process

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare/aws/s3/s3test"
	"qshare/data"
)

// s3Store starts qshare's embedded S3 store and returns its endpoint and
// a client of it holding the buckets given, filled with objects.
func s3Store(t *testing.T, objs map[string]map[string]string) (data.Endpoint, *s3.Client) {
	return slowS3Store(t, objs, 0)
}

// slowS3Store is s3Store whose GETs of objects each take delay.
func slowS3Store(t *testing.T, objs map[string]map[string]string, delay time.Duration) (data.Endpoint, *s3.Client) {
	return s3test.StartWith(t, objs, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/") > 0 {
				time.Sleep(delay)
			}
			h.ServeHTTP(w, r)
		})
	})
}

// smDrivers is the payload that the SageMaker Python SDK's ModelTrainer
// builds: a channel sm_drivers whose script the entry point runs.
func smDrivers(mutate func(map[string]any)) string {
	return payloadOf([]string{"/bin/bash", "-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"}, func(p map[string]any) {
		// The job's directory stands for /opt/ml: the script is found
		// through SM_CHANNEL_SM_DRIVERS instead.
		p["AlgorithmSpecification"].(map[string]any)["ContainerEntrypoint"] = []string{"/bin/bash", "-c", `chmod +x "$SM_CHANNEL_SM_DRIVERS/sm_train.sh" && "$SM_CHANNEL_SM_DRIVERS/sm_train.sh"`}
		p["InputDataConfig"] = []map[string]any{{"ChannelName": "sm_drivers", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3DataType": "S3Prefix", "S3Uri": "s3://qshare-data/input/sm_drivers"}}}}
		p["OutputDataConfig"] = map[string]any{"S3OutputPath": "s3://qshare-data/output"}
		if mutate != nil {
			mutate(p)
		}
	})
}

// TestStagesChannelsAndUploadsTheModel runs the SDK's sm_drivers job: the
// channel is staged before the script runs, and the model is in S3 under
// the attempt's training job name after it exited.
func TestStagesChannelsAndUploadsTheModel(t *testing.T) {
	ep, c := s3Store(t, map[string]map[string]string{"qshare-data": {
		"input/sm_drivers/sm_train.sh": "#!/bin/sh\necho weights > \"$SM_MODEL_DIR/model.bin\"\nls \"$SM_CHANNEL_SM_DRIVERS\"\n",
	}})
	dir := t.TempDir()
	e := newExecutor(t, dir, func(o *Options) { o.S3 = ep })
	defer e.Close()
	s := spec("job-data", 1, smDrivers(nil))
	s.ResourceARN = "arn:aws:sagemaker:us-east-1:000000000000:training-job/awsbatch-t-job-data-1"
	_, x := run(t, e, s)
	if !x.Succeeded() {
		log, _ := os.ReadFile(filepath.Join(dir, "attempts", s.AttemptID, fileOutput))
		t.Fatalf("exit %+v; log:\n%s", x, log)
	}
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("qshare-data"), Key: aws.String("output/awsbatch-t-job-data-1/output/model.tar.gz")})
	if err != nil {
		t.Fatalf("no model.tar.gz under the attempt's name: %v", err)
	}
	b, _ := io.ReadAll(out.Body)
	if len(b) == 0 {
		t.Fatal("model.tar.gz is empty")
	}
	idc, _ := os.ReadFile(filepath.Join(dir, "jobs", "job-data", "input", "config", "inputdataconfig.json"))
	if string(idc) != `{"sm_drivers":{"TrainingInputMode":"File","S3DistributionType":"FullyReplicated","RecordWrapperType":"None"}}` {
		t.Fatalf("inputdataconfig.json %s", idc)
	}
}

// TestDataFailureIsTheAttemptsReason: a missing prefix fails the attempt
// with SageMaker's reason, the program never runs, and nothing is written
// outside the job's directory.
func TestDataFailureIsTheAttemptsReason(t *testing.T) {
	ep, _ := s3Store(t, map[string]map[string]string{"qshare-data": {"elsewhere": "x"}})
	dir := t.TempDir()
	e := newExecutor(t, dir, func(o *Options) { o.S3 = ep })
	defer e.Close()
	s := spec("job-nodata", 1, smDrivers(nil))
	_, x := run(t, e, s)
	if x.Succeeded() || x.Lost || !strings.HasPrefix(x.Reason, "ClientError: Data download failed: ") || !strings.Contains(x.Reason, "no objects under the prefix") {
		t.Fatalf("exit %+v, want a failure with SageMaker's reason", x)
	}
}

// TestStagingProgressIsThePendingReason: while the wrapper downloads, the
// executor's PendingReason (the job's statusReason) says how far it is;
// once the program runs, nothing.
func TestStagingProgressIsThePendingReason(t *testing.T) {
	ep, _ := slowS3Store(t, map[string]map[string]string{"qshare-data": {"input/sm_drivers/sm_train.sh": "#!/bin/sh\nsleep 1\n"}}, 2500*time.Millisecond)
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.S3 = ep })
	defer e.Close()
	s := spec("job-progress", 1, smDrivers(nil))
	if _, err := e.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	v0 := e.PendingReasonsVersion()
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := e.PendingReason(s.AttemptID)
		seen[r] = true
		if r == "" && len(seen) > 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var progress bool
	for r := range seen {
		progress = progress || strings.HasPrefix(r, "Downloading input data: ") && strings.Contains(r, " of ")
	}
	if !progress || !seen[""] {
		t.Fatalf("PendingReason said %v, want the download's progress and then nothing", seen)
	}
	if e.PendingReasonsVersion() == v0 {
		t.Error("PendingReasonsVersion did not change")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if x, err := e.Wait(ctx, s.AttemptID); err != nil || !x.Succeeded() {
		t.Fatalf("exit %+v %v", x, err)
	}
}

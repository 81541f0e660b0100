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
	"qshare/internal/serveproc"
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
	t.Parallel()
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

// TestStopUploadsAfterTheKill: a program that ignores SIGTERM outlives
// the stop's grace period and is killed with its wrapper; the supervisor
// then runs the wrapper alone to upload the model, as SageMaker does
// after its kill, before the attempt ends. An upload that fails says so
// in the attempt's reason.
func TestStopUploadsAfterTheKill(t *testing.T) {
	t.Parallel()
	ep, c := s3Store(t, map[string]map[string]string{"qshare-data": {}})
	dir, err := os.MkdirTemp("", "qshare-afterkill")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // for the job of another user
	// The wrapper (this test binary) where that user may run it.
	self, _ := os.Executable()
	bin := filepath.Join(dir, "process.test")
	if err := serveproc.CopyExecutable(self, bin); err != nil {
		t.Fatal("cannot copy the test binary: ", err)
	}
	e := newExecutor(t, filepath.Join(dir, "data"), func(o *Options) { o.S3, o.Supervisor = ep, []string{bin} })
	defer e.Close()
	sc := `trap "" TERM; umask 077; echo weights > "$SM_MODEL_DIR/model.bin"; echo trapped; sleep 300`
	for _, tc := range []struct{ name, out string }{{"uploaded", "s3://qshare-data/output"}, {"nobucket", "s3://no-such-bucket/output"}, {"runas", "s3://qshare-data/output"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec("job-killed-"+tc.name, 1, payloadOf(sc, func(p map[string]any) {
				p["OutputDataConfig"] = map[string]any{"S3OutputPath": tc.out}
			}))
			s.ResourceARN = "arn:aws:sagemaker:us-east-1:000000000000:training-job/awsbatch-t-" + tc.name
			if tc.name == "runas" { // the model is its user's alone
				s.RunAs = namedTestUser(t, "qshare-alice-test").Name
			}
			h, err := e.Start(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			waitForLog(t, h.LogPath, "trapped\n", time.Minute)
			if err := e.Stop(context.Background(), s.AttemptID, 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			x, err := e.Wait(ctx, s.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			log, _ := os.ReadFile(h.LogPath)
			if !x.Stopped || x.Signal != "SIGKILL" {
				t.Fatalf("exit %+v, want killed at the grace period's end; log:\n%s", x, log)
			}
			if tc.name == "nobucket" {
				if !strings.Contains(x.Reason, "after the kill, the model was not uploaded: ") || !strings.Contains(x.Reason, "NoSuchBucket") {
					t.Fatalf("reason %q, want the failed upload's; log:\n%s", x.Reason, log)
				}
				return
			}
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("qshare-data"), Key: aws.String("output/awsbatch-t-" + tc.name + "/output/model.tar.gz")})
			if err != nil {
				t.Fatalf("no model.tar.gz under the attempt's name after the kill: %v; exit %+v; log:\n%s", err, x, log)
			}
			b, _ := io.ReadAll(out.Body)
			if len(b) == 0 || strings.Contains(x.Reason, "not uploaded") {
				t.Fatalf("model.tar.gz of %d bytes, reason %q", len(b), x.Reason)
			}
		})
	}
}

package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/serveproc"
)

// TestSageMakerSDKNotebook replays the SageMaker Python SDK's
// quota-management notebook through boto3, with the SDK's own calls and
// arguments (examples/sagemaker-sdk/replay_notebook.py), against the real
// binary with the simulated executor and only AWS_ENDPOINT_URL pointed at
// it: the role resolution (STS, IAM), the quota resources, the default
// bucket and the drivers' upload (S3), three QS1 jobs
// of which two are dispatched, QS2 reclaiming its capacity, the priority
// update preempting in-share, every job SUCCEEDED, get_model_trainer's
// DescribeTrainingJob and log tailing, TrainingQueue.map, terminate and
// StopTrainingJob. It is skipped, with a message, without python3 and a
// boto3 that knows the service-job operations.
func TestSageMakerSDKNotebook(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", `import boto3, sys; sys.exit(0 if hasattr(boto3.client("batch", region_name="us-east-1"), "create_quota_share") else 1)`).Run()
	}
	if err != nil {
		t.Skip("python3 with a boto3 that has the Batch quota-share operations (2025 or later) is not installed: the SageMaker SDK notebook replay is skipped")
	}
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"),
		Args: []string{"--executor", "simulated", "--sim-duration", "4s", "--log-level", "warn"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(root, "examples", "sagemaker-sdk", "replay_notebook.py"))
	var env []string
	for _, kv := range os.Environ() { // none of this machine's AWS settings
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "SAGEMAKER_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "AWS_ENDPOINT_URL="+srv.Endpoint, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ACCESS_KEY_ID=qshare", "AWS_SECRET_ACCESS_KEY=qshare", "AWS_DEFAULT_REGION=us-east-1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the replay failed: %v\n%s\nserver log:\n%s", err, out, srv.Log())
	}
	for _, s := range []string{"resolve-role", "quota-resources", "default-bucket", "qs1-two-dispatched", "qs2-reclaims", "priority-preempts-in-share",
		"list-jobs", "all-succeeded", "get-model-trainer", "map-terminate-stop"} {
		if !strings.Contains(string(out), "step "+s+" ok") {
			t.Errorf("step %s did not pass:\n%s", s, out)
		}
	}
	t.Logf("%s", out)
}

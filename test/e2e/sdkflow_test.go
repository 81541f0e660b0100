package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare/internal/longtest"
	"qshare/internal/python"
	"qshare/internal/serveproc"
)

// notebookSteps are the replay's steps, in order (examples/sagemaker-sdk/replay_notebook.py).
var notebookSteps = []string{"resolve-role", "quota-resources", "default-bucket", "qs1-two-dispatched", "qs2-reclaims", "priority-preempts-in-share",
	"list-jobs", "all-succeeded", "get-model-trainer"}

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
// boto3 that knows the service-job operations. As root, where
// TestSageMakerSDKNotebookProcess replays the same steps and more, it runs
// with QSHARE_LONG=1 (.ci/run's long step): a replay is some seconds of
// Python's CPU.
func TestSageMakerSDKNotebook(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 && !longtest.On() {
		t.Skip("as root, TestSageMakerSDKNotebookProcess replays the same steps on the process executor; this replay on the simulated executor runs with " + longtest.Env + "=1")
	}
	py := replayPython(t)
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"),
		Args: []string{"--executor", "simulated", "--sim-duration", "4s", "--log-level", "warn"}})
	replay(t, py, srv, nil, append(notebookSteps, "map-terminate-stop"))
}

// TestSageMakerSDKNotebookProcess replays the notebook against
// `qshare serve --executor process`, so its jobs run the SDK's
// sm_train.sh for real, with /opt/ml (the process executor gives it as
// root): SourceCode(command="echo 'Hello World'"), followed by a sleep so
// that a job runs long enough to be preempted. Beyond the simulated
// replay's steps it reads "Hello World" from the job's CloudWatch Logs
// stream and opens the model.tar.gz that DescribeTrainingJob names. With
// SAGEMAKER_SDK_SOURCE naming a checkout of aws/sagemaker-python-sdk the
// drivers are the SDK's own files (its environment.py included); without,
// a stand-in sm_train.sh of the same steps. It is skipped when not root
// (the process executor refuses an /opt/ml payload then), and as the
// simulated replay is.
func TestSageMakerSDKNotebookProcess(t *testing.T) {
	t.Parallel()
	py := replayPython(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the process executor gives jobs /opt/ml only as root, so the notebook's real program is not run here (TestSageMakerSDKNotebook replays it on the simulated executor)")
	}
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"),
		Args: []string{"--executor", "process", "--gpus", "none", "--stop-grace", "2s", "--log-level", "warn"}})
	env := []string{"REPLAY_EXECUTOR=process", "REPLAY_COMMAND=echo 'Hello World'; sleep 4"}
	if sdk := os.Getenv("SAGEMAKER_SDK_SOURCE"); sdk != "" {
		env = append(env, "SAGEMAKER_SDK_SOURCE="+sdk)
	} else {
		t.Log("SAGEMAKER_SDK_SOURCE is not set: the drivers channel holds the replay's stand-in sm_train.sh, not the SDK's own drivers")
	}
	replay(t, py, srv, env, append(notebookSteps, "program-output", "map-terminate-stop"))
}

// replayPython returns python3, or skips t when it or a boto3 with the
// Batch quota-share operations is missing.
func replayPython(t *testing.T) string {
	t.Helper()
	py, err := replayBoto3()
	if err != nil {
		t.Skip("python3 with a boto3 that has the Batch quota-share operations (2025 or later) is not installed: the SageMaker SDK notebook replay is skipped")
	}
	return py
}

// replayBoto3 returns python3 (internal/python) if its boto3 has the
// Batch quota-share operations, once per test binary.
var replayBoto3 = sync.OnceValues(func() (string, error) {
	py, err := python.Program("python3")
	if err == nil {
		err = exec.Command(py, "-c", `import boto3, sys; sys.exit(0 if hasattr(boto3.client("batch", region_name="us-east-1"), "create_quota_share") else 1)`).Run()
	}
	return py, err
})

// replay runs the notebook's replay against srv with extra environment
// variables, and checks that each of steps passed.
func replay(t *testing.T, py string, srv *serveproc.Server, extra []string, steps []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(root, "examples", "sagemaker-sdk", "replay_notebook.py"))
	var env []string
	for _, kv := range os.Environ() { // none of this machine's AWS settings
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "SAGEMAKER_") && !strings.HasPrefix(kv, "REPLAY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "AWS_ENDPOINT_URL="+srv.Endpoint, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ACCESS_KEY_ID=qshare", "AWS_SECRET_ACCESS_KEY=qshare", "AWS_DEFAULT_REGION=us-east-1"), extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the replay failed: %v\n%s\nserver log:\n%s", err, out, srv.Log())
	}
	for _, s := range steps {
		if !strings.Contains(string(out), "step "+s+" ok") {
			t.Errorf("step %s did not pass:\n%s", s, out)
		}
	}
	t.Logf("%s", out)
}

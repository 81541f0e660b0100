package security_test

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

// boto3Script checks a qshare serve --auth through boto3 and prints one
// line per check: its name, then "ok" or the AWS error code and message.
const boto3Script = `
import json, sys
import boto3, botocore
from botocore.config import Config
ep, keys = sys.argv[1], json.loads(sys.argv[2])
def client(key=None, secret=None, region="us-east-1", unsigned=False):
    cfg = Config(retries={"max_attempts": 1}, signature_version=botocore.UNSIGNED if unsigned else None)
    return boto3.client("batch", endpoint_url=ep, region_name=region, aws_access_key_id=key or "x",
                        aws_secret_access_key=secret or "x", config=cfg)
def check(name, f):
    try:
        f()
        print(name, "ok")
    except botocore.exceptions.ClientError as e:
        print(name, e.response["Error"]["Code"], e.response["Error"]["Message"])
alice, bob, admin = (client(*keys[n]) for n in ("alice", "bob", "admin"))
payload = json.dumps({"AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
    "Environment": {"QSHARE_SIM_DURATION": "1h"}})
def submit(c, share):
    return c.submit_service_job(jobName="b", jobQueue="training", quotaShareName=share, serviceJobType="SAGEMAKER_TRAINING",
                                serviceRequestPayload=payload)
check("unsigned", lambda: client(unsigned=True).list_scheduling_policies())
check("unknown-key", lambda: client("AKIAQSHAREMALLORY001", keys["alice"][1]).list_scheduling_policies())
check("wrong-secret", lambda: client(keys["alice"][0], "x" * 40).list_scheduling_policies())
check("wrong-region", lambda: client(*keys["alice"], region="eu-west-1").list_scheduling_policies())
check("alice-QS1", lambda: submit(alice, "QS1"))
check("alice-QS2", lambda: submit(alice, "QS2"))
job = submit(bob, "QS2")["jobId"]
check("alice-update-bob", lambda: alice.update_service_job(jobId=job, schedulingPriority=5))
check("alice-terminate-bob", lambda: alice.terminate_service_job(jobId=job, reason="x"))
check("admin-update-bob", lambda: admin.update_service_job(jobId=job, schedulingPriority=5))
`

// The checks of the SDK tests through boto3 and the AWS CLI (skipped, with
// a message, when they are not installed): every error by name, alice's
// shares, and admin.
func TestServeWithAuthBoto3AndCLI(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFileText(true)), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn", "--auth", file}, StopWait: 20 * time.Second})
	setupTraining(t, signedClient(srv.Endpoint, adminKey), "ml.g5.xlarge")
	env := append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=", "AWS_CA_BUNDLE=")

	t.Run("boto3", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err == nil {
			err = exec.Command(py, "-c", "import boto3").Run()
		}
		if err != nil {
			t.Skip("python3 with boto3 is not installed (Debian: python3-boto3): the boto3 checks are skipped")
		}
		keys := `{"alice": ["` + aliceKey[0] + `", "` + aliceKey[1] + `"], "bob": ["` + bobKey[0] + `", "` + bobKey[1] + `"], "admin": ["` + adminKey[0] + `", "` + adminKey[1] + `"]}`
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "-c", boto3Script, srv.Endpoint, keys)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("boto3: %v\n%s", err, out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			name, rest, _ := strings.Cut(line, " ")
			got[name] = rest
		}
		for name, want := range map[string]string{
			"unsigned":            "MissingAuthenticationTokenException Missing Authentication Token",
			"unknown-key":         "UnrecognizedClientException The security token included in the request is invalid",
			"wrong-secret":        "InvalidSignatureException The request signature we calculated does not match",
			"wrong-region":        "InvalidSignatureException Credential should be scoped to a valid region",
			"alice-QS1":           "ok",
			"alice-QS2":           "AccessDeniedException User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:SubmitServiceJob on resource: arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS2",
			"alice-update-bob":    "AccessDeniedException User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:UpdateServiceJob",
			"alice-terminate-bob": "AccessDeniedException User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:TerminateServiceJob",
			"admin-update-bob":    "ok",
		} {
			if !strings.HasPrefix(got[name], want) {
				t.Errorf("boto3 %s: %q, want %q…", name, got[name], want)
			}
		}
		if t.Failed() {
			t.Logf("boto3 said:\n%s", out)
		}
	})

	t.Run("aws-cli", func(t *testing.T) {
		awsCLI, err := exec.LookPath("aws")
		if err != nil {
			t.Skip("no aws on PATH: the AWS CLI checks are skipped")
		}
		run := func(key [2]string, args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, awsCLI, append(args, "--endpoint-url", srv.Endpoint, "--region", "us-east-1")...)
			cmd.Env = append(env, "AWS_ACCESS_KEY_ID="+key[0], "AWS_SECRET_ACCESS_KEY="+key[1])
			out, err := cmd.CombinedOutput()
			if err == nil {
				return "ok"
			}
			if strings.Contains(string(out), "Invalid choice") {
				t.Skipf("this aws does not know %s: %s", args[1], out)
			}
			return string(out)
		}
		payload := `{"AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"}, "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1}, "Environment": {"QSHARE_SIM_DURATION": "1h"}}`
		submit := func(share string) []string {
			return []string{"batch", "submit-service-job", "--job-name", "c", "--job-queue", "training", "--quota-share-name", share,
				"--service-job-type", "SAGEMAKER_TRAINING", "--service-request-payload", payload}
		}
		for _, c := range []struct {
			name string
			key  [2]string
			args []string
			want string
		}{
			{"unsigned", aliceKey, []string{"batch", "list-scheduling-policies", "--no-sign-request"}, "MissingAuthenticationTokenException"},
			{"unknown key", [2]string{"AKIAQSHAREMALLORY001", aliceKey[1]}, []string{"batch", "list-scheduling-policies"}, "UnrecognizedClientException"},
			{"wrong secret", [2]string{aliceKey[0], strings.Repeat("x", 40)}, []string{"batch", "list-scheduling-policies"}, "InvalidSignatureException"},
			{"alice QS1", aliceKey, submit("QS1"), "ok"},
			{"alice QS2", aliceKey, submit("QS2"), "AccessDeniedException"},
			{"admin", adminKey, []string{"batch", "list-service-jobs", "--job-queue", "training"}, "ok"},
		} {
			if got := run(c.key, c.args...); !strings.Contains(got, c.want) {
				t.Errorf("aws %s (%s): %s, want %s", strings.Join(c.args[:2], " "), c.name, got, c.want)
			}
		}
	})
}

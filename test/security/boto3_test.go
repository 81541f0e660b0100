package security_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"qshare/internal/longtest"
	"qshare/internal/python"
	"qshare/internal/serveproc"
)

// boto3Script checks a qshare serve --auth through boto3 and prints one
// line per check: its name, then "ok" or the AWS error code and message.
const boto3Script = `
import json, sys
import boto3, botocore
from botocore.config import Config
ep, keys = sys.argv[1], json.loads(sys.argv[2])
if not hasattr(boto3.client("batch", region_name="us-east-1"), "submit_service_job"):
    print("no-service-jobs")
    sys.exit(0)
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
# The clock skew: botocore's signer with its clock shifted, and its default
# retries (botocore does not correct a skewed clock from the answer).
import datetime, botocore.auth
_now = botocore.auth.get_current_datetime
def skewed(minutes, f):
    botocore.auth.get_current_datetime = lambda *a, **k: _now(*a, **k) + datetime.timedelta(minutes=minutes)
    try:
        return f()
    finally:
        botocore.auth.get_current_datetime = _now
retrying = boto3.client("batch", endpoint_url=ep, region_name="us-east-1", aws_access_key_id=keys["admin"][0],
                        aws_secret_access_key=keys["admin"][1])
for m in (-6, 6, -4, 4):
    check("skew%+dm" % m, lambda: skewed(m, retrying.list_scheduling_policies))
`

// pythonWith returns the path of python3 when it can import module
// (internal/python: past any pyenv shim, and tried once per test binary).
func pythonWith(module string) (string, bool) { return python.With(module) }

// skewPrelude, run before the AWS CLI's own main in the same Python, shifts
// the clock botocore signs with by QSHARE_TEST_SKEW_MINUTES, as faketime
// would (which is not installed here).
const skewPrelude = `
import datetime, os, sys, botocore.auth
_now = botocore.auth.get_current_datetime
_skew = datetime.timedelta(minutes=int(os.environ["QSHARE_TEST_SKEW_MINUTES"]))
botocore.auth.get_current_datetime = lambda *a, **k: _now(*a, **k) + _skew
from awscli.clidriver import main
sys.exit(main())
`

// The checks of the SDK tests through boto3 and the AWS CLI (skipped, with
// a message, when they are not installed): every error by name, alice's
// shares, and admin.
func TestServeWithAuthBoto3AndCLI(t *testing.T) {
	t.Parallel() // a server of its own, and mostly waiting (TestMain)
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFileText(true)), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn", "--auth", file}, StopWait: 20 * time.Second})
	setupTraining(t, signedClient(srv.Endpoint, adminKey), "ml.g5.xlarge")
	env := append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=", "AWS_CA_BUNDLE=")

	t.Run("boto3", func(t *testing.T) {
		py, ok := pythonWith("boto3")
		if !ok {
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
		if strings.TrimSpace(string(out)) == "no-service-jobs" {
			t.Skip("this boto3 predates the service-job operations (SubmitServiceJob): the boto3 checks are skipped; a boto3 of 2025 or later has them")
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
			"skew-6m":             "InvalidSignatureException Signature expired: ",
			"skew+6m":             "InvalidSignatureException Signature not yet current: ",
			"skew-4m":             "ok",
			"skew+4m":             "ok",
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
		payload := `{"AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"}, "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1}, "Environment": {"QSHARE_SIM_DURATION": "1h"}}`
		submit := func(share string) []string {
			return []string{"batch", "submit-service-job", "--job-name", "c", "--job-queue", "training", "--quota-share-name", share,
				"--service-job-type", "SAGEMAKER_TRAINING", "--service-request-payload", payload}
		}
		cases := []struct {
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
		}
		// One Python for the six commands, each through the CLI's own
		// driver with its own keys (internal/python.AWSCLI): a start of
		// aws each cost about a second of CPU.
		var cmds []python.CLICommand
		for _, c := range cases {
			cmds = append(cmds, python.CLICommand{Args: append(c.args, "--endpoint-url", srv.Endpoint, "--region", "us-east-1"),
				Env: slices.Concat(env, []string{"AWS_ACCESS_KEY_ID=" + c.key[0], "AWS_SECRET_ACCESS_KEY=" + c.key[1]})})
		}
		res := python.RunCLI(t, cmds)
		for i, c := range cases {
			got := "ok"
			if r := res[i]; r.Code != 0 {
				got = r.Stdout + r.Stderr
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("aws %s (%s): %s, want %s", strings.Join(c.args[:2], " "), c.name, got, c.want)
			}
		}
		// The skew limit, through the AWS CLI's own code with its clock
		// shifted: where that CLI is a Python program whose modules this
		// python3 imports (aws-cli v1, as here). Four more starts of the
		// CLI, each a second or more of CPU, for what the boto3 subtest
		// checks through the same botocore signer: with QSHARE_LONG=1
		// (.ci/run's long step).
		if !longtest.On() {
			t.Log("the AWS CLI's skew checks run with QSHARE_LONG=1 (the boto3 subtest checks the same limits)")
			return
		}
		py, ok := pythonWith("awscli.clidriver")
		if !ok {
			t.Log("python3 cannot import awscli (an AWS CLI v2 binary, or none): the AWS CLI's skew checks are skipped")
			return
		}
		for _, c := range []struct {
			minutes int
			want    string
		}{{-6, "InvalidSignatureException"}, {6, "InvalidSignatureException"}, {-4, ""}, {4, ""}} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, py, "-c", skewPrelude, "batch", "list-scheduling-policies", "--endpoint-url", srv.Endpoint, "--region", "us-east-1")
			cmd.Env = append(env, "AWS_ACCESS_KEY_ID="+adminKey[0], "AWS_SECRET_ACCESS_KEY="+adminKey[1], fmt.Sprintf("QSHARE_TEST_SKEW_MINUTES=%d", c.minutes))
			out, err := cmd.CombinedOutput()
			cancel()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("aws batch list-scheduling-policies with its clock %+d min off: %v\n%s", c.minutes, err, out)
			case c.want != "" && (err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "Signature")):
				t.Errorf("aws batch list-scheduling-policies with its clock %+d min off: %v\n%s, want %s", c.minutes, err, out, c.want)
			}
		}
	})
}

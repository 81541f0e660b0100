package security_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"qshare/internal/batchclient"
	"qshare/internal/serveproc"
)

// The keys of the real-process authentication tests.
var (
	aliceKey = [2]string{"AKIAQSHAREALICE00001", "alice-secret-alice-secret-alice-secret-1"}
	bobKey   = [2]string{"AKIAQSHAREBOB0000001", "bob-secret-bob-secret-bob-secret-bob-sec1"}
	adminKey = [2]string{"AKIAQSHAREADMIN00001", "admin-secret-admin-secret-admin-secret-12"}
)

func authFileText(withBob bool) string {
	bob := "  - name: bob\n"
	if withBob {
		bob += "    accessKeys: [{id: " + bobKey[0] + ", secret: " + bobKey[1] + "}]\n"
	}
	return authFile(`      - Effect: Allow
        Action: [batch:SubmitServiceJob, batch:UpdateServiceJob, batch:TerminateServiceJob, batch:GetServiceJobLogs]
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS1
      - Effect: Allow
        Action: [batch:Describe*, batch:List*, batch:GetJobQueueSnapshot, batch:GetJobQueueLending]
        Resource: "*"
`, bob+"    policies: [team-b]\n", `  team-b:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:SubmitServiceJob, batch:Describe*, batch:List*]
        Resource: ["arn:aws:batch:*:*:job-queue/training/quota-share/QS2", "*"]
`)
}

// authFile is an auth file of alice, whose policy team-a has the
// statements teamA (YAML list items), admin, who may call every batch
// action, and the principals and policies more adds (YAML, indented as
// the file's own).
func authFile(teamA, morePrincipals, morePolicies string) string {
	return `principals:
  - name: alice
    accessKeys: [{id: ` + aliceKey[0] + `, secret: ` + aliceKey[1] + `}]
    policies: [team-a]
  - name: admin
    accessKeys: [{id: ` + adminKey[0] + `, secret: ` + adminKey[1] + `}]
    policies: [admin]
` + morePrincipals + `policies:
  team-a:
    Version: "2012-10-17"
    Statement:
` + teamA + `  admin:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]
` + morePolicies
}

// startWithAuth starts qshare serve on the simulated executor with --auth
// of authFileText(true), in a temporary directory of its own.
func startWithAuth(t *testing.T) *serveproc.Server {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFileText(true)), 0o600))
	return serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "error", "--auth", file}})
}

func signedClient(endpoint string, key [2]string) *batch.Client {
	return batchclient.NewSigned(endpoint, "us-east-1", credentials.NewStaticCredentialsProvider(key[0], key[1], ""), nil, batchclient.NoRetry)
}

func awsCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// cli runs the qshare command line against endpoint with env (and a HOME
// with no AWS files of its own), and returns its output and error.
func cli(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A real qshare serve --auth: the file's mode is enforced at start, the
// command line signs every request with the credentials the AWS chain finds
// (environment, --profile), jobs record their submitter, and a key removed
// from the file stops working once the server gets SIGHUP.
func TestServeWithAuth(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(file, []byte(authFileText(true)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file others may read: the server refuses to start, and says why.
	out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "refused"), "--executor", "simulated", "--auth", file).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "chmod 600") {
		t.Fatalf("serve with a mode 644 auth file: %v\n%s", err, out)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "info", "--auth", file, "--audit", filepath.Join(dir, "audit.jsonl")}, StopWait: 20 * time.Second})
	ctx := context.Background()
	admin := signedClient(srv.Endpoint, adminKey)

	// The unsigned client of issue 14's tests is now refused.
	_, err = batchclient.New(srv.Endpoint, "us-east-1", batchclient.NoRetry).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	if awsCode(err) != "UnrecognizedClientException" {
		t.Fatalf("placeholder credentials: %v, want UnrecognizedClientException", err)
	}

	setupTraining(t, admin, "ml.g5.xlarge")

	ep := "QSHARE_ENDPOINT=" + srv.Endpoint
	aliceEnv := []string{ep, "AWS_ACCESS_KEY_ID=" + aliceKey[0], "AWS_SECRET_ACCESS_KEY=" + aliceKey[1]}
	bobEnv := []string{ep, "AWS_ACCESS_KEY_ID=" + bobKey[0], "AWS_SECRET_ACCESS_KEY=" + bobKey[1]}
	submit := []string{"submit", "--queue", "training", "--instance-type", "ml.g5.xlarge", "--env", "QSHARE_SIM_DURATION=1h", "-o", "json"}

	// The command line with no credentials at all is refused, by name.
	if out, err := cli(t, []string{ep}, "jobs"); err == nil || !strings.Contains(out, "UnrecognizedClientException") || !strings.Contains(out, "no AWS credentials were found") {
		t.Fatalf("qshare jobs without credentials: %v\n%s", err, out)
	}
	// alice, from the environment: QS1 yes, QS2 no.
	if out, err := cli(t, aliceEnv, append(submit, "--share", "QS1", "--name", "alice-1")...); err != nil {
		t.Fatalf("alice submits to QS1: %v\n%s", err, out)
	}
	if out, err := cli(t, aliceEnv, append(submit, "--share", "QS2", "--name", "alice-2")...); err == nil ||
		!strings.Contains(out, "AccessDeniedException: User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:SubmitServiceJob on resource: arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS2") {
		t.Fatalf("alice submits to QS2: %v\n%s", err, out)
	}
	// bob, from a profile of a shared credentials file (--profile).
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[bob]\naws_access_key_id = "+bobKey[0]+"\naws_secret_access_key = "+bobKey[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli(t, []string{ep, "AWS_SHARED_CREDENTIALS_FILE=" + creds}, append(submit, "--share", "QS2", "--name", "bob-1", "--profile", "bob")...); err != nil {
		t.Fatalf("bob submits to QS2 with --profile: %v\n%s", err, out)
	}
	// describe shows who submitted.
	if out, err := cli(t, aliceEnv, "describe", "alice-1"); err != nil || !strings.Contains(out, "qshare:submittedBy=arn:aws:iam::000000000000:user/alice") {
		t.Fatalf("qshare describe alice-1: %v\n%s", err, out)
	}
	// alice may not read bob's log, nor terminate his job; `qshare shares`
	// reads the lending endpoint, signed.
	if out, err := cli(t, aliceEnv, "logs", "bob-1"); err == nil || !strings.Contains(out, "batch:GetServiceJobLogs on resource: arn:aws:batch:us-east-1:000000000000:service-job/") {
		t.Fatalf("alice reads bob's log: %v\n%s", err, out)
	}
	if out, err := cli(t, aliceEnv, "terminate", "bob-1"); err == nil || !strings.Contains(out, "AccessDeniedException") {
		t.Fatalf("alice terminates bob's job: %v\n%s", err, out)
	}
	if out, err := cli(t, aliceEnv, "shares", "--queue", "training"); err != nil || !strings.Contains(out, "QS1") {
		t.Fatalf("alice's qshare shares: %v\n%s", err, out)
	}
	if out, err := cli(t, bobEnv, "shares", "--queue", "training"); err == nil || !strings.Contains(out, "batch:GetJobQueueLending") {
		t.Fatalf("bob's qshare shares (no batch:GetJobQueueLending): %v\n%s", err, out)
	}

	// /metrics is authorized as batch:GetMetrics; the probes need no signature.
	hc := func(key [2]string) *http.Client {
		return batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(key[0], key[1], ""), "us-east-1")
	}
	for _, c := range []struct {
		name string
		c    *http.Client
		path string
		code int
		want string
	}{
		{"alice's /metrics", hc(aliceKey), "/metrics", 403, "batch:GetMetrics on resource: *"},
		{"admin's /metrics", hc(adminKey), "/metrics", 200, ""},
		{"unsigned /metrics", http.DefaultClient, "/metrics", 403, "Missing Authentication Token"},
		{"unsigned /healthz", http.DefaultClient, "/healthz", 200, ""},
		{"unsigned /readyz", http.DefaultClient, "/readyz", 200, ""},
	} {
		resp, err := c.c.Get(srv.Endpoint + c.path)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, b)
		}
	}

	// bob's key removed from the file, and SIGHUP: it stops working.
	bob := signedClient(srv.Endpoint, bobKey)
	if _, err := bob.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("bob before the reload: %v", err)
	}
	if err := os.WriteFile(file, []byte(authFileText(false)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := bob.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
		if awsCode(err) == "UnrecognizedClientException" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's removed key still works 10 s after SIGHUP: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := admin.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("admin after the reload: %v", err)
	}
	// A broken file and SIGHUP: the server keeps the last good one, and says so.
	if err := os.WriteFile(file, []byte("principals: [{name: x, Efect: 1}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, syscall.Kill(srv.Pid(), syscall.SIGHUP))
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.Log(), "the auth file was not reloaded") {
		if time.Now().After(deadline) {
			t.Fatal("no log line for the refused reload")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := signedClient(srv.Endpoint, aliceKey).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("alice after a refused reload: %v", err)
	}
	// The audit log (--audit) has alice's refused submit and bob's refused
	// key, each with its outcome, written before the answers came.
	audit, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	must(t, err)
	for _, want := range []string{
		`"principal":"arn:aws:iam::000000000000:user/alice","source":"127.0.0.1:`,
		`"action":"batch:SubmitServiceJob","resource":["arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS2"],"outcome":"denied","status":403,"errorType":"AccessDeniedException"`,
		`"outcome":"denied","status":403,"errorType":"UnrecognizedClientException"`,
		`"action":"batch:CreateQuotaShare"`,
	} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("the audit log has no %s:\n%s", want, audit)
		}
	}
}

// usersMu makes ensureUser's look-up and useradd one step: the tests that
// share alice and bob run in parallel, and on a fresh host two of them
// would both find alice missing and both add her (the second useradd
// fails, and its test would skip).
var usersMu sync.Mutex

// ensureUser creates (once) the system user name, with more useradd
// arguments if given (-g 0, -G sudo), or skips the test.
func ensureUser(t *testing.T, name string, more ...string) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("jobs that run as their principal's unixUser need a test that runs as root, to create the users; run the tests as root to cover it")
	}
	usersMu.Lock()
	defer usersMu.Unlock()
	if u, err := user.Lookup(name); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", append(append([]string{"--system", "--no-create-home", "--shell", "/usr/sbin/nologin"}, more...), name)...).CombinedOutput(); err != nil {
		t.Skipf("useradd %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	must(t, err)
	return u
}

// A real qshare serve --auth with the process executor runs alice's job as
// alice's unixUser, and bob's job cannot read alice's checkpoints; a
// principal without a unixUser cannot submit; a file whose unixUser the
// server cannot run jobs as is refused at start.
func TestServeRunsJobsAsTheirPrincipal(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	alice, bob := ensureUser(t, "qshare-alice-test"), ensureUser(t, "qshare-bob-test")
	dir, err := os.MkdirTemp("", "qshare-auth-runas")
	must(t, err)
	defer os.RemoveAll(dir)
	must(t, os.Chmod(dir, 0o755)) // the jobs' users must reach their directories
	file := filepath.Join(dir, "auth.yaml")
	text := authWithUsers(alice, bob)

	// unixUser root, or a user that does not exist: the server does not start.
	for _, bad := range []string{"root", "qshare-no-such-user"} {
		must(t, os.WriteFile(file, []byte(strings.Replace(text, "unixUser: "+alice.Username, "unixUser: "+bad, 1)), 0o600))
		out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "refused"), "--executor", "process", "--gpus", "none", "--auth", file).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "principal alice's unixUser") {
			t.Fatalf("serve with alice's unixUser %s: %v\n%s", bad, err, out)
		}
	}
	// A server that does not run as root can run jobs only as its own user:
	// run as bob, it refuses alice's unixUser at start.
	if setpriv, err := exec.LookPath("setpriv"); err == nil {
		bobFile := filepath.Join(dir, "bob-auth.yaml")
		must(t, os.WriteFile(bobFile, []byte(text), 0o600))
		uid, _ := strconv.Atoi(bob.Uid)
		gid, _ := strconv.Atoi(bob.Gid)
		must(t, os.Chown(bobFile, uid, gid))
		out, err := exec.Command(setpriv, "--reuid", bob.Uid, "--regid", bob.Gid, "--clear-groups", bin, "serve", "--addr", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, "bob-data"), "--executor", "process", "--gpus", "none", "--auth", bobFile).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "principal alice's unixUser "+alice.Username+": this server runs as uid "+bob.Uid+", not as root") {
			t.Fatalf("a server run as bob, with alice's unixUser: %v\n%s", err, out)
		}
	} else {
		t.Log("setpriv is not installed: the refusal by a server that is not root is not checked")
	}
	must(t, os.WriteFile(file, []byte(text), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "process", "--gpus", "none", "--log-level", "warn", "--auth", file}, StopWait: 20 * time.Second})
	admin := signedClient(srv.Endpoint, adminKey)
	setupTraining(t, admin, "ml.m5.xlarge")
	submit := func(c *batch.Client, share, script string) (string, error) {
		return submitScript(c, share, script, nil)
	}
	wait := func(id string) *batch.DescribeServiceJobOutput { return waitJob(t, admin, id) }

	// admin has no unixUser: this server runs every job as its submitter.
	if _, err := submit(admin, "QS1", "true"); awsCode(err) != "ClientException" || !strings.Contains(err.Error(), "unixUser") {
		t.Fatalf("admin (no unixUser) submits: %v", err)
	}
	aliceJob, err := submit(signedClient(srv.Endpoint, aliceKey), "QS1", `id -u > "$SM_OUTPUT_DATA_DIR/uid" && echo secret-weights > "$SM_CHECKPOINT_DIR/ck"`)
	must(t, err)
	if out := wait(aliceJob); out.Status != types.ServiceJobStatusSucceeded || out.Tags["qshare:runAs"] != alice.Username {
		t.Fatalf("alice's job: %s (%s), tags %v", out.Status, aws.ToString(out.StatusReason), out.Tags)
	}
	jobDir := filepath.Join(dir, "data", "jobs", aliceJob)
	b, err := os.ReadFile(filepath.Join(jobDir, "output", "data", "uid"))
	if err != nil || strings.TrimSpace(string(b)) != alice.Uid {
		t.Fatalf("alice's job ran as uid %q (%v), want %s (%s)", b, err, alice.Uid, alice.Username)
	}
	ck := filepath.Join(jobDir, "checkpoints", "ck")
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("alice's checkpoint: %v", err)
	}
	bobJob, err := submit(signedClient(srv.Endpoint, bobKey), "QS2", `id -u; if cat "`+ck+`"; then exit 11; fi; exit 0`)
	must(t, err)
	if out := wait(bobJob); out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("bob's job, which fails if it can read alice's checkpoint: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
}

// setupTraining creates, as admin, job queue training with quota shares QS1
// and QS2 of 2 instances of typ each, over a service environment of 4.
func setupTraining(t *testing.T, admin *batch.Client, typ string) {
	t.Helper()
	ctx := context.Background()
	pol, err := admin.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(t, err)
	_, err = admin.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(typ), MaxCapacity: aws.Int32(4)}}})
	must(t, err)
	_, err = admin.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("training"), Priority: aws.Int32(1),
		SchedulingPolicyArn: pol.Arn, JobQueueType: types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	must(t, err)
	for _, sh := range []string{"QS1", "QS2"} {
		_, err = admin.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh), JobQueue: aws.String("training"),
			CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(typ), MaxCapacity: aws.Int32(2)}},
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
		must(t, err)
	}
}

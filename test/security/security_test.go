package security_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"qshare/internal/batchclient"
	"qshare/internal/python"
	"qshare/internal/serveproc"
)

// server is a running qshare serve and an AWS SDK client of it.
type server struct {
	srv  *serveproc.Server
	c    *batch.Client
	port string
}

// startServer starts qshare serve with the process executor (jobs are real
// processes, as in issue 14) and no GPUs, on a free loopback port.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: append([]string{"--executor", "process", "--gpus", "none", "--log-level", "warn"}, args...), StopWait: 20 * time.Second})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.Endpoint, "http://"))
	return &server{srv: srv, c: batchclient.New(srv.Endpoint, "us-east-1", batchclient.NoRetry), port: port}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// setup creates, through the AWS SDK, the job queue "q" on an environment
// of two ml.m5.xlarge (no GPU) and the share "team".
func (s *server) setup(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pol, err := s.c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(t, err)
	_, err = s.c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.m5.xlarge"), MaxCapacity: aws.Int32(2)}}})
	must(t, err)
	_, err = s.c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), Priority: aws.Int32(1),
		SchedulingPolicyArn: pol.Arn, JobQueueType: types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	must(t, err)
	_, err = s.c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("team"), JobQueue: aws.String("q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.m5.xlarge"), MaxCapacity: aws.Int32(2)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	must(t, err)
}

// submitBody is the wire body of a SubmitServiceJob whose job runs script
// with /bin/sh, as an attacker would write it by hand.
func submitBody(t *testing.T, name, script string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jobName": name, "jobQueue": "q", "serviceJobType": "SAGEMAKER_TRAINING",
		"quotaShareName": "team", "serviceRequestPayload": submitPayload(t, script)})
	must(t, err)
	return string(b)
}

// submitPayload is a SageMaker training payload whose job runs script with
// /bin/sh.
func submitPayload(t *testing.T, script string) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": "local/sh:latest", "TrainingInputMode": "File",
			"ContainerEntrypoint": []string{"/bin/sh", "-c"}, "ContainerArguments": []string{script}},
		"RoleArn":        "arn:aws:iam::000000000000:role/x",
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
	})
	must(t, err)
	return string(payload)
}

// jobs returns the names of every job the server has.
func (s *server) jobs(t *testing.T) []string {
	t.Helper()
	out, err := s.c.ListServiceJobs(context.Background(), &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	must(t, err)
	var names []string
	for _, j := range out.JobSummaryList {
		names = append(names, aws.ToString(j.JobName))
	}
	return names
}

// request is one hand-made HTTP request.
type request struct {
	method, path, host, body string
	header                   map[string]string
}

func (s *server) send(t *testing.T, r request) answer {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(method, s.srv.Endpoint+r.path, body)
	must(t, err)
	if r.host != "" {
		req.Host = strings.ReplaceAll(r.host, "PORT", s.port)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Type: resp.Header.Get("X-Amzn-ErrorType"), Body: string(b)}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		a.Message = e.Message
		if resp.StatusCode != http.StatusOK && e.Type != a.Type {
			t.Errorf("__type %q, X-Amzn-ErrorType %q", e.Type, a.Type)
		}
	}
	return a
}

// TestBrowserCannotRunCommands replays issue 14's finding 1: a page in the
// operator's browser sends a "simple" cross-site POST (text/plain, no CORS
// preflight) whose payload runs a command, and a DNS-rebinding page reads
// the answers. Each is refused, no job is created and nothing runs; the
// same payload from an API client, an allowed origin or an allowed host
// name is served, and its command runs, so the attack payload is real.
func TestBrowserCannotRunCommands(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	s := startServer(t, "--allow-origin", "https://dash.example", "--allow-host", "qshare.internal")
	s.setup(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	attack := submitBody(t, "pwn", "id > "+marker)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name string
		r    request
		typ  string
		says string
	}{
		{"issue 14's curl: text/plain with Origin http://evil.example", request{path: "/v1/submitservicejob", body: attack,
			header: map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}}, "AccessDeniedException", "Origin"},
		{"text/plain without Origin (an old browser, or a form)", request{path: "/v1/submitservicejob", body: attack,
			header: map[string]string{"Content-Type": "text/plain"}}, "ClientException", "Content-Type must be application/json"},
		{"form-encoded", request{path: "/v1/submitservicejob", body: attack,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, "ClientException", "Content-Type"},
		{"JSON with Origin http://evil.example", request{path: "/v1/submitservicejob", body: attack,
			header: map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}}, "AccessDeniedException", "http://evil.example"},
		{"JSON with Sec-Fetch-Site: cross-site", request{path: "/v1/submitservicejob", body: attack,
			header: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}}, "AccessDeniedException", "cross-site"},
		{"DNS rebinding: submit to Host attacker.example", request{path: "/v1/submitservicejob", body: attack, host: "attacker.example:PORT",
			header: jsonCT}, "AccessDeniedException", "attacker.example"},
		{"DNS rebinding: list the jobs", request{path: "/v1/listservicejobs", body: `{"jobQueue":"q"}`, host: "attacker.example:PORT",
			header: jsonCT}, "AccessDeniedException", "Host"},
		{"DNS rebinding: read a log", request{method: "GET", path: "/qshare/v1/logs/x", host: "attacker.example:PORT"}, "AccessDeniedException", "Host"},
		{"tags from another origin", request{path: "/v1/tags/arn:aws:batch:us-east-1:000000000000:job-queue/q", body: `{"tags":{"a":"b"}}`,
			header: map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}}, "AccessDeniedException", "Origin"},
	} {
		a := s.send(t, c.r)
		want := http.StatusForbidden
		if c.typ == "ClientException" {
			want = http.StatusBadRequest
		}
		if a.Status != want || a.Type != c.typ || !strings.Contains(a.Message, c.says) {
			t.Errorf("%s: %d %s %q, want %d %s saying %q", c.name, a.Status, a.Type, a.Message, want, c.typ, c.says)
		}
	}
	if names := s.jobs(t); len(names) != 0 {
		t.Fatalf("refused requests created jobs: %q", names)
	}

	// The allowed origin and host name, and the server's own origin.
	for _, c := range []struct {
		name string
		r    request
	}{
		{"allowed origin", request{path: "/v1/listservicejobs", body: `{"jobQueue":"q"}`,
			header: map[string]string{"Content-Type": "application/json", "Origin": "https://dash.example", "Sec-Fetch-Site": "cross-site"}}},
		{"allowed host", request{path: "/v1/listservicejobs", body: `{"jobQueue":"q"}`, host: "qshare.internal:PORT", header: jsonCT}},
		{"localhost", request{path: "/v1/listservicejobs", body: `{"jobQueue":"q"}`, host: "localhost:PORT", header: jsonCT}},
		{"own origin", request{path: "/v1/listservicejobs", body: `{"jobQueue":"q"}`,
			header: map[string]string{"Content-Type": "application/json", "Origin": s.srv.Endpoint, "Sec-Fetch-Site": "same-origin"}}},
	} {
		if a := s.send(t, c.r); a.Status != http.StatusOK {
			t.Errorf("%s: %d %s %q, want 200", c.name, a.Status, a.Type, a.Message)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the attack's command ran")
	}

	// The control: the same payload as an API client sends it runs.
	if a := s.send(t, request{path: "/v1/submitservicejob", body: attack, header: jsonCT}); a.Status != http.StatusOK {
		t.Fatalf("an API client's submit: %d %s %q", a.Status, a.Type, a.Message)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the control job's command did not run within a minute; jobs %q", s.jobs(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peerUser is the second Unix user of TestOtherUnixUserRefused and
// TestHalfOpenFloodFromRefusedUser.
const peerUser = "qshare-peer-test"

// peer returns the path of setpriv and the user peerUser (created if need
// be), to run a process as another Unix user. It skips t unless the test
// runs as root (why says what for) and setpriv is installed.
func peer(t *testing.T, why string) (setpriv string, u *user.User) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, " + why)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to run a process as another user")
	}
	return setpriv, ensureUser(t, peerUser)
}

// TestOtherUnixUserRefused replays issue 14's finding 2: another local
// user (a real one, created for the test) connects over loopback and tries
// to submit a job that runs a command as the server's user, to list every
// job and to read a log. Each is refused with an AccessDeniedException
// that says how to turn authentication on, nothing is created and nothing
// runs; the server's own user (root here) is served.
func TestOtherUnixUserRefused(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	setpriv, u := peer(t, "to create a second Unix user and run a client as it (run the tests as root to see it)")
	if u.Uid == "0" {
		t.Fatalf("%s is root", peerUser)
	}
	s := startServer(t)
	s.setup(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	attack := submitBody(t, "pwn", "id > "+marker+"; head /etc/shadow >> "+marker)

	// as runs the client as the other user (or, with uid "", as this one).
	as := func(uid, gid, method, path, body string) answer {
		t.Helper()
		var cmd *exec.Cmd
		if uid == "" {
			cmd = exec.Command(client)
		} else {
			cmd = exec.Command(setpriv, "--reuid="+uid, "--regid="+gid, "--clear-groups", client)
		}
		cmd.Env = []string{"QSHARE_SECURITY_CLIENT=" + s.srv.Endpoint + path, "QSHARE_SECURITY_METHOD=" + method, "QSHARE_SECURITY_BODY=" + body}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client as uid %q: %v\n%s", uid, err, stderr.String())
		}
		var a answer
		must(t, json.Unmarshal(out, &a))
		return a
	}
	for _, r := range []struct{ name, method, path, body string }{
		{"submit a job that runs a command", "POST", "/v1/submitservicejob", attack},
		{"list every job", "POST", "/v1/listservicejobs", `{"jobQueue":"q"}`},
		{"reconfigure a share", "POST", "/v1/updatequotashare", `{"quotaShareArn":"arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/team","capacityLimits":[{"capacityUnit":"ml.m5.xlarge","maxCapacity":0}]}`},
		{"read a log", "GET", "/qshare/v1/logs/x", ""},
	} {
		a := as(u.Uid, u.Gid, r.method, r.path, r.body)
		if a.Status != http.StatusForbidden || a.Type != "AccessDeniedException" ||
			!strings.Contains(a.Message, "--auth") || !strings.Contains(a.Message, "uid "+u.Uid) {
			t.Errorf("%s as %s (uid %s): %d %s %q, want a 403 AccessDeniedException that says how to turn authentication on", r.name, peerUser, u.Uid, a.Status, a.Type, a.Message)
		}
		if strings.Contains(a.Message, "/") && strings.Contains(a.Message, os.TempDir()) {
			t.Errorf("%s: the message shows a server path: %s", r.name, a.Message)
		}
	}
	if names := s.jobs(t); len(names) != 0 {
		t.Fatalf("the other user's requests created jobs: %q", names)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the other user's command ran")
	}

	// The server's own user is served, through the same client binary.
	if a := as("", "", "POST", "/v1/listservicejobs", `{"jobQueue":"q"}`); a.Status != http.StatusOK {
		t.Fatalf("the server's own user: %d %s %q", a.Status, a.Type, a.Message)
	}
}

// TestSDKAndCLIUnchanged: the AWS SDK for Go and the AWS CLI (botocore)
// still work through the guard, with the requests they send for empty
// inputs (the Go SDK: application/json and {}; botocore: no body and no
// Content-Type for GET and DELETE) and for the tag routes.
func TestSDKAndCLIUnchanged(t *testing.T) {
	t.Parallel() // a server of its own, and mostly waiting (TestMain)
	s := startServer(t)
	s.setup(t)
	ctx := context.Background()
	_, err := s.c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	must(t, err)
	_, err = s.c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
	must(t, err)
	_, err = s.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
	must(t, err)
	q, err := s.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
	must(t, err)
	arn := q.JobQueues[0].JobQueueArn
	_, err = s.c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: arn, Tags: map[string]string{"team": "a"}})
	must(t, err)
	tags, err := s.c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: arn})
	must(t, err)
	if tags.Tags["team"] != "a" {
		t.Fatalf("tags %v", tags.Tags)
	}
	_, err = s.c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: arn, TagKeys: []string{"team"}})
	must(t, err)
	// An SDK error still reads as an AWS error: the guard did not get in
	// the way of the API's own answers.
	_, err = s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String("nope")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ClientException" {
		t.Fatalf("DescribeServiceJob of an unknown job: %v", err)
	}
	// The SDK reads a refusal as an AWS error too.
	other := batchclient.New("http://localhost:"+s.port, "us-east-1", batchclient.NoRetry, func(o *batch.Options) {
		o.HTTPClient = headerDoer{"Origin", "http://evil.example"}
	})
	_, err = other.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("a request with Origin http://evil.example through the SDK: %v", err)
	}

	s.boto3(t, aws.ToString(arn))

	// One Python for the seven commands, each through the CLI's own
	// driver (internal/python.AWSCLI): a start of aws each cost about a
	// second of CPU.
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=qshare", "AWS_SECRET_ACCESS_KEY=qshare",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	var cmds []python.CLICommand
	for _, args := range [][]string{
		{"batch", "list-scheduling-policies"},
		{"batch", "describe-service-environments"},
		{"batch", "describe-job-queues"},
		{"batch", "list-service-jobs", "--job-queue", "q"},
		{"batch", "tag-resource", "--resource-arn", aws.ToString(arn), "--tags", "team=b"},
		{"batch", "list-tags-for-resource", "--resource-arn", aws.ToString(arn)},
		{"batch", "untag-resource", "--resource-arn", aws.ToString(arn), "--tag-keys", "team"},
	} {
		cmds = append(cmds, python.CLICommand{Args: append(args, "--endpoint-url", s.srv.Endpoint, "--region", "us-east-1"), Env: env})
	}
	for i, r := range python.RunCLI(t, cmds) {
		if r.Code != 0 {
			t.Errorf("aws %s: exit status %d\n%s%s", strings.Join(cmds[i].Args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
}

// boto3 drives the server through boto3 (testdata/boto3_check.py): empty
// inputs, a submit of a job of the server's share "team", an update, tags,
// and a refusal read as a ClientException. It is skipped, with a message,
// where python3 cannot import boto3 (CI installs no Python packages).
func (s *server) boto3(t *testing.T, queueARN string) {
	t.Helper()
	py, ok := pythonWith("boto3")
	if !ok {
		t.Log("python3 cannot import boto3: the boto3 part is skipped")
		return
	}
	payload := filepath.Join(t.TempDir(), "payload.json")
	must(t, os.WriteFile(payload, []byte(submitPayload(t, "sleep 600")), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/boto3_check.py", s.srv.Endpoint, queueARN, "team", payload)
	cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
	t.Logf("boto3:\n%s", out)
}

// headerDoer is an aws.HTTPClient that adds one header to every request,
// as a browser adds Origin.
type headerDoer [2]string

func (h headerDoer) Do(r *http.Request) (*http.Response, error) {
	r.Header.Set(h[0], h[1])
	return batchclient.BufferedDoer{Client: http.DefaultClient}.Do(r)
}

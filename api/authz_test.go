package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"qshare"
	"qshare/api"
	"qshare/auth"
	"qshare/daemon"
	"qshare/internal/batchclient"
	"qshare/logstream"
)

// The principals of the auth tests: alice and bob each own a quota share,
// carol may do anything but submit to QS1 and change scheduling policies (a
// Deny over an Allow), admin anything, nobody nothing.
var keys = map[string][2]string{
	"alice":  {"AKIAQSHAREALICE00001", "alice-secret-alice-secret-alice-secret-1"},
	"bob":    {"AKIAQSHAREBOB0000001", "bob-secret-bob-secret-bob-secret-bob-sec1"},
	"carol":  {"AKIAQSHARECAROL00001", "carol-secret-carol-secret-carol-secret-12"},
	"admin":  {"AKIAQSHAREADMIN00001", "admin-secret-admin-secret-admin-secret-12"},
	"nobody": {"AKIAQSHARENOBODY0001", "nobody-secret-nobody-secret-nobody-secre1"},
	"flood":  {"AKIAQSHAREFLOOD00001", "flood-secret-flood-secret-flood-secret-12"},
	"dave":   {"AKIAQSHAREDAVE000001", "dave-secret-dave-secret-dave-secret-dave1"},
}

func authFile(without ...string) string {
	skip := map[string]bool{}
	for _, w := range without {
		skip[w] = true
	}
	policies := map[string]string{"alice": "team-a", "bob": "team-b", "carol": "carol", "admin": "admin", "nobody": "", "flood": "admin", "dave": "team-a"}
	var b strings.Builder
	b.WriteString("principals:\n")
	for _, name := range []string{"alice", "bob", "carol", "admin", "nobody", "flood", "dave"} {
		b.WriteString("  - name: " + name + "\n")
		if !skip[name] {
			b.WriteString("    accessKeys: [{id: " + keys[name][0] + ", secret: " + keys[name][1] + "}]\n")
		}
		if p := policies[name]; p != "" {
			b.WriteString("    policies: [" + p + "]\n")
		}
		if name == "carol" {
			b.WriteString("    unixUser: carol\n")
		}
		if name == "flood" {
			b.WriteString("    limits: {requestsPerSecond: 20, burst: 10}\n")
		}
		if name == "dave" {
			b.WriteString("    limits: {unfinishedJobs: 2}\n")
		}
	}
	b.WriteString(`policies:
  team-a:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:SubmitServiceJob, batch:UpdateServiceJob, batch:TerminateServiceJob, batch:TerminateServiceJobs, batch:GetServiceJobLogs]
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS1
      - Effect: Allow
        Action: [batch:Describe*, batch:List*, batch:GetJobQueueSnapshot]
        Resource: "*"
  team-b:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:SubmitServiceJob, batch:UpdateServiceJob, batch:TerminateServiceJob, batch:GetServiceJobLogs, batch:DescribeServiceJob]
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS2
  carol:
    Version: "2012-10-17"
    Statement:
      - {Effect: Allow, Action: "batch:*", Resource: "*"}
      - {Effect: Deny, Action: batch:SubmitServiceJob, Resource: "arn:aws:batch:*:*:job-queue/training/quota-share/QS1"}
      - {Effect: Deny, Action: [batch:UpdateSchedulingPolicy, batch:DeleteSchedulingPolicy], Resource: "arn:aws:batch:*:*:scheduling-policy/*"}
      - {Effect: Deny, Action: batch:UpdateQuotaShare, Resource: "arn:aws:batch:*:*:job-queue/training/quota-share/QS1"}
  admin:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]
`)
	return b.String()
}

// authServer is a real server as qshare serve --auth runs it: the API, the
// log endpoint and the lending endpoint behind the request guard with an
// Authenticator over an auth file.
type authServer struct {
	*server
	a    *auth.Authenticator
	file string
}

func newAuthServer(t *testing.T, opts ...serverOption) *authServer {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(file, []byte(authFile()), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("QSHARE_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	db, ex, d := startDaemon(t, dir, log, opts)
	a, err := auth.NewAuthenticator(auth.AuthConfig{File: file, Region: "us-east-1", AccountID: "000000000000", BodyLimit: api.BodyLimit, WriteError: api.WriteError, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(logstream.PathPrefix, &logstream.Handler{Job: d.Job, Logs: ex.Logs, Resources: func(ref string) []string { return api.JobResources(d, ref) }})
	mux.Handle(api.LendingPath, api.LendingHandler(d))
	mux.Handle(api.QueuePath, api.QueueHandler(d))
	mux.Handle(api.PlansPath+"/", api.PlansHandler(d))
	mux.Handle("/", api.New(d, log))
	srv := httptest.NewUnstartedServer(mux)
	audit, err := auth.OpenAudit(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	guard, err := auth.New(auth.Config{Addr: srv.Listener.Addr().String(), Authenticator: a, Audit: audit, WriteError: api.WriteError, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	guard.Install(srv.Config)
	srv.Start()
	s := &server{t: t, d: d, db: db, ex: ex, url: srv.URL, dir: dir, srv: srv}
	t.Cleanup(s.close)
	s.c = as(srv.URL, "admin")
	return &authServer{server: s, a: a, file: file}
}

// as returns an AWS SDK client that signs with name's key.
func as(url, name string, opts ...func(*batch.Options)) *batch.Client {
	k := keys[name]
	return batchclient.NewSigned(url, "us-east-1", credentials.NewStaticCredentialsProvider(k[0], k[1], ""), nil, append([]func(*batch.Options){batchclient.NoRetry}, opts...)...)
}

// skewSigner is the SDK's signer with its clock off by skew.
type skewSigner struct{ skew time.Duration }

func (s skewSigner) SignHTTP(ctx context.Context, c aws.Credentials, r *http.Request, hash, service, region string, t time.Time, o ...func(*v4.SignerOptions)) error {
	return v4.NewSigner().SignHTTP(ctx, c, r, hash, service, region, t.Add(s.skew), o...)
}

// apiErr asserts err is the AWS error code (as the SDK names it) with a
// message containing every fragment.
func apiErr(t *testing.T, err error, code string, fragments ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want the AWS error %s", err, err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("error code %s (%s), want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	for _, f := range fragments {
		if !strings.Contains(ae.ErrorMessage(), f) {
			t.Fatalf("%s message %q does not contain %q", code, ae.ErrorMessage(), f)
		}
	}
}

func (s *authServer) submitAs(c *batch.Client, share string, tags map[string]string) (string, error) {
	out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String("j-" + share), JobQueue: aws.String("training"), QuotaShareName: aws.String(share),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(g5, 1, time.Hour, 0)),
		SchedulingPriority: aws.Int32(1), Tags: tags,
	})
	if err != nil {
		return "", err
	}
	return *out.JobId, nil
}

const (
	qs1ARN = "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS1"
	qs2ARN = "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS2"
)

func TestAuthErrorsByName(t *testing.T) {
	s := newAuthServer(t)
	_, err := batchclient.NewSigned(s.url, "us-east-1", aws.AnonymousCredentials{}, nil, batchclient.NoRetry).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	apiErr(t, err, "MissingAuthenticationTokenException", "Missing Authentication Token")
	_, err = batchclient.NewSigned(s.url, "us-east-1", credentials.NewStaticCredentialsProvider("AKIAQSHAREMALLORY001", keys["alice"][1], ""), nil, batchclient.NoRetry).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	apiErr(t, err, "UnrecognizedClientException", "The security token included in the request is invalid")
	_, err = batchclient.NewSigned(s.url, "us-east-1", credentials.NewStaticCredentialsProvider(keys["alice"][0], keys["bob"][1], ""), nil, batchclient.NoRetry).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	apiErr(t, err, "InvalidSignatureException", "does not match")
	_, err = batchclient.NewSigned(s.url, "eu-west-1", credentials.NewStaticCredentialsProvider(keys["alice"][0], keys["alice"][1], ""), nil, batchclient.NoRetry).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	apiErr(t, err, "InvalidSignatureException", "valid region")
	_, err = as(s.url, "nobody").ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	apiErr(t, err, "AccessDeniedException", "User: arn:aws:iam::000000000000:user/nobody is not authorized to perform: batch:ListSchedulingPolicies on resource: *")
	if _, err := as(s.url, "alice").ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("alice may list: %v", err)
	}
}

// The skew limit holds: a client whose clock is 6 minutes off either way is
// refused; one 4 minutes off is served.
func TestAuthSkew(t *testing.T) {
	s := newAuthServer(t)
	for _, skew := range []time.Duration{-6 * time.Minute, 6 * time.Minute} {
		_, err := as(s.url, "admin", func(o *batch.Options) { o.HTTPSignerV4 = skewSigner{skew} }).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
		apiErr(t, err, "InvalidSignatureException", "Signature")
	}
	if _, err := as(s.url, "admin", func(o *batch.Options) { o.HTTPSignerV4 = skewSigner{-4 * time.Minute} }).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("4 minutes off: %v", err)
	}
}

func TestAuthPolicies(t *testing.T) {
	s := newAuthServer(t)
	// admin may do everything: it creates the resources.
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "QS2", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	alice, bob, carol := as(s.url, "alice"), as(s.url, "bob"), as(s.url, "carol")

	aliceJob, err := s.submitAs(alice, "QS1", nil)
	if err != nil {
		t.Fatalf("alice submits to QS1: %v", err)
	}
	_, err = s.submitAs(alice, "QS2", nil)
	apiErr(t, err, "AccessDeniedException", "User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:SubmitServiceJob on resource: "+qs2ARN+" because no identity-based policy allows")
	bobJob, err := s.submitAs(bob, "QS2", nil)
	if err != nil {
		t.Fatalf("bob submits to QS2: %v", err)
	}
	bobJobARN := "arn:aws:batch:us-east-1:000000000000:service-job/" + bobJob

	// alice may not touch bob's job, by id or by ARN; she may touch hers.
	for _, ref := range []string{bobJob, bobJobARN} {
		_, err = alice.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(ref), SchedulingPriority: aws.Int32(9)})
		apiErr(t, err, "AccessDeniedException", "alice is not authorized to perform: batch:UpdateServiceJob on resource: "+bobJobARN)
		_, err = alice.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(ref), Reason: aws.String("x")})
		apiErr(t, err, "AccessDeniedException", "batch:TerminateServiceJob on resource: "+bobJobARN)
	}
	// bob may not describe alice's job (his policy allows DescribeServiceJob on QS2 only).
	_, err = bob.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(aliceJob)})
	apiErr(t, err, "AccessDeniedException", "bob is not authorized to perform: batch:DescribeServiceJob")
	if _, err := bob.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(bobJob)}); err != nil {
		t.Fatalf("bob describes his job: %v", err)
	}
	// alice's terminate of bob's job did nothing.
	if st := s.describe(bobJob).Status; st == types.ServiceJobStatusFailed {
		t.Fatalf("bob's job is %s after alice's refused terminate", st)
	}
	if _, err := alice.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(aliceJob), SchedulingPriority: aws.Int32(9)}); err != nil {
		t.Fatalf("alice updates her job: %v", err)
	}
	// A bulk terminate with one job she may not touch is refused whole.
	// (This SDK has no TerminateServiceJobs: the request is signed as the CLI signs it.)
	ka := keys["alice"]
	req, _ := http.NewRequest("POST", s.url+"/v1/terminateservicejobs", strings.NewReader(`{"jobs":["`+aliceJob+`","`+bobJob+`"],"reason":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(ka[0], ka[1], ""), "us-east-1").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "batch:TerminateServiceJobs on resource: "+bobJobARN) {
		t.Fatalf("alice terminates her job and bob's: %d %s", resp.StatusCode, b)
	}
	if st := s.describe(aliceJob).Status; st == types.ServiceJobStatusFailed {
		t.Fatalf("alice's job is %s after the refused bulk terminate", st)
	}
	// An unknown job tells alice nothing.
	_, err = alice.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String("no-such-job"), SchedulingPriority: aws.Int32(1)})
	apiErr(t, err, "AccessDeniedException", "service-job/no-such-job")

	// alice creates nothing, and may not tag.
	_, err = alice.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("mine"), Priority: aws.Int32(1)})
	apiErr(t, err, "AccessDeniedException", "batch:CreateJobQueue on resource: arn:aws:batch:us-east-1:000000000000:job-queue/mine")
	_, err = alice.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(bobJobARN), Tags: map[string]string{"x": "y"}})
	apiErr(t, err, "AccessDeniedException", "batch:TagResource on resource: "+bobJobARN)

	// A Deny wins over an Allow: carol may do anything but submit to QS1.
	_, err = s.submitAs(carol, "QS1", nil)
	apiErr(t, err, "AccessDeniedException", "carol is not authorized to perform: batch:SubmitServiceJob on resource: "+qs1ARN+" with an explicit deny")
	if _, err := s.submitAs(carol, "QS2", nil); err != nil {
		t.Fatalf("carol submits to QS2: %v", err)
	}
	if _, err := carol.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(aliceJob), SchedulingPriority: aws.Int32(3)}); err != nil {
		t.Fatalf("carol updates alice's job: %v", err)
	}
	// A share's minimum run time, a setting given as a tag, is an update
	// of the share: carol may tag QS1 but not update it, so she may not
	// set or remove it there, and may on QS2.
	minRun := map[string]string{qshare.TagMinRunTime: "600"}
	_, err = carol.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(qs1ARN), Tags: minRun})
	apiErr(t, err, "AccessDeniedException", "carol is not authorized to perform: batch:UpdateQuotaShare on resource: "+qs1ARN+" with an explicit deny")
	_, err = carol.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: aws.String(qs1ARN), TagKeys: []string{"team", qshare.TagMinRunTime}})
	apiErr(t, err, "AccessDeniedException", "batch:UpdateQuotaShare on resource: "+qs1ARN)
	if _, err := carol.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(qs1ARN), Tags: map[string]string{"team": "a"}}); err != nil {
		t.Fatalf("carol tags QS1 with a tag of her own: %v", err)
	}
	if _, err := carol.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(qs2ARN), Tags: minRun}); err != nil {
		t.Fatalf("carol sets QS2's minimum run time: %v", err)
	}
	for arn, want := range map[string]string{qs1ARN: "", qs2ARN: "600"} {
		out, err := carol.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String(arn)})
		if err != nil {
			t.Fatalf("listing %s's tags: %v", arn, err)
		}
		if got := out.Tags[qshare.TagMinRunTime]; got != want {
			t.Errorf("%s's %s after carol's tags: %q, want %q", arn, qshare.TagMinRunTime, got, want)
		}
	}

	// The log endpoint: alice may not read bob's log, signed as the CLI signs it.
	hc := func(name string) *http.Client {
		k := keys[name]
		return batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(k[0], k[1], ""), "us-east-1")
	}
	get := func(c *http.Client, path string) (int, string) {
		resp, err := c.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType") + " " + string(b)
	}
	if code, body := get(hc("alice"), logstream.PathPrefix+bobJob); code != 403 || !strings.Contains(body, "AccessDeniedException") || !strings.Contains(body, "batch:GetServiceJobLogs on resource: "+bobJobARN) {
		t.Fatalf("alice reads bob's log: %d %s", code, body)
	}
	if code, body := get(hc("alice"), logstream.PathPrefix+aliceJob); code == 403 {
		t.Fatalf("alice reads her own log: %d %s", code, body)
	}
	// An unknown job's log is checked as DescribeServiceJob checks it, on
	// the ARN the job would have.
	if code, body := get(hc("alice"), logstream.PathPrefix+"no-such-job"); code != 403 || !strings.Contains(body, "batch:GetServiceJobLogs on resource: arn:aws:batch:us-east-1:000000000000:service-job/no-such-job ") {
		t.Fatalf("alice reads the log of a job that does not exist: %d %s", code, body)
	}
	if code, body := get(http.DefaultClient, logstream.PathPrefix+aliceJob); code != 403 || !strings.HasPrefix(body, "MissingAuthenticationTokenException") {
		t.Fatalf("an unsigned log read: %d %s", code, body)
	}
	// The lending endpoint: nobody may not, admin may.
	if code, body := get(hc("nobody"), api.LendingPath+"?"+url.Values{"jobQueue": {"training"}}.Encode()); code != 403 || !strings.Contains(body, "batch:GetJobQueueLending on resource: arn:aws:batch:us-east-1:000000000000:job-queue/training") {
		t.Fatalf("nobody reads lending: %d %s", code, body)
	}
	if code, body := get(hc("admin"), api.LendingPath); code != 200 {
		t.Fatalf("admin reads lending: %d %s", code, body)
	}
	// The queue endpoint (the dashboard's Queue view) is GetJobQueueSnapshot
	// on the queue: bob's policy does not allow it, alice's does.
	queue := api.QueuePath + "?jobQueue=training"
	for _, who := range []string{"nobody", "bob"} {
		if code, body := get(hc(who), queue); code != 403 || !strings.Contains(body, "user/"+who+" is not authorized to perform: batch:GetJobQueueSnapshot on resource: arn:aws:batch:us-east-1:000000000000:job-queue/training") {
			t.Fatalf("%s reads the queue endpoint: %d %s", who, code, body)
		}
	}
	if code, body := get(hc("alice"), queue); code != 200 || !strings.Contains(body, `"jobQueue":"training"`) {
		t.Fatalf("alice reads the queue endpoint: %d %s", code, body)
	}
}

// Every job records its submitter in the system tag qshare:submittedBy,
// which no user can set or remove.
func TestAuthSubmittedBy(t *testing.T) {
	s := newAuthServer(t)
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	alice := as(s.url, "alice")
	id, err := s.submitAs(alice, "QS1", map[string]string{"team": "a"})
	if err != nil {
		t.Fatal(err)
	}
	out := s.describe(id)
	if got := out.Tags[qshare.TagSubmittedBy]; got != "arn:aws:iam::000000000000:user/alice" || out.Tags["team"] != "a" {
		t.Fatalf("tags %v, want qshare:submittedBy alice's ARN and team=a", out.Tags)
	}
	_, err = s.submitAs(alice, "QS1", map[string]string{qshare.TagSubmittedBy: "arn:aws:iam::000000000000:user/bob"})
	clientErr(t, err, "qshare:submittedBy", "system tags")
	_, err = s.c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: out.JobArn, Tags: map[string]string{"QSHARE:submittedBy": "x"}})
	clientErr(t, err, "system tags")
	_, err = s.c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: out.JobArn, TagKeys: []string{qshare.TagSubmittedBy}})
	clientErr(t, err, "cannot be removed")
	if got := s.describe(id).Tags[qshare.TagSubmittedBy]; got != "arn:aws:iam::000000000000:user/alice" {
		t.Fatalf("after the refused changes, qshare:submittedBy is %q", got)
	}
}

// Every route authorizes: a principal with no policy is refused every
// operation, with the operation's own action, even with an empty body.
func TestAuthEveryOperation(t *testing.T) {
	s := newAuthServer(t)
	k := keys["nobody"]
	c := batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(k[0], k[1], ""), "us-east-1")
	n := 0
	for _, action := range api.Actions() {
		name := strings.TrimPrefix(action, "batch:")
		method, path := http.MethodPost, "/v1/"+strings.ToLower(name)
		switch name {
		case "TagResource", "UntagResource", "ListTagsForResource":
			method = map[string]string{"TagResource": "POST", "UntagResource": "DELETE", "ListTagsForResource": "GET"}[name]
			path = "/v1/tags/" + url.PathEscape("arn:aws:batch:us-east-1:000000000000:job-queue/training") + "?tagKeys=a"
		case "GetServiceJobLogs":
			method, path = http.MethodGet, logstream.PathPrefix+"some-job"
		case "GetJobQueueLending":
			method, path = http.MethodGet, api.LendingPath
		case "PutCapacityPlan", "DeleteCapacityPlan", "DescribeCapacityPlans":
			method = map[string]string{"PutCapacityPlan": "PUT", "DeleteCapacityPlan": "DELETE", "DescribeCapacityPlans": "GET"}[name]
			path = api.PlansPath + "/P"
		}
		var body io.Reader
		if method == http.MethodPost || method == http.MethodPut {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, s.url+path, body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" || !strings.Contains(string(b), "user/nobody is not authorized to perform: "+action+" on resource: ") {
			t.Errorf("%s %s as nobody: %d %s", method, path, resp.StatusCode, b)
		}
		n++
	}
	if n < 28 {
		t.Fatalf("only %d actions", n)
	}
}

// A key removed from the file stops working at the reload; a bad file on
// reload keeps the one in force.
func TestAuthReload(t *testing.T) {
	s := newAuthServer(t)
	bob := as(s.url, "bob")
	list := func(c *batch.Client) error {
		_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("training")})
		return err
	}
	// bob may not list (team-b has no List*), but his key is known.
	apiErr(t, list(bob), "AccessDeniedException")
	if err := os.WriteFile(s.file, []byte("principals: [{name: x, NotAKey: 1}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.a.Reload(); err == nil || !strings.Contains(err.Error(), `"NotAKey" is not known`) {
		t.Fatalf("a bad file reloaded: %v", err)
	}
	apiErr(t, list(bob), "AccessDeniedException") // the old file is still in force
	if err := os.WriteFile(s.file, []byte(authFile("bob")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.a.Reload(); err != nil {
		t.Fatal(err)
	}
	apiErr(t, list(bob), "UnrecognizedClientException")
	if _, err := as(s.url, "admin").ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("admin after the reload: %v", err)
	}
	if err := os.Chmod(s.file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.a.Reload(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable file reloaded: %v", err)
	}
}

// docs/security.md names every action the server checks.
func TestSecurityDocListsEveryAction(t *testing.T) {
	b, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "### Actions and resources")
	for _, a := range append(api.Actions(), api.ActionGetMetrics, api.ActionGetEvents) {
		if !strings.Contains(section, "`"+a+"`") {
			t.Errorf("docs/security.md, Actions and resources, does not name %s", a)
		}
	}
}

// The Unix user a job is to run as is its submitter's unixUser, kept as the
// system tag qshare:runAs; a server whose jobs run as their submitters
// (RequireRunAs: serve --auth with the process executor) refuses a submit
// by a principal without one.
func TestAuthRunAs(t *testing.T) {
	s := newAuthServer(t, func(c *daemon.Config) { c.RequireRunAs = true })
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "QS2", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	_, err := s.submitAs(as(s.url, "alice"), "QS1", nil)
	clientErr(t, err, "arn:aws:iam::000000000000:user/alice has no Unix user to run jobs as", "unixUser")
	id, err := s.submitAs(as(s.url, "carol"), "QS2", nil)
	if err != nil {
		t.Fatalf("carol, who has a unixUser: %v", err)
	}
	if got := s.describe(id).Tags[qshare.TagRunAs]; got != "carol" {
		t.Fatalf("qshare:runAs = %q, want carol", got)
	}
	_, err = s.submitAs(as(s.url, "carol"), "QS2", map[string]string{qshare.TagRunAs: "root"})
	clientErr(t, err, "system tags")
}

// The audit log has a line for every mutating request and every refused
// one, with its principal, action, resources, outcome and request ID, and
// none for an allowed read.
func TestAuthAudit(t *testing.T) {
	s := newAuthServer(t)
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "QS2", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	path := filepath.Join(s.dir, "audit.jsonl")
	before := len(readAudit(t, path)) // admin's setup: one line per create
	if before < 5 {
		t.Fatalf("%d lines after the setup's creates", before)
	}
	alice := as(s.url, "alice")
	id, err := s.submitAs(alice, "QS1", nil)
	must(t, err)
	_, err = s.submitAs(alice, "QS2", nil)
	apiErr(t, err, "AccessDeniedException")
	_, err = alice.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("training")}) // a read: no line
	must(t, err)
	_, err = batchclient.NewSigned(s.url, "us-east-1", aws.AnonymousCredentials{}, nil, batchclient.NoRetry).ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("training")})
	apiErr(t, err, "MissingAuthenticationTokenException")
	_, err = alice.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(id), SchedulingPriority: aws.Int32(0)})
	must(t, err)

	lines := readAudit(t, path)[before:]
	if len(lines) != 4 {
		t.Fatalf("%d new lines, want 4: %+v", len(lines), lines)
	}
	aliceARN := "arn:aws:iam::000000000000:user/alice"
	check := func(i int, principal, action, outcome string, status int, errType, resource string) {
		t.Helper()
		e := lines[i]
		if e.Principal != principal || e.Action != action || e.Outcome != outcome || e.Status != status || e.ErrorType != errType ||
			(resource != "" && !strings.Contains(strings.Join(e.Resource, " "), resource)) || e.RequestID == "" || !strings.HasPrefix(e.Source, "127.0.0.1:") || e.Time.IsZero() {
			t.Errorf("line %d: %+v; want %s %s %s %d %s %s", i, e, principal, action, outcome, status, errType, resource)
		}
	}
	check(0, aliceARN, "batch:SubmitServiceJob", "ok", 200, "", qs1ARN)
	check(1, aliceARN, "batch:SubmitServiceJob", "denied", 403, "AccessDeniedException", qs2ARN)
	check(2, "", "", "denied", 403, "MissingAuthenticationTokenException", "")
	check(3, aliceARN, "batch:UpdateServiceJob", "ok", 200, "", id)
}

func readAudit(t *testing.T, path string) []auth.AuditEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []auth.AuditEntry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e auth.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// Per-principal limits: a principal that floods the server past its
// request rate gets TooManyRequestsException (HTTP 429, which the SDKs
// retry), while another principal making requests at the same time is
// never refused. Latencies are reported, not asserted (timing on a shared
// machine is no test).
func TestAuthNoisyNeighbour(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t)
	flood := as(s.url, "flood")
	var throttled, served atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := flood.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
				var ae smithy.APIError
				switch {
				case err == nil:
					served.Add(1)
				case errors.As(err, &ae) && ae.ErrorCode() == "TooManyRequestsException":
					throttled.Add(1)
				default:
					t.Errorf("flood: %v", err)
					return
				}
			}
		})
	}
	alice := as(s.url, "alice")
	var lat []time.Duration
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < 100 || (served.Load()+throttled.Load() < 2000 && time.Now().Before(deadline)); i++ {
		t0 := time.Now()
		if _, err := alice.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
			t.Fatalf("alice's request %d during the flood: %v", i, err)
		}
		lat = append(lat, time.Since(t0))
	}
	close(stop)
	wg.Wait()
	if throttled.Load() == 0 {
		t.Fatalf("the flood was never throttled (%d served)", served.Load())
	}
	// 20/s and a burst of 10, over the test's run: nowhere near all served.
	if served.Load() > throttled.Load() {
		t.Errorf("the flood had %d served and %d throttled", served.Load(), throttled.Load())
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("during the flood (%d served, %d throttled): alice's %d requests, p50 %v, p99 %v", served.Load(), throttled.Load(), len(lat), lat[len(lat)/2], lat[len(lat)*99/100])
	// The SDK's own retryer backs off and gets through.
	if _, err := batchclient.NewSigned(s.url, "us-east-1", credentials.NewStaticCredentialsProvider(keys["flood"][0], keys["flood"][1], ""), nil).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("the flood principal with the SDK's retries, after the flood: %v", err)
	}
}

// A principal's limit on unfinished jobs (dave: limits.unfinishedJobs 2)
// holds against concurrent submits, refuses with a ClientException that
// names it and records nothing, frees a place when a job finishes, and
// leaves other principals alone.
func TestAuthUnfinishedJobsLimit(t *testing.T) {
	s := newAuthServer(t)
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "QS2", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	dave, alice := as(s.url, "dave"), as(s.url, "alice")

	// Ten at once: exactly two are admitted.
	var mu sync.Mutex
	var ids []string
	var refused []error
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Go(func() {
			id, err := s.submitAs(dave, "QS1", nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
			} else {
				ids = append(ids, id)
			}
		})
	}
	wg.Wait()
	if len(ids) != 2 || len(refused) != 8 {
		t.Fatalf("10 concurrent submits with limits.unfinishedJobs 2: %d admitted, %d refused (%v)", len(ids), len(refused), refused)
	}
	for _, err := range refused {
		apiErr(t, err, "ClientException", "arn:aws:iam::000000000000:user/dave has 2 unfinished jobs", "its limit is 2 (limits.unfinishedJobs in the server's auth file)")
	}
	// Jobs move on while the statuses are listed one after another, so a
	// job may appear under more than one; count each job once.
	byDave := func() int {
		seen := map[string]bool{}
		for _, st := range types.ServiceJobStatus("").Values() {
			out, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("training"), JobStatus: st, MaxResults: aws.Int32(100)})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range out.JobSummaryList {
				if s.describe(*j.JobId).Tags[qshare.TagSubmittedBy] == "arn:aws:iam::000000000000:user/dave" {
					seen[*j.JobId] = true
				}
			}
		}
		return len(seen)
	}
	if n := byDave(); n != 2 {
		t.Fatalf("the refused submits recorded jobs: dave has %d jobs, want 2", n)
	}
	// Another principal is not limited by dave's jobs.
	for i := 0; i < 3; i++ {
		if _, err := s.submitAs(alice, "QS1", nil); err != nil {
			t.Fatalf("alice's submit %d while dave is at his limit: %v", i, err)
		}
	}
	// A finished job frees its place.
	if _, err := dave.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(ids[0]), Reason: aws.String("make room")}); err != nil {
		t.Fatal(err)
	}
	s.waitStatus(ids[0], types.ServiceJobStatusFailed)
	if _, err := s.submitAs(dave, "QS1", nil); err != nil {
		t.Fatalf("dave's submit after one of his jobs failed: %v", err)
	}
	_, err := s.submitAs(dave, "QS1", nil)
	apiErr(t, err, "ClientException", "has 2 unfinished jobs")
	if n := byDave(); n != 3 {
		t.Fatalf("dave has %d jobs, want 3 (one of them FAILED)", n)
	}
	// A reload that raises the limit applies to the next submit.
	if err := os.WriteFile(s.file, []byte(strings.Replace(authFile(), "unfinishedJobs: 2", "unfinishedJobs: 3", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.submitAs(dave, "QS1", nil); err != nil {
		t.Fatalf("dave's submit after his limit was raised to 3: %v", err)
	}
	_, err = s.submitAs(dave, "QS1", nil)
	apiErr(t, err, "ClientException", "has 3 unfinished jobs", "its limit is 3")
}

// Without authentication, the audit log still has a line for each
// mutating request only: the AWS API's reads are POSTs too
// (ListServiceJobs, DescribeServiceJob), and they are no more mutating
// for having no principal to authorize.
func TestAuditWithoutAuth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	audit, err := auth.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	s := startGuardedServer(t, dir, auth.Config{SameUserOnly: true, Audit: audit})
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	before := len(readAudit(t, path))
	if before < 4 {
		t.Fatalf("%d lines after the setup's creates", before)
	}
	id := s.submit("training", "QS1", "j", 1, payload(g5, 1, time.Hour, 0))
	_, err = s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("training")})
	must(t, err)
	_, err = s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
	must(t, err)
	_, err = s.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
	must(t, err)
	lines := readAudit(t, path)[before:]
	if len(lines) != 1 || lines[0].Action != "batch:SubmitServiceJob" || lines[0].Outcome != "ok" || lines[0].Principal != "" {
		t.Fatalf("audit lines after a submit and three reads: %+v; want the submit's alone", lines)
	}
}

// A Deny on an ARN holds however the request names the resource: an
// operation that also takes a bare name (the daemon resolves
// UpdateSchedulingPolicy's and DeleteSchedulingPolicy's arn as a name or an
// ARN) is checked on the ARN the name stands for.
func TestAuthDenyByName(t *testing.T) {
	s := newAuthServer(t)
	arn := *s.createPolicy("spare")
	carol := as(s.url, "carol")
	for _, ref := range []string{"spare", arn} {
		_, err := carol.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: aws.String(ref),
			QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
		apiErr(t, err, "AccessDeniedException", "batch:UpdateSchedulingPolicy on resource: "+arn+" with an explicit deny")
		_, err = carol.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: aws.String(ref)})
		apiErr(t, err, "AccessDeniedException", "batch:DeleteSchedulingPolicy on resource: "+arn+" with an explicit deny")
	}
	out, err := s.c.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: []string{arn}})
	if err != nil || len(out.SchedulingPolicies) != 1 {
		t.Fatalf("the policy after carol's refused delete: %v %v", out, err)
	}
}

// TestPlanIsAShareUpdate: a capacity plan gives its quota share capacity,
// so putting or deleting one also needs batch:UpdateQuotaShare on that
// share (and on the share of a plan it replaces). carol may do anything
// but update QS1: she may put a plan for QS2, not for QS1, not move hers
// to QS1, and not delete admin's plan for QS1; what she was refused
// changed nothing.
func TestPlanIsAShareUpdate(t *testing.T) {
	s := newAuthServer(t)
	s.setup("training", 8, shareSpec{name: "QS1", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve},
		shareSpec{name: "QS2", limit: 4, strategy: types.QuotaShareResourceSharingStrategyReserve})
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	plan := func(share string) string {
		return `{"jobQueue":"training","quotaShareName":"` + share + `","instanceType":"ml.g5.xlarge","instanceCount":2,"startTime":"` +
			start.Format(time.RFC3339) + `","endTime":"` + start.Add(time.Hour).Format(time.RFC3339) + `"}`
	}
	call := func(who, method, name, body string) (int, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, s.url+api.PlansPath+"/"+name, r)
		req.Header.Set("Content-Type", "application/json")
		k := keys[who]
		resp, err := batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(k[0], k[1], ""), "us-east-1").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	denied := func(code int, body string) bool {
		return code == 403 && strings.Contains(body, "carol is not authorized to perform: batch:UpdateQuotaShare on resource: "+qs1ARN)
	}
	if code, body := call("carol", "PUT", "mine", plan("QS1")); !denied(code, body) {
		t.Errorf("carol puts a plan for QS1: %d %s; want refused for batch:UpdateQuotaShare on QS1", code, body)
	}
	if code, body := call("carol", "PUT", "mine", plan("QS2")); code != 200 {
		t.Fatalf("carol puts a plan for QS2: %d %s", code, body)
	}
	if code, body := call("carol", "PUT", "mine", plan("QS1")); !denied(code, body) {
		t.Errorf("carol moves her plan to QS1: %d %s; want refused", code, body)
	}
	if code, body := call("admin", "PUT", "theirs", plan("QS1")); code != 200 {
		t.Fatalf("admin puts a plan for QS1: %d %s", code, body)
	}
	if code, body := call("carol", "DELETE", "theirs", ""); !denied(code, body) {
		t.Errorf("carol deletes admin's plan for QS1: %d %s; want refused", code, body)
	}
	if code, body := call("admin", "PUT", "theirs2", plan("QS2")); code != 200 {
		t.Fatalf("admin puts a plan for QS2: %d %s", code, body)
	}
	if code, body := call("carol", "PUT", "theirs", plan("QS2")); !denied(code, body) {
		t.Errorf("carol moves admin's plan from QS1 to QS2: %d %s; want refused", code, body)
	}
	got := map[string]string{}
	for _, p := range s.d.Plans() {
		got[p.Name] = p.QuotaShare
	}
	if want := map[string]string{"mine": "QS2", "theirs": "QS1", "theirs2": "QS2"}; !maps.Equal(got, want) {
		t.Errorf("plans after the refusals: %v, want %v", got, want)
	}
	if code, body := call("carol", "DELETE", "theirs2", ""); code != 200 {
		t.Errorf("carol deletes a plan for QS2: %d %s", code, body)
	}
}

// TestFollowEndsWhenKeyRemoved: a followed log lasts only while its caller
// may read it. alice follows the log of her job that waits for its first
// attempt (the one instance is taken). A reload that keeps her key and
// permission leaves the stream open; one that takes the permission away
// ends it, and so does one that removes her key, each with a last line
// that says why.
func TestFollowEndsWhenKeyRemoved(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t)
	s.setup("training", 1, shareSpec{name: "QS1", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	first, err := s.submitAs(as(s.url, "alice"), "QS1", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.waitStatus(first, types.ServiceJobStatusRunning)
	job, err := s.submitAs(as(s.url, "alice"), "QS1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// follow opens the follow and returns its next line within a time
	// ("" and true when none came, "" and false once it is closed).
	follow := func() func(time.Duration) (string, bool) {
		k := keys["alice"]
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(rctx, "GET", s.url+logstream.PathPrefix+job+"?follow=true", nil)
		resp, err := batchclient.SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(k[0], k[1], ""), "us-east-1").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("alice follows her log: %d %s", resp.StatusCode, b)
		}
		lines := make(chan string, 16)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		return func(within time.Duration) (string, bool) {
			select {
			case l, ok := <-lines:
				return l, ok
			case <-time.After(within):
				return "", true
			}
		}
	}
	reload := func(file string) {
		t.Helper()
		if err := os.WriteFile(s.file, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	ends := func(next func(time.Duration) (string, bool), why string) {
		t.Helper()
		if l, _ := next(10 * time.Second); !strings.HasPrefix(l, "(the follow ends: ") || !strings.Contains(l, why) {
			t.Fatalf("line %q, want the follow's end saying %q", l, why)
		}
		if l, ok := next(10 * time.Second); ok {
			t.Fatalf("after the follow's end: line %q, want the stream closed", l)
		}
	}

	next := follow()
	if l, ok := next(300 * time.Millisecond); l != "" || !ok {
		t.Fatalf("the follow of a job that waits: line %q, open %v; want it open and quiet", l, ok)
	}
	reload(authFile())
	if l, ok := next(500 * time.Millisecond); l != "" || !ok {
		t.Fatalf("after a reload that keeps alice's key: line %q, open %v; want the stream open and quiet", l, ok)
	}
	noLogs := strings.Replace(authFile(), ", batch:GetServiceJobLogs]", "]", 1)
	if noLogs == authFile() {
		t.Fatal("the auth file has no GetServiceJobLogs to take away")
	}
	reload(noLogs)
	ends(next, "alice is not authorized to perform: batch:GetServiceJobLogs")

	reload(authFile())
	next = follow()
	reload(authFile("alice"))
	ends(next, "The security token included in the request is invalid: access key")
}

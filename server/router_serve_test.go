package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"qshare/auth"
)

// TestRouterServes runs qshare serve --auth and checks the one router's
// decisions as a client sees them: the dashboard's files and the probes
// unsigned; a path that cleans to the Batch API, spelt with encoded
// slashes under /ui/, refused as not canonical, signed or not (issue 30,
// point 7: it once skipped the signature check); a request signed for a service the server does not serve answered
// with 400 in the shape of its protocol (TestUnknownServiceShapes), not
// 500 or HTML; and a request signed for batch served.
func TestRouterServes(t *testing.T) {
	s := simServeSettings(t)
	s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	k, err := auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte("principals: [{name: ops, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}], policies: [all]}]\n"+
		"policies: {all: {Version: \"2012-10-17\", Statement: [{Effect: Allow, Action: \"batch:*\", Resource: \"*\"}]}}\n"), 0o600))
	base := "http://" + serveAt(t, s)
	waitReady(t, base)

	do := func(method, path, service string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		serveMust(t, err)
		if service != "" {
			sum := sha256.Sum256(nil)
			serveMust(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: k.ID, SecretAccessKey: k.Secret},
				req, hex.EncodeToString(sum[:]), service, s.Region, time.Now()))
		}
		resp, err := http.DefaultClient.Do(req)
		serveMust(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	if code, _, body := do("GET", "/ui/", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("GET /ui/ unsigned: %d %.100q, want the dashboard's page", code, body)
	}
	if code, _, _ := do("GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz unsigned: %d", code)
	}
	if code, _, body := do("POST", "/v1/listservicejobs", ""); code != http.StatusForbidden || !strings.Contains(body, "MissingAuthenticationToken") {
		t.Errorf("POST /v1/listservicejobs unsigned: %d %.200q, want 403 MissingAuthenticationToken", code, body)
	}
	for _, p := range []string{"/ui%2F..%2Fv1/listservicejobs", "/ui/../v1/listservicejobs", "/ui/..//v1/listservicejobs"} {
		if code, _, body := do("POST", p, ""); code != http.StatusBadRequest || !strings.Contains(body, "not in canonical form") {
			t.Errorf("POST %s unsigned: %d %.200q, want 400: not in canonical form", p, code, body)
		}
	}
	if code, _, body := do("POST", "/ui%2F..%2Fv1/listservicejobs", "batch"); code != http.StatusBadRequest || !strings.Contains(body, "not in canonical form") {
		t.Errorf("POST /ui%%2F..%%2Fv1/listservicejobs signed: %d %.200q, want 400: not in canonical form", code, body)
	}
	code, ct, body := do("POST", "/", "ec2")
	if code != http.StatusBadRequest || ct != "application/xml" || !strings.Contains(body, "<Code>InvalidRequest</Code>") || !strings.Contains(body, `does not serve the service &#34;ec2&#34;`) {
		t.Errorf("a request signed for ec2 without a body: %d %s %.300q, want 400 in REST-XML saying the service is not served", code, ct, body)
	}
	if code, _, body := do("GET", "/qshare/v1/whoami", "batch"); code != http.StatusOK || !strings.Contains(body, "ops") {
		t.Errorf("GET whoami signed for batch: %d %.200q", code, body)
	}
}

// waitReady waits until base's /readyz says the store is loaded.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnknownServiceShapes: a request signed for a service qshare does not
// serve gets 400 in the error shape of the protocol it was sent in, which
// its SDK parses: awsQuery's XML for a form, awsJson for X-Amz-Target,
// restJson for JSON; and a refusal by the guard or authentication of a
// request for STS is STS's own XML, which the AWS SDK for Go reads by
// code.
func TestUnknownServiceShapes(t *testing.T) {
	s := simServeSettings(t)
	base := "http://" + serveAt(t, s)
	waitReady(t, base)
	for _, c := range []struct {
		name, ct, target, body string
		want                   []string
	}{
		{"sns", "application/x-www-form-urlencoded; charset=utf-8", "", "Action=ListTopics&Version=2010-03-31", []string{"text/xml", "<ErrorResponse", "<Code>InvalidAction</Code>", "<Type>Sender</Type>"}},
		{"dynamodb", "application/x-amz-json-1.0", "DynamoDB_20120810.ListTables", "{}", []string{"application/x-amz-json-1.1", `"__type":"UnknownOperationException"`}},
		{"ecs", "application/json", "", "{}", []string{"application/json", `"__type":"ClientException"`}},
	} {
		req, err := http.NewRequest("POST", base+"/", strings.NewReader(c.body))
		serveMust(t, err)
		req.Header.Set("Content-Type", c.ct)
		if c.target != "" {
			req.Header.Set("X-Amz-Target", c.target)
		}
		sum := sha256.Sum256([]byte(c.body))
		serveMust(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy"}, req, hex.EncodeToString(sum[:]), c.name, s.Region, time.Now()))
		resp, err := http.DefaultClient.Do(req)
		serveMust(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := resp.Header.Get("Content-Type") + " " + string(b)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, "does not serve the service") {
			t.Errorf("%s: %d %.300q, want 400 saying the service is not served", c.name, resp.StatusCode, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %.300q lacks %q", c.name, got, w)
			}
		}
	}
}

// TestRefusalsInServiceShape: with --auth, authentication's refusal of a
// request for STS, SageMaker, CloudWatch Logs or S3 is written in that
// service's own error shape, so that the AWS SDK for Go reads it by its
// code, as it would from AWS.
func TestRefusalsInServiceShape(t *testing.T) {
	s := simServeSettings(t)
	s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	k, err := auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte("principals: [{name: ops, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}]}]\n"), 0o600))
	base := "http://" + serveAt(t, s)
	waitReady(t, base)
	ctx := context.Background()
	cfg := aws.Config{Region: s.Region, BaseEndpoint: aws.String(base), Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		Credentials: credentials.NewStaticCredentialsProvider(k.ID, "not-the-secret-not-the-secret", "")}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return fmt.Sprint(err)
	}
	_, err = sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if c := code(err); c != "SignatureDoesNotMatch" {
		t.Errorf("STS with a wrong secret: %s, want SignatureDoesNotMatch", c)
	}
	_, err = sagemaker.NewFromConfig(cfg).ListTrainingJobs(ctx, &sagemaker.ListTrainingJobsInput{})
	if c := code(err); c != "InvalidSignatureException" {
		t.Errorf("SageMaker with a wrong secret: %s, want InvalidSignatureException", c)
	}
	_, err = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
	if c := code(err); c != "SignatureDoesNotMatch" {
		t.Errorf("S3 with a wrong secret: %s, want SignatureDoesNotMatch", c)
	}
}

// TestContentTypeNamesTheServicesTypes: a body of a Content-Type that the
// request's service does not read is refused with a message that names
// the types that service reads (SageMaker's JSON 1.1, STS's form, the
// Batch API's JSON), not another service's.
func TestContentTypeNamesTheServicesTypes(t *testing.T) {
	s := simServeSettings(t)
	base := "http://" + serveAt(t, s)
	waitReady(t, base)
	for _, c := range []struct{ service, path, target, ct, want, notWant string }{
		{"sagemaker", "/", "SageMaker.ListTrainingJobs", "text/plain", "Content-Type must be application/x-amz-json-1.1 for", "application/json for"},
		{"sagemaker", "/", "SageMaker.ListTrainingJobs", "", "Content-Type must be application/x-amz-json-1.1 for", "application/json for"},
		{"sts", "/", "", "text/xml", "Content-Type must be application/x-www-form-urlencoded for", "application/json for"},
		{"batch", "/v1/describejobqueues", "", "text/plain", "Content-Type must be application/json for", "x-amz-json"},
	} {
		body := "{}"
		req, err := http.NewRequest("POST", base+c.path, strings.NewReader(body))
		serveMust(t, err)
		req.Header.Del("Content-Type")
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		if c.target != "" {
			req.Header.Set("X-Amz-Target", c.target)
		}
		sum := sha256.Sum256([]byte(body))
		serveMust(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy"}, req, hex.EncodeToString(sum[:]), c.service, s.Region, time.Now()))
		resp, err := http.DefaultClient.Do(req)
		serveMust(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) || strings.Contains(string(b), c.notWant) {
			t.Errorf("%s with Content-Type %q: %d %.300q, want 400 saying %q", c.service, c.ct, resp.StatusCode, b, c.want)
		}
	}
}

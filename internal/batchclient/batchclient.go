// Package batchclient makes the AWS SDK for Go's Batch client that qshare's
// own tools use to talk to a qshare server: the command line (and through
// it the demo and shareview), the soak and the fault tests, and the system
// tests' wait for a job to reach a state (Await, and Jobs, which their
// servers embed). It sits on the client
// side of the api package's wire, and holds no scheduling logic.
//
// It exists for one workaround: the AWS SDK for Go v2 (aws-sdk-go-v2
// v1.48.0, smithy-go v1.28.9, batch v1.65.2) fails to read a response whose
// body arrives in more than one piece with "deserialization failed, failed
// to decode response body, read tcp ...: use of closed network connection":
// something closes the connection while the deserializer is still reading.
// A busy server's ListServiceJobs pages (tens of KiB) hit it often;
// TestSDKSplitBody (in this package's tests) reproduces it against a plain net/http server.
// Reading the body whole inside the HTTP client (BufferedDoer) avoids it.
package batchclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// New returns a Batch client for the qshare server at endpoint
// (http://HOST:PORT) in region that signs with Placeholder credentials:
// enough for a server without authentication, and for the tests and tools
// that talk to one. Responses are read through BufferedDoer. optFns are
// applied last, as batch.NewFromConfig applies them (set RetryMaxAttempts
// or Retryer there).
func New(endpoint, region string, optFns ...func(*batch.Options)) *batch.Client {
	return NewSigned(endpoint, region, Placeholder, &http.Client{}, optFns...)
}

// NewSigned is New with the credentials that sign the requests (a server
// with authentication checks them; see Credentials) and the HTTP client
// that sends them (see HTTPClient; nil means a plain one).
func NewSigned(endpoint, region string, creds aws.CredentialsProvider, hc *http.Client, optFns ...func(*batch.Options)) *batch.Client {
	if hc == nil {
		hc = &http.Client{}
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: creds,
		HTTPClient:  BufferedDoer{Client: hc},
	}
	return batch.NewFromConfig(cfg, append([]func(*batch.Options){func(o *batch.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)...)
}

// NoRetry is an option of New for a client that sends each request once,
// so that every answer a caller sees is the answer to one request.
func NoRetry(o *batch.Options) { o.Retryer = aws.NopRetryer{} }

// BufferedDoer is an aws.HTTPClient that reads each response body whole
// before the SDK sees it (see the package comment for why). It is safe for
// concurrent use if Client is.
type BufferedDoer struct {
	// Client sends the requests.
	Client *http.Client
}

var _ aws.HTTPClient = BufferedDoer{}

// Do sends r with b.Client and returns the response with its body already
// read into memory; a body that cannot be read is an error.
func (b BufferedDoer) Do(r *http.Request) (*http.Response, error) {
	resp, err := b.Client.Do(r)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// Tester is the part of testing.TB that Describe and Await use.
type Tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Describe returns DescribeServiceJob of job id, and fails t if the call
// fails.
func Describe(t Tester, c *batch.Client, id string) *batch.DescribeServiceJobOutput {
	t.Helper()
	out, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
	if err != nil {
		t.Fatalf("DescribeServiceJob %s: %v", id, err)
	}
	return out
}

// Await polls DescribeServiceJob of job id every 50 ms until ok holds, and
// returns that answer. It fails t, naming the job's status, reason and
// attempts and what was awaited, when ok does not hold within limit, or at
// once when the job has ended (SUCCEEDED and FAILED are final) without it.
func Await(t Tester, c *batch.Client, id, what string, limit time.Duration, ok func(*batch.DescribeServiceJobOutput) bool) *batch.DescribeServiceJobOutput {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		d := Describe(t, c, id)
		if ok(d) {
			return d
		}
		if final := d.Status == types.ServiceJobStatusSucceeded || d.Status == types.ServiceJobStatusFailed; final || time.Now().After(deadline) {
			when := "after " + limit.String()
			if final {
				when = "and has ended"
			}
			t.Fatalf("job %s (%s) is %s (%q, %d attempts), not %s, %s", aws.ToString(d.JobName), id, d.Status,
				aws.ToString(d.StatusReason), len(d.Attempts), what, when)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Jobs is a test's view of the jobs of one server: Describe, Await and
// AwaitStatus with the test, the client and the limit of every wait given
// once. The system tests' servers embed it.
type Jobs struct {
	T Tester
	C *batch.Client
	// Limit bounds each wait.
	Limit time.Duration
}

// Describe returns DescribeServiceJob of job id (see the function
// Describe).
func (j Jobs) Describe(id string) *batch.DescribeServiceJobOutput {
	j.T.Helper()
	return Describe(j.T, j.C, id)
}

// Await polls DescribeServiceJob of job id until ok holds, within j.Limit
// (see the function Await).
func (j Jobs) Await(id, what string, ok func(*batch.DescribeServiceJobOutput) bool) *batch.DescribeServiceJobOutput {
	j.T.Helper()
	return Await(j.T, j.C, id, what, j.Limit, ok)
}

// AwaitStatus waits until job id has status st.
func (j Jobs) AwaitStatus(id string, st types.ServiceJobStatus) *batch.DescribeServiceJobOutput {
	j.T.Helper()
	return j.Await(id, string(st), func(d *batch.DescribeServiceJobOutput) bool { return d.Status == st })
}

package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// bufferedDoer reads each response body whole before the SDK sees it.
//
// The AWS SDK for Go v2 (aws-sdk-go-v2 v1.48.0, smithy-go v1.28.9, batch
// v1.65.2) fails to read a response whose body arrives in more than one
// piece with "deserialization failed, failed to decode response body, read
// tcp ...: use of closed network connection": something closes the
// connection while the deserializer is still reading. A busy server's
// ListServiceJobs pages (tens of KiB) hit it often. TestSDKSplitBody
// reproduces it against a plain net/http server (QSHARE_SDK_REPRO=1).
// Buffering the body inside the HTTP client avoids it.
type bufferedDoer struct{ c *http.Client }

func (b bufferedDoer) Do(r *http.Request) (*http.Response, error) {
	resp, err := b.c.Do(r)
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

// TestSDKSplitBody reproduces the SDK's failure on a response body that
// arrives in two pieces 5 ms apart, and shows that bufferedDoer avoids it.
func TestSDKSplitBody(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jobSummaryList":[`)
	for i := 0; i < 200; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"jobId":"%08d-0000-0000-0000-000000000000","jobName":"job%d","jobArn":"arn:aws:batch:us-east-1:000000000000:service-job/x","serviceJobType":"SAGEMAKER_TRAINING","status":"SUCCEEDED","statusReason":"Essential process exited with code 0","createdAt":1,"startedAt":2,"stoppedAt":3}`, i, i)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
		w.Write(body[len(body)/2:])
	}))
	defer srv.Close()
	count := func(hc aws.HTTPClient) int {
		c := batch.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), HTTPClient: hc,
			Retryer: func() aws.Retryer { return aws.NopRetryer{} }}, func(o *batch.Options) { o.BaseEndpoint = aws.String(srv.URL) })
		bad := 0
		for i := 0; i < 20; i++ {
			if _, err := c.ListServiceJobs(context.Background(), &batch.ListServiceJobsInput{JobQueue: aws.String("q")}); err != nil {
				bad++
			}
		}
		return bad
	}
	if n := count(bufferedDoer{&http.Client{}}); n != 0 {
		t.Errorf("%d of 20 reads failed through bufferedDoer", n)
	}
	if os.Getenv("QSHARE_SDK_REPRO") != "" {
		t.Logf("%d of 20 reads failed through the SDK's own HTTP client", count(nil))
	}
}

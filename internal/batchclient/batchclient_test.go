package batchclient_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/batchclient"
)

// TestSDKSplitBody reproduces the SDK's failure on a response body that
// arrives in two pieces 5 ms apart (see the package comment), and shows
// that a client from New avoids it. QSHARE_SDK_REPRO=1 also counts the
// failures of the SDK's own HTTP client.
func TestSDKSplitBody(t *testing.T) {
	srv := batchclient.SplitBodyServer(200, func(i int) string {
		return fmt.Sprintf(`{"jobId":"%08d-0000-0000-0000-000000000000","jobName":"job%d","jobArn":"arn:aws:batch:us-east-1:000000000000:service-job/x","serviceJobType":"SAGEMAKER_TRAINING","status":"SUCCEEDED","statusReason":"Essential process exited with code 0","createdAt":1,"startedAt":2,"stoppedAt":3}`, i, i)
	})
	defer srv.Close()
	count := func(c *batch.Client) int {
		bad := 0
		for i := 0; i < 20; i++ {
			if _, err := c.ListServiceJobs(context.Background(), &batch.ListServiceJobsInput{JobQueue: aws.String("q")}); err != nil {
				bad++
			}
		}
		return bad
	}
	if n := count(batchclient.New(srv.URL, "us-east-1", batchclient.NoRetry)); n != 0 {
		t.Errorf("%d of 20 reads failed through batchclient.New's client", n)
	}
	if os.Getenv("QSHARE_SDK_REPRO") != "" {
		plain := batch.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
			Retryer: func() aws.Retryer { return aws.NopRetryer{} }}, func(o *batch.Options) { o.BaseEndpoint = aws.String(srv.URL) })
		t.Logf("%d of 20 reads failed through the SDK's own HTTP client", count(plain))
	}
}

package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/batchclient"
)

const submitAnswer = `{"jobArn":"arn:aws:batch:us-east-1:000000000000:service-job/j","jobId":"j","jobName":"n"}`

// answerSubmits is a stand-in server that answers every request with a
// SubmitServiceJob response and records each request's Authorization
// header.
func answerSubmits(t testing.TB) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, submitAnswer)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auth...)
	}
}

func benchInput() *batch.SubmitServiceJobInput {
	return &batch.SubmitServiceJobInput{
		JobName: aws.String("cohort-0-cq-0-small-0"), JobQueue: aws.String("cohort-0"), QuotaShareName: aws.String("cq-0"),
		SchedulingPriority: aws.Int32(50), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(Payload("cohort-0-cq-0-small-0", "ml.g5.xlarge", 1, []string{"true"}, map[string]string{"QSHARE_SIM_DURATION": "150ms"})),
		ClientToken:           aws.String("cohort-0-cq-0-small-0"),
	}
}

// TestClientSigning checks that the harness's client sends requests
// unsigned by default and SigV4-signed with Sign.
func TestClientSigning(t *testing.T) {
	for _, sign := range []bool{false, true} {
		srv, auth := answerSubmits(t)
		c := NewClient(srv.URL, ClientOptions{Conns: 1, Sign: sign})
		out, err := c.SubmitServiceJob(context.Background(), benchInput())
		if err != nil {
			t.Fatalf("sign=%v: %v", sign, err)
		}
		if aws.ToString(out.JobId) != "j" {
			t.Errorf("sign=%v: jobId %q, want j", sign, aws.ToString(out.JobId))
		}
		got := auth()
		if len(got) != 1 {
			t.Fatalf("sign=%v: %d requests, want 1", sign, len(got))
		}
		if signed := strings.HasPrefix(got[0], "AWS4-HMAC-SHA256 "); signed != sign {
			t.Errorf("sign=%v: Authorization %q", sign, got[0])
		}
	}
}

// TestClientSplitBody checks that the harness's client reads a response
// whose body arrives in two pieces, which the SDK's own HTTP client fails
// on (see the batchclient package).
func TestClientSplitBody(t *testing.T) {
	srv := batchclient.SplitBodyServer(200, func(i int) string {
		return fmt.Sprintf(`{"jobId":"%08d","jobName":"job%d","serviceJobType":"SAGEMAKER_TRAINING","status":"SUCCEEDED","createdAt":1,"startedAt":2,"stoppedAt":3}`, i, i)
	})
	defer srv.Close()
	c := NewClient(srv.URL, ClientOptions{Conns: 1})
	for i := range 10 {
		out, err := c.ListServiceJobs(context.Background(), &batch.ListServiceJobsInput{JobQueue: aws.String("q")})
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if len(out.JobSummaryList) != 200 {
			t.Fatalf("read %d: %d jobs, want 200", i, len(out.JobSummaryList))
		}
	}
}

// BenchmarkClientSubmit measures the harness's side of one
// SubmitServiceJob (the SDK's middleware, signing or not, HTTP) against a
// stand-in server that only answers: go test -bench ClientSubmit -benchmem
// ./bench. The server's own time is in the figure too; compare the two
// variants with each other.
func BenchmarkClientSubmit(b *testing.B) {
	for _, sign := range []bool{false, true} {
		b.Run(fmt.Sprintf("sign=%v", sign), func(b *testing.B) {
			srv, _ := answerSubmits(b)
			c := NewClient(srv.URL, ClientOptions{Conns: 4, Sign: sign})
			in := benchInput()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.SubmitServiceJob(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

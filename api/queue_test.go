package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/api"
)

// getQueue calls GET api.QueuePath with the query q and returns the status
// and the body.
func getQueue(t *testing.T, base, method, query string) (int, []byte) {
	t.Helper()
	return getExtension(t, base+api.QueuePath, method, query)
}

// TestQueueEndpoint: the endpoint's front is GetJobQueueSnapshot's, in its
// order, each job with the name, share, priority and reason that
// DescribeServiceJob gives; bad requests are ClientExceptions that say
// what to change.
func TestQueueEndpoint(t *testing.T) {
	s := newServer(t)
	arn := s.setup("q", 2,
		shareSpec{name: "QS1", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(-1)},
		shareSpec{name: "QS2", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve},
	)
	run := s.submit("q", "QS1", "runs", 1, payload(g5, 1, time.Hour, 0))
	s.waitStatus(run, types.ServiceJobStatusRunning)
	var waiting []string
	for _, n := range []string{"w1", "w2", "w3"} {
		waiting = append(waiting, s.submit("q", "QS1", n, 1, payload(g5, 1, time.Hour, 0)))
	}
	w4 := s.submit("q", "QS2", "w4", 5, payload(g5, 2, time.Hour, 0)) // needs 2 of a share of 1: waits
	// Wait until the scheduler has said why the heads wait (w4, which can
	// never fit its share, last).
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(aws.ToString(s.describe(waiting[0]).StatusReason), "waiting for capacity:") ||
		!strings.HasPrefix(aws.ToString(s.describe(w4).StatusReason), "MISCONFIGURATION:") {
		if time.Now().After(deadline) {
			t.Fatalf("no wait reason: %q, %q", aws.ToString(s.describe(waiting[0]).StatusReason), aws.ToString(s.describe(w4).StatusReason))
		}
		time.Sleep(20 * time.Millisecond)
	}

	srv := httptest.NewServer(api.QueueHandler(s.d))
	defer srv.Close()
	for _, ref := range []string{"q", arn} {
		status, body := getQueue(t, srv.URL, http.MethodGet, "jobQueue="+url.QueryEscape(ref))
		if status != http.StatusOK {
			t.Fatalf("GET ?jobQueue=%s: %d %s", ref, status, body)
		}
		var got api.QueueResponse
		must(t, json.Unmarshal(body, &got))
		snap, err := s.c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("q")})
		must(t, err)
		if got.JobQueue != "q" || !got.QuotaShares || len(got.Front) != len(snap.FrontOfQueue.Jobs) || len(got.Front) != 4 {
			t.Fatalf("GET ?jobQueue=%s = %s, want the snapshot's %d jobs", ref, body, len(snap.FrontOfQueue.Jobs))
		}
		for i, j := range got.Front {
			d := s.describe(j.JobID)
			if j.Position != i+1 || j.JobArn != aws.ToString(snap.FrontOfQueue.Jobs[i].JobArn) || j.JobName != aws.ToString(d.JobName) ||
				j.QuotaShareName != aws.ToString(d.QuotaShareName) || j.SchedulingPriority != int(aws.ToInt32(d.SchedulingPriority)) ||
				j.StatusReason != aws.ToString(d.StatusReason) || j.Status != "RUNNABLE" || j.RunnableSince == nil {
				t.Errorf("front[%d] = %+v, want position %d and DescribeServiceJob's %s / %s / %q", i, j, i+1, aws.ToString(d.JobName), aws.ToString(d.QuotaShareName), aws.ToString(d.StatusReason))
			}
		}
		if len(got.ShareFronts) != 2 || got.ShareFronts[0].QuotaShareName != "QS1" || got.ShareFronts[0].Head.JobName != "w1" ||
			got.ShareFronts[1].QuotaShareName != "QS2" || got.ShareFronts[1].Head.JobName != "w4" || got.ShareFronts[1].Head.Position == 0 {
			t.Errorf("share fronts = %+v, want QS1's w1 and QS2's w4, with their positions", got.ShareFronts)
		}
	}

	for _, c := range []struct{ method, query, want string }{
		{http.MethodGet, "", "jobQueue is required"},
		{http.MethodGet, "jobQueue=", "jobQueue is required"},
		{http.MethodGet, "jobQueue=q&jobQueue=q", "jobQueue is required, once"},
		{http.MethodGet, "jobQueue=nope", "nope"},
		{http.MethodGet, "jobQueue=bad%20name", "jobQueue"},
		{http.MethodGet, "jobQueue=" + strings.Repeat("a", 600), "600 bytes"},
		{http.MethodGet, "queue=q", `"queue" is not known`},
		{http.MethodGet, "jobQueue=%zz", "not valid"},
		{http.MethodPost, "jobQueue=q", "POST is not allowed"},
	} {
		status, body := getQueue(t, srv.URL, c.method, c.query)
		var e struct{ Type, Message string }
		_ = json.Unmarshal(body, &struct {
			Type    *string `json:"__type"`
			Message *string `json:"message"`
		}{&e.Type, &e.Message})
		if status != http.StatusBadRequest || e.Type != "ClientException" || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s ?%.40s: %d %s, want a ClientException saying %q", c.method, c.query, status, body, c.want)
		}
	}
}

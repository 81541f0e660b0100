package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/api"
	"qshare/engine"
)

var updateLending = flag.Bool("update-lending", false, "rewrite testdata/lending-two-lenders.json")

// getLending calls GET api.LendingPath with the query q and returns the
// status and the body.
func getLending(t *testing.T, base, method, query string) (int, []byte) {
	t.Helper()
	return getExtension(t, base+api.LendingPath, method, query)
}

// getExtension sends METHOD u?query (u alone when query is empty) and
// returns the status and the body.
func getExtension(t *testing.T, u, method, query string) (int, []byte) {
	t.Helper()
	if query != "" {
		u += "?" + query
	}
	code, _, b := callExtension(t, method, u, nil)
	return code, b
}

// callExtension sends METHOD u with body (nil for none) and returns the
// status, the headers and the body.
func callExtension(t *testing.T, method, u string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header, b
}

// TestLendingEndpoint runs a queue in which QS1 borrows from the capacity no
// share owns and from two lenders, QS2 and QS3, while the RESERVE share QS4
// keeps its instance. The endpoint's answer must be the engine's own
// attribution: that of a fresh engine given the server's configuration and
// the same running jobs, and the figures the rule gives.
func TestLendingEndpoint(t *testing.T) {
	s := newServer(t)
	unbounded := aws.Int32(-1)
	arn := s.setup("q", 5,
		shareSpec{name: "QS1", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: unbounded},
		shareSpec{name: "QS2", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend},
		shareSpec{name: "QS3", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend},
		shareSpec{name: "QS4", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve},
	)
	// A queue without a quota-share policy is not listed.
	s.createQueue("fifo", nil, s.createEnv("fifo-env", 1))
	s.waitQueueStatus("fifo", types.JQStatusValid)

	var ids []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, s.submit("q", "QS1", n, 1, payload(g5, 1, time.Hour, 0)))
	}
	for _, id := range ids[:4] {
		s.waitStatus(id, types.ServiceJobStatusRunning)
	}

	srv := httptest.NewServer(api.LendingHandler(s.d))
	defer srv.Close()
	status, body := getLending(t, srv.URL, http.MethodGet, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", api.LendingPath, status, body)
	}
	var got api.LendingResponse
	must(t, json.Unmarshal(body, &got))
	if len(got.JobQueues) != 1 || got.JobQueues[0].JobQueue != "q" {
		t.Fatalf("GET %s lists %s, want the one queue with quota shares", api.LendingPath, body)
	}

	// The engine's attribution: a fresh engine with the server's
	// configuration and the four jobs the server runs.
	e := engine.New()
	must(t, s.d.EngineConfig().Load(e))
	for i, id := range ids[:4] {
		must(t, e.Submit(engine.JobSpec{ID: id, Queue: "q", Share: "QS1", Created: time.Unix(int64(i), 0), Demand: qshare.Capacity{g5: 1}, PreemptionRetries: -1}))
	}
	e.Schedule(time.Unix(10, 0))
	want, _ := e.Lending("q")
	// The server adds the environment's executor, which the engine does
	// not know; its simulated executor has no health to report.
	want.Executor = "default"
	if !reflect.DeepEqual(got.JobQueues[0], want) {
		t.Fatalf("the endpoint and the engine disagree:\nendpoint %s\nengine   %s", js(got.JobQueues[0]), js(want))
	}
	qs1 := got.JobQueues[0].QuotaShares[0]
	if qs1.QuotaShareName != "QS1" || !reflect.DeepEqual(qs1.Capacity[0].BorrowedFrom,
		[]qshare.Flow{{Unowned: true, Quantity: 1}, {QuotaShare: "QS2", Quantity: 1}, {QuotaShare: "QS3", Quantity: 1}}) {
		t.Fatalf("QS1 = %s, want 3 borrowed: 1 no share owns, 1 from QS2, 1 from QS3", js(qs1))
	}
	for i, name := range []string{"QS2", "QS3"} {
		c := got.JobQueues[0].QuotaShares[i+1].Capacity[0]
		if got.JobQueues[0].QuotaShares[i+1].QuotaShareName != name || c.Lent != 1 || !reflect.DeepEqual(c.LentTo, []qshare.Flow{{QuotaShare: "QS1", Quantity: 1}}) {
			t.Fatalf("%s = %+v, want 1 lent to QS1", name, c)
		}
	}
	if c := got.JobQueues[0].QuotaShares[3].Capacity[0]; c.Idle != 1 || c.Lent != 0 {
		t.Fatalf("QS4 = %+v, want its one instance idle", c)
	}

	// The one queue, by name or ARN, gives the same answer; the wire names
	// are those docs/api.md gives.
	for _, ref := range []string{"q", arn} {
		status, one := getLending(t, srv.URL, http.MethodGet, "jobQueue="+url.QueryEscape(ref))
		var r api.LendingResponse
		must(t, json.Unmarshal(one, &r))
		if status != http.StatusOK || !reflect.DeepEqual(r.JobQueues, got.JobQueues) {
			t.Fatalf("GET ?jobQueue=%s: %d %s", ref, status, one)
		}
	}
	// The body, indented, is the example of docs/api.md.
	var pretty bytes.Buffer
	must(t, json.Indent(&pretty, body, "", "  "))
	pretty.WriteByte('\n')
	const golden = "testdata/lending-two-lenders.json"
	if *updateLending {
		must(t, os.WriteFile(golden, pretty.Bytes(), 0o644))
	}
	if g, err := os.ReadFile(golden); err != nil || !bytes.Equal(g, pretty.Bytes()) {
		t.Errorf("the body differs from %s (go test ./api -run TestLendingEndpoint -update-lending rewrites it, and docs/api.md quotes it):\n%s", golden, pretty.Bytes())
	}
	for _, member := range []string{`"jobQueues"`, `"serviceEnvironment":"q-env"`, `"quotaShareName":"QS1"`, `"borrowedFrom":[{"unowned":true,"quantity":1},{"quotaShare":"QS2","quantity":1}`, `"lentTo":[{"quotaShare":"QS1","quantity":1}]`, `"limit":-1`, `"unowned":1`} {
		if !strings.Contains(string(body), member) {
			t.Errorf("the body lacks %s: %s", member, body)
		}
	}
	// A FIFO queue named on its own has no shares.
	status, fifo := getLending(t, srv.URL, http.MethodGet, "jobQueue=fifo")
	if status != http.StatusOK || !strings.Contains(string(fifo), `"quotaShares":[]`) {
		t.Fatalf("GET ?jobQueue=fifo: %d %s", status, fifo)
	}
}

// TestLendingEndpointRejects: every bad request is a ClientException that
// names what is wrong, and exposes nothing of the server.
func TestLendingEndpointRejects(t *testing.T) {
	s := newServer(t)
	srv := httptest.NewServer(api.LendingHandler(s.d))
	defer srv.Close()
	for _, tc := range []struct {
		method, query, want string
	}{
		{http.MethodGet, "jobQueue=nope", "Job queue nope does not exist"},
		{http.MethodGet, "jobQueue=", "jobQueue is empty"},
		{http.MethodGet, "jobQueue=a&jobQueue=b", "jobQueue is given 2 times"},
		{http.MethodGet, "queue=a", `query parameter "queue" is not known`},
		{http.MethodGet, "jobQueue=arn:aws:batch:us-east-1:000000000000:scheduling-policy/p", "jobQueue"},
		{http.MethodPost, "", "POST is not allowed"},
		{http.MethodGet, "jobQueue=%2e%2e%2f%2e%2e%2fetc", "is not valid"},
		{http.MethodGet, "jobQueue=%zz", "the query string is not valid"},
		{http.MethodGet, "jobQueue=" + strings.Repeat("x", 5000), "jobQueue is 5000 bytes long"},
		{http.MethodGet, "jobQueue=" + strings.Repeat("x", 200), "use 1 to 128 letters"},
		{http.MethodGet, "jobQueue=a%00b", "is not valid"},
	} {
		status, body := getLending(t, srv.URL, tc.method, tc.query)
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		if status != http.StatusBadRequest || e.Type != "ClientException" || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s ?%s: %d %s, want a ClientException about %q", tc.method, tc.query, status, body, tc.want)
		}
	}
}

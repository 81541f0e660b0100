package shareview

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"qshare"
)

// TestLendingClient reads the lending endpoint of stand-in servers: an
// answer, a refusal, a server without the endpoint, and a broken answer.
func TestLendingClient(t *testing.T) {
	var gotQuery string
	for _, tc := range []struct {
		name, body, want string
		status           int
		isClient         bool
	}{
		{"answer", `{"jobQueues":[{"jobQueue":"q","serviceEnvironment":"e","capacity":[],"quotaShares":[{"quotaShareName":"a","strategy":"LEND","capacity":[{"capacityUnit":"ml.g5.xlarge","owned":1,"lent":1,"lentTo":[{"quotaShare":"b","quantity":1}],"limit":1}]}]}]}`, "", 200, false},
		{"refusal", `{"__type":"ClientException","message":"Job queue q does not exist"}`, "Job queue q does not exist", 400, true},
		{"older server", `404 page not found`, "does not serve GET /qshare/v1/lending", 404, true},
		{"server failure", `{"__type":"ServerException","message":"boom"}`, "the server failed: boom", 500, false},
		{"broken answer", `{"jobQueues": [`, "is not valid", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != qshare.LendingPath {
					http.NotFound(w, r)
					return
				}
				gotQuery = r.URL.RawQuery
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := &LendingClient{Endpoint: srv.URL}
			ls, err := c.Lending(context.Background(), "q/x")
			if gotQuery != "jobQueue=q%2Fx" {
				t.Errorf("query %q, want the queue escaped", gotQuery)
			}
			if tc.want == "" {
				if err != nil || len(ls) != 1 || ls[0].QuotaShares[0].Capacity[0].LentTo[0].QuotaShare != "b" {
					t.Fatalf("Lending = %+v, %v", ls, err)
				}
				return
			}
			var qe *qshare.Error
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &qe) != tc.isClient {
				t.Fatalf("Lending error %v, want one saying %q (a qshare.Error: %v)", err, tc.want, tc.isClient)
			}
		})
	}
}

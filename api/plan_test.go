package api_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/api"
)

// planCall sends METHOD base+path with body (none when empty) and returns
// the status, the error type and the body.
func planCall(t *testing.T, base, method, path, body string) (int, string, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	code, h, b := callExtension(t, method, base+path, r)
	return code, h.Get("X-Amzn-ErrorType"), b
}

// TestPlansEndpoint: PUT creates and replaces a capacity plan, GET reads
// one and the list, DELETE removes it; every bad request is a
// ClientException that names what is wrong and changes nothing; an unknown
// plan is a ClientException too, through the one error table.
func TestPlansEndpoint(t *testing.T) {
	s := newServer(t)
	s.setup("q", 2, shareSpec{name: "QS1", limit: 1, strategy: types.QuotaShareResourceSharingStrategyLend})
	srv := httptest.NewServer(api.PlansHandler(s.d))
	defer srv.Close()
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	good := `{"jobQueue":"q","quotaShareName":"QS1","instanceType":"ml.p5.48xlarge","instanceCount":16,"startTime":"` +
		start.Format(time.RFC3339) + `","endTime":"` + start.Add(14*24*time.Hour).Format(time.RFC3339) + `"}`
	for _, c := range []struct{ method, path, body, want string }{
		{"PUT", "/P", `{"jobQueue":"q"`, "the JSON ends too early"},
		{"PUT", "/P", `{"instanceCount":"16"}`, "member instanceCount should be"},
		{"PUT", "/P", strings.Replace(good, `"startTime":"`, `"startTime":"x`, 1), "startTime"},
		{"PUT", "/P", strings.Replace(good, `"QS1"`, `"QS9"`, 1), "QS9"},
		{"PUT", "/P", strings.Replace(good, `:16`, `:0`, 1), "instanceCount"},
		{"PUT", "/P", strings.Replace(good, `"q"`, `"../etc"`, 1), "jobQueue"},
		{"PUT", "/P", strings.Replace(good, `{`, `{"capacityPlanName":"other",`, 1), "capacityPlanName"},
		{"PUT", "/bad%20name", good, "capacityPlanName"},
		{"PUT", "/P?x=1", good, "no query parameters"},
		{"POST", "/P", good, "POST is not allowed"},
		{"DELETE", "", "", "DELETE is not allowed"},
		{"GET", "/nope", "", "nope does not exist"},
		{"DELETE", "/nope", "", "nope does not exist"},
	} {
		code, typ, body := planCall(t, srv.URL, c.method, api.PlansPath+c.path, c.body)
		if code != 400 || typ != "ClientException" || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s %s: %d %s %s; want a client error saying %q", c.method, c.path, c.body, code, typ, body, c.want)
		}
	}
	if ps := s.d.Plans(); len(ps) != 0 {
		t.Fatalf("bad requests left plans: %+v", ps)
	}
	code, _, body := planCall(t, srv.URL, "PUT", api.PlansPath+"/P", good)
	if code != 200 || !strings.Contains(string(body), `"capacityPlanArn":"arn:aws:sagemaker:us-east-1:000000000000:training-plan/P"`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	code, _, body = planCall(t, srv.URL, "PUT", api.PlansPath+"/P", strings.Replace(good, `:16`, `:8,"warningSeconds":300`, 1))
	if code != 200 {
		t.Fatalf("PUT (replace): %d %s", code, body)
	}
	code, _, body = planCall(t, srv.URL, "GET", api.PlansPath, "")
	var list api.PlansResponse
	must(t, json.Unmarshal(body, &list))
	if code != 200 || len(list.CapacityPlans) != 1 || list.CapacityPlans[0].InstanceCount != 8 || *list.CapacityPlans[0].WarningSeconds != 300 ||
		list.CapacityPlans[0].StartTime != start.Format(time.RFC3339Nano) {
		t.Fatalf("GET list: %d %s", code, body)
	}
	if code, _, body = planCall(t, srv.URL, "DELETE", api.PlansPath+"/P", ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if code, typ, _ := planCall(t, srv.URL, "GET", api.PlansPath+"/P", ""); code != 400 || typ != "ClientException" {
		t.Fatalf("GET after DELETE: %d", code)
	}
}

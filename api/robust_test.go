package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// operations lists every operation path the server serves, in a fixed
// order: FuzzOperation's first input picks one by index.
var operations = []string{
	"createserviceenvironment", "updateserviceenvironment", "deleteserviceenvironment", "describeserviceenvironments",
	"createjobqueue", "updatejobqueue", "deletejobqueue", "describejobqueues",
	"createschedulingpolicy", "updateschedulingpolicy", "deleteschedulingpolicy", "describeschedulingpolicies", "listschedulingpolicies",
	"createquotashare", "updatequotashare", "deletequotashare", "describequotashare", "listquotashares",
	"submitservicejob", "updateservicejob", "describeservicejob", "listservicejobs", "terminateservicejob", "terminateservicejobs",
	"getjobqueuesnapshot",
}

// members are the request members of every operation, to build bodies from.
var members = []string{
	"serviceEnvironmentName", "serviceEnvironmentType", "serviceEnvironment", "serviceEnvironments", "state", "capacityLimits",
	"tags", "maxResults", "nextToken", "jobQueueName", "jobQueue", "jobQueues", "schedulingPolicyArn", "priority",
	"computeEnvironmentOrder", "serviceEnvironmentOrder", "jobQueueType", "jobStateTimeLimitActions", "name", "arn", "arns",
	"quotaSharePolicy", "fairsharePolicy", "quotaShareName", "quotaShareArn", "resourceSharingConfiguration",
	"preemptionConfiguration", "jobName", "retryStrategy", "schedulingPriority", "serviceRequestPayload", "serviceJobType",
	"shareIdentifier", "timeoutConfig", "clientToken", "jobId", "reason", "jobs", "jobStatus", "filters",
}

// randomValue returns a JSON value: sometimes plausible for qshare, often not.
func randomValue(r *rand.Rand, depth int) any {
	names := []string{"q", "A", "env", "arn:aws:batch:us-east-1:000000000000:job-queue/q", "arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/A",
		"ENABLED", "DISABLED", "SAGEMAKER_TRAINING", "LEND_AND_BORROW", "RESERVE", "FIFO", "RUNNABLE", "JOB_NAME", "ml.g5.xlarge", "",
		"héllo\u0000", strings.Repeat("x", 300), `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`}
	switch k := r.IntN(10); {
	case k < 4:
		return names[r.IntN(len(names))]
	case k < 6:
		return []any{-1, 0, 1, 2, 1 << 40, -1 << 40, 3.5, 1e300}[r.IntN(8)]
	case k == 6:
		return r.IntN(2) == 0
	case k == 7:
		return nil
	case k == 8 && depth < 3:
		n := r.IntN(3)
		a := make([]any, n)
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	default:
		if depth >= 3 {
			return "deep"
		}
		m := map[string]any{}
		for range r.IntN(4) {
			sub := []string{"capacityUnit", "maxCapacity", "strategy", "borrowLimit", "inSharePreemption", "order", "serviceEnvironment",
				"attempts", "evaluateOnExit", "action", "onStatusReason", "attemptDurationSeconds", "preemptionRetriesBeforeTermination",
				"idleResourceAssignmentStrategy", "values", "name", "maxTimeSeconds", "reason", "state"}
			m[sub[r.IntN(len(sub))]] = randomValue(r, depth+1)
		}
		return m
	}
}

// TestNoServerErrors posts malformed and random bodies to every operation
// and checks that each answer is a 200 or a ClientException in the AWS wire
// format: no 500, no panic, no non-JSON body.
func TestNoServerErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.setup("q", 4, shareSpec{name: "A", limit: 2, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow})
	s.submit("q", "A", "j", 1, payload(g5, 1, time.Hour, 0))
	r := rand.New(rand.NewPCG(7, 11))
	fixed := []string{"", "null", "[]", `"x"`, "1", "{", `{"a":}`, "{}{}", `{"jobQueue":{"x":1}}`, strings.Repeat("[", 10000)}
	check := func(method, path string, body []byte) {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		if resp.StatusCode != 200 && resp.StatusCode != 400 || json.Unmarshal(b, &m) != nil || resp.Header.Get("X-Amzn-RequestId") == "" ||
			resp.StatusCode == 400 && (resp.Header.Get("X-Amzn-ErrorType") != "ClientException" || m["__type"] != "ClientException" || m["message"] == "") {
			t.Fatalf("%s %s %.200q: %d %s %.300s", method, path, body, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), b)
		}
	}
	for _, op := range operations {
		for _, body := range fixed {
			check("POST", "/v1/"+op, []byte(body))
		}
		for range 200 {
			m := map[string]any{}
			for range 1 + r.IntN(6) {
				m[members[r.IntN(len(members))]] = randomValue(r, 0)
			}
			b, _ := json.Marshal(m)
			check("POST", "/v1/"+op, b)
		}
	}
	for _, arn := range []string{"", "x", "%25zz", "arn:aws:batch:us-east-1:000000000000:job-queue/q", "arn%3Aaws%3Abatch", strings.Repeat("a/", 100)} {
		for _, method := range []string{"GET", "POST", "DELETE", "PUT"} {
			check(method, "/v1/tags/"+arn+"?tagKeys="+url.QueryEscape(fmt.Sprint(r.IntN(3))), []byte(`{"tags":{"k":"v"}}`))
		}
	}
}

package daemon

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/store"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"Received status from SageMaker:*", "Received status from SageMaker: Training job failed", true},
		{"Received status from SageMaker:*", "Essential process exited with code 1", false},
		{"*code 3*", "Essential process exited with code 3", true},
		{"*code 3", "Essential process exited with code 33", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXcYb", false},
		{"a*a", "a", false},
		{"CAPACITY:*", "capacity:x", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestShouldRetry(t *testing.T) {
	rules := func(rs ...string) *qshare.RetryStrategy {
		r := &qshare.RetryStrategy{Attempts: 3}
		for i := 0; i < len(rs); i += 2 {
			r.EvaluateOnExit = append(r.EvaluateOnExit, qshare.EvaluateOnExit{Action: rs[i], OnStatusReason: rs[i+1]})
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		rs     *qshare.RetryStrategy
		failed int
		reason string
		want   bool
	}{
		{"no strategy: one attempt", nil, 1, "x", false},
		{"attempts left, no rules", &qshare.RetryStrategy{Attempts: 3}, 2, "x", true},
		{"attempts used up", &qshare.RetryStrategy{Attempts: 3}, 3, "x", false},
		{"first match wins: EXIT", rules("EXIT", "*code 3*", "RETRY", "*"), 1, "exited with code 3", false},
		{"first match wins: RETRY", rules("RETRY", "*code 3*", "EXIT", "*"), 1, "exited with code 3", true},
		{"no match retries", rules("EXIT", "Received*"), 1, "exited with code 3", true},
		{"case-insensitive action", rules("exit", "*"), 1, "x", false},
		{"empty pattern matches all", rules("EXIT", ""), 1, "x", false},
		{"rules never extend attempts", rules("RETRY", "*"), 3, "x", false},
	} {
		j := &qshare.Job{RetryStrategy: tc.rs, FailedAttempts: tc.failed}
		if got, why := shouldRetry(j, tc.reason); got != tc.want || why == "" {
			t.Errorf("%s: shouldRetry = %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestARNs(t *testing.T) {
	if _, err := New(Config{Store: nopStore{}, Executor: nil}); err == nil {
		t.Fatal("New without an executor succeeded")
	}
	d := &Daemon{cfg: Config{Region: "eu-west-1", AccountID: "123456789012"}}
	for arn, want := range map[string]parsedARN{
		"arn:aws:batch:eu-west-1:123456789012:job-queue/q":                 {kind: kindQueue, name: "q"},
		"arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/QS1": {kind: kindShare, queue: "q", name: "QS1"},
		"arn:aws:batch:eu-west-1:123456789012:service-job/abc":             {kind: kindJob, name: "abc"},
		"arn:aws:batch:eu-west-1:123456789012:scheduling-policy/p":         {kind: kindPolicy, name: "p"},
		"arn:aws:batch:eu-west-1:123456789012:service-environment/e":       {kind: kindEnvironment, name: "e"},
	} {
		got, ok := d.parseARN(arn)
		if !ok || got != want {
			t.Errorf("parseARN(%s) = %+v, %v; want %+v", arn, got, ok, want)
		}
	}
	for _, bad := range []string{
		"arn:aws:batch:us-east-1:123456789012:job-queue/q",
		"arn:aws:batch:eu-west-1:000000000000:job-queue/q",
		"arn:aws:batch:eu-west-1:123456789012:job-queue/",
		"arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/",
		"arn:aws:batch:eu-west-1:123456789012:job-queue/q/x",
		"arn:aws:batch:eu-west-1:123456789012:service-job",
	} {
		if p, ok := d.parseARN(bad); ok {
			t.Errorf("parseARN(%s) = %+v, want not ok", bad, p)
		}
	}
	if n, err := d.refName("jobQueue", kindQueue, "plain"); err != nil || n != "plain" {
		t.Errorf("refName(plain) = %q, %v", n, err)
	}
	if _, err := d.refName("jobQueue", kindQueue, "arn:aws:batch:eu-west-1:123456789012:scheduling-policy/p"); err == nil ||
		!strings.Contains(err.Error(), "not a job-queue ARN") || qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("refName(policy ARN as queue) = %v", err)
	}
	if id, err := d.jobRef("jobId", d.JobARN("x-1")); err != nil || id != "x-1" {
		t.Errorf("jobRef(ARN) = %q, %v", id, err)
	}
}

// TestJobIndex checks the list index against a sort of the same keys, for
// keys that arrive out of order as concurrent submits do.
func TestJobIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x jobIndex
	var keys []jobKey
	for i := range 2000 {
		k := jobKey{created: int64(i/3 + r.IntN(20)), id: fmt.Sprintf("%05d", r.IntN(100000))}
		keys = append(keys, k)
		x.add(k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	for i := range keys {
		if x.ids[i] != keys[i] {
			t.Fatalf("index position %d = %+v, want %+v", i, x.ids[i], keys[i])
		}
	}
	k, err := decodeJobToken(encodeJobToken(keys[7]))
	if err != nil || k != keys[7] {
		t.Fatalf("token round trip = %+v, %v", k, err)
	}
	if _, err := decodeJobToken("not a token"); err == nil {
		t.Fatal("a bad token decoded")
	}
}

// nopStore satisfies store.Store for tests that never reach it.
type nopStore struct{ store.Store }

// TestPlanStopEnd: the reason of a plan's stop gives the plan's end back,
// and no other reason does.
func TestPlanStopEnd(t *testing.T) {
	end := time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC)
	for reason, ok := range map[string]bool{
		"Preempted by the scheduler (cross-share): capacity plan P ends at 2026-12-15T00:00:00Z: stopped to end by then, requeued":                        true,
		"Preempted by the scheduler (cross-share): capacity plan P of share A ends at 2026-12-15T00:00:00Z: share B runs above its own limit of 0 x, and": true,
		"Preempted by the scheduler (cross-share): preempted by cross-share preemption to return capacity to share QS2 for job X":                         false,
		"Preempted by the scheduler (cross-share): capacity plan P ends at soon: x":                                                                       false,
	} {
		got, gotOK := planStopEnd(reason)
		if gotOK != ok || (ok && !got.Equal(end)) {
			t.Errorf("planStopEnd(%q) = %v, %v; want %v", reason, got, gotOK, ok)
		}
	}
}

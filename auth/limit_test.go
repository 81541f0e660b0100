package auth

import (
	"strings"
	"testing"
	"time"

	"qshare"
)

func TestLimiter(t *testing.T) {
	var l limiter
	p := &Principal{Name: "flood", ARN: "arn:aws:iam::000000000000:user/flood", Limits: Limits{RequestsPerSecond: 2, Burst: 3}}
	free := &Principal{Name: "alice"}
	t0 := time.Unix(1_000_000, 0)
	for i := 0; i < 3; i++ {
		if err := l.allow(p, t0); err != nil {
			t.Fatalf("request %d of the burst: %v", i+1, err)
		}
	}
	err := l.allow(p, t0)
	if qshare.ErrorCodeOf(err) != qshare.ETHROTTLED || !strings.Contains(err.Error(), "flood may make 2 requests per second (burst 3)") {
		t.Fatalf("the 4th at once: %v", err)
	}
	if err := l.allow(p, t0.Add(499*time.Millisecond)); err == nil {
		t.Fatal("a token came back before 1/rate")
	}
	if err := l.allow(p, t0.Add(time.Second)); err != nil {
		t.Fatalf("after a second: %v", err)
	}
	if err := l.allow(p, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // refilled to the burst, not beyond
		if err := l.allow(p, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.allow(p, t0.Add(time.Hour)); err == nil {
		t.Fatal("a bucket refilled beyond its burst")
	}
	for i := 0; i < 1000; i++ {
		if err := l.allow(free, t0); err != nil {
			t.Fatal("a principal without limits was throttled")
		}
	}
}

func TestParseLimits(t *testing.T) {
	k, err := Parse([]byte("principals: [{name: a, limits: {requestsPerSecond: 2.5, burst: 10, unfinishedJobs: 7}}]"), "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if l := k.names["a"].Limits; l.RequestsPerSecond != 2.5 || l.Burst != 10 || l.UnfinishedJobs != 7 {
		t.Fatalf("limits %+v", l)
	}
	for _, bad := range []string{
		"principals: [{name: a, limits: {requestsPerSecond: -1}}]",
		"principals: [{name: a, limits: {requestsPerSecond: .nan}}]", // no rate at all: every request throttled
		"principals: [{name: a, limits: {requestsPerSecond: .inf}}]", // no limit, written as one
		"principals: [{name: a, limits: {burst: 3}}]",
		"principals: [{name: a, limits: {rps: 3}}]",
		"principals: [{name: a, limits: {unfinishedJobs: -1}}]",
		"principals: [{name: a, limits: {unfinishedJobs: lots}}]",
	} {
		if _, err := Parse([]byte(bad), "000000000000"); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Parse(%q) = %v, want an error naming the line", bad, err)
		}
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// reasonOfWait is a reason whose useful part comes late.
const reasonOfWait = "waiting for capacity: the job must borrow to get 1 ml.g5.xlarge, and too little is free for borrowing; the environment's free ml.g5.xlarge is reserved by QS3; in-share preemption found no lower-priority jobs whose preemption would make room"

// TestJobsPrintsWholeReasons: a listing that goes to a pipe or a file (here
// a buffer) holds every reason whole; only a terminal gets them shortened.
func TestJobsPrintsWholeReasons(t *testing.T) {
	now := time.Now()
	s := &session{now: func() time.Time { return now }}
	rows := []jobRow{{Queue: "training", Priority: 5, Summary: types.ServiceJobSummary{
		JobName: aws.String("bert-base"), JobId: aws.String("01a2307c-2e49-757d-8ff9-dbbb3216c149"), QuotaShareName: aws.String("QS1"),
		Status: types.ServiceJobStatusRunnable, StatusReason: aws.String(reasonOfWait), CreatedAt: aws.Int64(now.UnixMilli()),
	}}}
	var b bytes.Buffer
	if err := s.printJobs(&b, rows, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "QUEUE ") || !strings.HasSuffix(lines[0], "  REASON") {
		t.Fatalf("the listing is\n%s", b.String())
	}
	if !strings.HasSuffix(lines[1], "  "+reasonOfWait) {
		t.Errorf("the reason is not whole:\n%s", lines[1])
	}
	if reasonWidth(&b, [][]string{{"a"}}) != 0 {
		t.Error("a buffer is taken for a terminal")
	}
}

// TestShorten: a reason cut for a terminal keeps its first clause whole,
// then whole clauses or whole words, and ends in "…".
func TestShorten(t *testing.T) {
	first := "waiting for capacity: the job must borrow to get 1 ml.g5.xlarge, and too little is free for borrowing …"
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{reasonOfWait, 0, reasonOfWait},
		{reasonOfWait, 1000, reasonOfWait},
		{reasonOfWait, 160, "waiting for capacity: the job must borrow to get 1 ml.g5.xlarge, and too little is free for borrowing; the environment's free ml.g5.xlarge is reserved by QS3 …"},
		{reasonOfWait, 110, first},
		{reasonOfWait, 70, first}, // the first clause is kept whole
		{reasonOfWait, 8, first},
		{"Attempt 1 is running", 40, "Attempt 1 is running"},
		{"Essential container in task exited with a long message here", 30, "Essential container in task …"},
		{"Essentialcontainerintaskexited", 10, "Essential…"},
	} {
		got := shorten(c.s, c.n)
		if got != c.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if c.n > 0 && !strings.HasPrefix(got, first) && len([]rune(got)) > c.n {
			t.Errorf("shorten(%q, %d) is %d runes long", c.s, c.n, len([]rune(got)))
		}
	}
}

// TestRetryText: describe's retry line counts attempts as AWS Batch does
// (the first included) and says that preemptions are not among them.
func TestRetryText(t *testing.T) {
	for _, c := range []struct {
		r    *types.ServiceJobRetryStrategy
		want string
	}{
		{nil, "1 attempt (no retry after a failure); preempted attempts do not count"},
		{&types.ServiceJobRetryStrategy{Attempts: aws.Int32(1)}, "1 attempt (no retry after a failure); preempted attempts do not count"},
		{&types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)}, "2 attempts (1 retry after a failure); preempted attempts do not count"},
		{&types.ServiceJobRetryStrategy{Attempts: aws.Int32(3), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{{Action: "EXIT", OnStatusReason: aws.String("*")}}},
			`3 attempts (2 retries after a failure); preempted attempts do not count; EXIT on "*"`},
	} {
		if got := retryText(c.r); got != c.want {
			t.Errorf("retryText(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}

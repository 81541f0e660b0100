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

// TestWrap: a reason wrapped for a terminal keeps every word, in order, on
// lines that fit.
func TestWrap(t *testing.T) {
	for _, n := range []int{0, 8, 40, 70, 1000} {
		lines := wrap(reasonOfWait, n)
		if got := strings.Join(lines, " "); got != reasonOfWait {
			t.Errorf("wrap(%d) lost words: %q", n, got)
		}
		for _, l := range lines {
			if n > 0 && len([]rune(l)) > n && strings.Contains(l, " ") {
				t.Errorf("wrap(%d): the line %q is longer", n, l)
			}
		}
		if (n == 0 || n == 1000) && len(lines) != 1 {
			t.Errorf("wrap(%d) made %d lines", n, len(lines))
		}
	}
	want := []string{"waiting for capacity: the job must", "borrow to get 1 ml.g5.xlarge, and too", "little is free for borrowing; the"}
	if got := wrap(reasonOfWait, 40); len(got) < 3 || strings.Join(got[:3], "|") != strings.Join(want, "|") {
		t.Errorf("wrap(40) = %q", got)
	}
	if got := wrap("Attempt 1 is running", 40); len(got) != 1 || got[0] != "Attempt 1 is running" {
		t.Errorf("a short reason changed: %q", got)
	}
}

// TestJobsWrapsOnATerminal: with a width, as on a terminal, a long reason
// goes on in the REASON column on the lines after its row, every word kept.
func TestJobsWrapsOnATerminal(t *testing.T) {
	var b bytes.Buffer
	header := []string{"NAME", "STATUS"}
	cells := [][]string{{"bert-base", "RUNNABLE"}, {"eval", "RUNNING"}}
	if err := writeJobTable(&b, header, cells, []string{reasonOfWait, "Attempt 1 is running"}, 40); err != nil {
		t.Fatal(err)
	}
	out := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	col := strings.Index(out[0], "REASON")
	if len(out) != 1+len(wrap(reasonOfWait, 40))+1 || !strings.HasPrefix(out[1], "bert-base ") || !strings.HasPrefix(out[len(out)-1], "eval ") {
		t.Fatalf("the table is\n%s", b.String())
	}
	var words []string
	for _, l := range out[1 : len(out)-1] {
		if len(l) <= col || l[col] == ' ' || l[col-1] != ' ' || (l != out[1] && strings.TrimSpace(l[:col]) != "") {
			t.Errorf("the line %q does not go on in the REASON column (at %d)", l, col)
			continue
		}
		words = append(words, l[col:])
	}
	if got := strings.Join(words, " "); got != reasonOfWait {
		t.Errorf("the wrapped reason reads %q", got)
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

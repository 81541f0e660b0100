package api_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestJobRetention deletes the finished jobs older than the retention, and
// only those: they are gone from DescribeServiceJob and ListServiceJobs, and
// stay gone after a restart; a running job and a recently finished one are
// kept. The daemon's clock is moved forward; the executor's is real.
func TestJobRetention(t *testing.T) {
	dir := t.TempDir()
	var clk clock
	retain := func(c *daemonConfig) { c.JobRetention = time.Hour }
	s := startServer(t, dir, clk.option(), retain)
	s.reserved(2)
	old1 := s.submit("q", "A", "old1", 1, payload(g5, 1, time.Millisecond, 0))
	old2 := s.submit("q", "A", "old2", 1, payload(g5, 1, time.Millisecond, 1))
	s.waitStatus(old1, types.ServiceJobStatusSucceeded)
	s.waitStatus(old2, types.ServiceJobStatusFailed)
	running := s.submit("q", "A", "running", 1, payload(g5, 1, time.Hour, 0))
	s.waitStatus(running, types.ServiceJobStatusRunning)

	clk.setAhead(50 * time.Minute)
	recent := s.submit("q", "A", "recent", 1, payload(g5, 1, time.Millisecond, 0))
	s.waitStatus(recent, types.ServiceJobStatusSucceeded)
	if n, err := s.d.PurgeFinishedJobs(ctx); err != nil || n != 0 {
		t.Fatalf("PurgeFinishedJobs before the retention = %d, %v; want 0", n, err)
	}

	clk.setAhead(61 * time.Minute)
	if n, err := s.d.PurgeFinishedJobs(ctx); err != nil || n != 2 {
		t.Fatalf("PurgeFinishedJobs = %d, %v; want 2", n, err)
	}
	check := func() {
		t.Helper()
		for _, id := range []string{old1, old2} {
			_, err := s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			clientErr(t, err, id)
		}
		for _, id := range []string{running, recent} {
			s.describe(id)
		}
		out, err := s.c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
			Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
		must(t, err)
		var names []string
		for _, j := range out.JobSummaryList {
			names = append(names, aws.ToString(j.JobName))
		}
		if len(names) != 2 {
			t.Fatalf("ListServiceJobs lists %v, want running and recent", names)
		}
	}
	check()
	s.close()

	s = startServer(t, dir, clk.option(), retain)
	check()
}

// TestJobRetentionOff keeps every job when the retention is 0.
func TestJobRetentionOff(t *testing.T) {
	var clk clock
	s := newServer(t, clk.option())
	s.reserved(1)
	id := s.submit("q", "A", "j", 1, payload(g5, 1, time.Millisecond, 0))
	s.waitStatus(id, types.ServiceJobStatusSucceeded)
	clk.setAhead(365 * 24 * time.Hour)
	if n, err := s.d.PurgeFinishedJobs(ctx); err != nil || n != 0 {
		t.Fatalf("PurgeFinishedJobs with no retention = %d, %v; want 0", n, err)
	}
	s.describe(id)
}

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// activeStatuses are the job statuses that are not terminal, the likeliest
// to hold a job first: a poll that finds one stops asking, and each ask
// costs the server a walk over the queue's jobs.
var activeStatuses = []types.ServiceJobStatus{
	types.ServiceJobStatusRunnable, types.ServiceJobStatusRunning, types.ServiceJobStatusScheduled,
	types.ServiceJobStatusStarting, types.ServiceJobStatusSubmitted, types.ServiceJobStatusPending,
}

// listJobs lists every job of a queue in a status, following nextToken.
// Pages that fail on the connection are asked for again.
func listJobs(ctx context.Context, c *batch.Client, queue string, status types.ServiceJobStatus) ([]types.ServiceJobSummary, error) {
	var out []types.ServiceJobSummary
	var token *string
	for {
		var page *batch.ListServiceJobsOutput
		_, err := retryTransient(ctx, 3, func() (err error) {
			page, err = c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{
				JobQueue: aws.String(queue), JobStatus: status, NextToken: token, MaxResults: aws.Int32(100),
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bench: listing %s jobs of %s: %w", status, queue, err)
		}
		out = append(out, page.JobSummaryList...)
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		token = page.NextToken
	}
}

// anyActive reports whether a queue still has a job that is not SUCCEEDED
// or FAILED. It asks for one job of each active status.
func anyActive(ctx context.Context, c *batch.Client, queue string) (bool, error) {
	for _, st := range activeStatuses {
		var page *batch.ListServiceJobsOutput
		_, err := retryTransient(ctx, 3, func() (err error) {
			page, err = c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String(queue), JobStatus: st, MaxResults: aws.Int32(1)})
			return err
		})
		if err != nil {
			return false, fmt.Errorf("bench: listing %s jobs of %s: %w", st, queue, err)
		}
		if len(page.JobSummaryList) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// waitDone polls the queues every interval until none has an active job,
// the server dies, or the timeout passes.
func waitDone(ctx context.Context, c *batch.Client, queues []string, srv *Server, interval, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		busy := false
		for _, q := range queues {
			active, err := anyActive(ctx, c, q)
			if err != nil {
				return err
			}
			if active {
				busy = true
				break
			}
		}
		if !busy {
			return nil
		}
		if srv != nil {
			if err := srv.Alive(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: jobs still active after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

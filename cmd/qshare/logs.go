package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"qshare/logstream"
)

var logsOpts struct {
	attempt  int
	instance int
	follow   bool
	queue    string
}

var logsCmd = &cobra.Command{
	Use:   "logs JOB [--attempt N] [--instance K] [-f]",
	Short: "Print a job's output",
	Long: `Print the output of a job's latest attempt, or of attempt N. With -f it keeps
printing as the job writes, through preemptions and retries (a line
"==> attempt N <==" marks each new attempt), until the job ends or you press
Ctrl-C; on a job that has not started it waits for the first attempt.

The AWS Batch API has no logs operation, so this uses qshare's extension
endpoint GET /qshare/v1/logs/{jobId}?attempt=N&follow=true. Output exists
only for executors that keep it: the process executor does, the simulated
one does not.

JOB is a job id, a job ARN, or a job name that names one job.`,
	Example: `  qshare logs resnet-1 -f
  qshare logs resnet-1 --attempt 1`,
	Args:              cobra.ExactArgs(1),
	ValidArgsFunction: completeJobs,
	RunE: jobRun(&logsOpts.queue, func(cmd *cobra.Command, s *session, _, id string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := s.streamLogs(ctx, cmd.OutOrStdout(), id, logsOpts.attempt, logsOpts.instance, logsOpts.follow)
		if ctx.Err() != nil && cmd.Context().Err() == nil {
			return nil // interrupted by the user: a normal end of -f
		}
		return err
	}),
}

func init() {
	f := logsCmd.Flags()
	f.IntVar(&logsOpts.attempt, "attempt", 0, "print attempt N (from 1) instead of the latest")
	f.IntVar(&logsOpts.instance, "instance", 0, "print instance K (from 0) of a multi-instance job, for an executor with a log per instance (kubernetes: its pod of index K)")
	f.BoolVarP(&logsOpts.follow, "follow", "f", false, "keep printing output as it is written, until the job ends")
	f.StringVarP(&logsOpts.queue, "queue", "q", "", "look a job name up in this job queue only")
	addClientFlags(logsCmd)
	rootCmd.AddCommand(logsCmd)
}

// streamLogs copies a job's output from the server's log endpoint to w.
func (s *session) streamLogs(ctx context.Context, w io.Writer, id string, attempt, instance int, follow bool) error {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", fmt.Sprint(attempt))
	}
	if instance != 0 {
		q.Set("instance", fmt.Sprint(instance))
	}
	if follow {
		q.Set("follow", "true")
	}
	u := s.endpoint + logstream.PathPrefix + url.PathEscape(id)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return logstream.ReadError(resp)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

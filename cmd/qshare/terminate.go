package main

import (
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/spf13/cobra"
)

var terminateOpts struct {
	reason string
	queue  string
}

var terminateCmd = &cobra.Command{
	Use:   "terminate JOB [--reason REASON]",
	Short: "Stop a job for good",
	Long: `Terminate a job (TerminateServiceJob): a running attempt is stopped, and the
job ends FAILED with the reason as its status reason, whatever its retry
strategy says.

JOB is a job id, a job ARN, or a job name that names one job.`,
	Example:           `  qshare terminate qs2-job-1 --reason "wrong learning rate"`,
	Args:              cobra.ExactArgs(1),
	ValidArgsFunction: completeJobs,
	RunE: jobRun(&terminateOpts.queue, func(cmd *cobra.Command, s *session, ref, id string) error {
		if _, err := s.api.TerminateServiceJob(cmd.Context(), &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String(terminateOpts.reason)}); err != nil {
			return err
		}
		res := struct {
			JobID  string `json:"jobId"`
			Reason string `json:"reason"`
		}{id, terminateOpts.reason}
		return s.emit(res, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "job %s terminated: %s\n", ref, terminateOpts.reason)
			return err
		})
	}),
}

func init() {
	f := terminateCmd.Flags()
	f.StringVar(&terminateOpts.reason, "reason", "Terminated with qshare terminate", "why: the job's status reason")
	f.StringVarP(&terminateOpts.queue, "queue", "q", "", "look a job name up in this job queue only")
	addClientFlags(terminateCmd)
	rootCmd.AddCommand(terminateCmd)
}

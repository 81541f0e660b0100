package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/spf13/cobra"

	"qshare"
)

var priorityQueue string

var priorityCmd = &cobra.Command{
	Use:   "priority JOB PRIORITY",
	Short: "Change a job's scheduling priority",
	Long: `Change the scheduling priority of a job (UpdateServiceJob), 0 to 9999.

Within a quota share the job with the higher priority runs first. When the
share has in-share preemption ENABLED, a waiting job whose priority rises
above a running job's may preempt it.

JOB is a job id, a job ARN, or a job name that names one job.`,
	Example: `  # Let qs1-low overtake the running jobs of its share:
  qshare priority qs1-low 4`,
	Args:              cobra.ExactArgs(2),
	ValidArgsFunction: completeJobs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, args []string) error {
		p, err := strconv.ParseInt(args[1], 10, 32)
		if err != nil {
			return qshare.Errorf(qshare.EINVALID, "priority %q is not an integer: use 0 to 9999 (higher runs first)", args[1])
		}
		if err := qshare.ValidatePriority("priority", p); err != nil {
			return err
		}
		id, err := s.resolveJob(cmd.Context(), args[0], priorityQueue)
		if err != nil {
			return err
		}
		out, err := s.api.UpdateServiceJob(cmd.Context(), &batch.UpdateServiceJobInput{JobId: aws.String(id), SchedulingPriority: aws.Int32(int32(p))})
		if err != nil {
			return err
		}
		return s.emit(out, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "job %s now has priority %d\n", aws.ToString(out.JobName), p)
			return err
		})
	}),
}

func init() {
	priorityCmd.Flags().StringVarP(&priorityQueue, "queue", "q", "", "look a job name up in this job queue only")
	addClientFlags(priorityCmd)
	rootCmd.AddCommand(priorityCmd)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/spf13/cobra"

	"qshare/shareview"
)

var describeQueue string

var describeCmd = &cobra.Command{
	Use:   "describe JOB",
	Short: "Show everything about one job: attempts, preemptions and their reasons",
	Long: `Show one service job: its queue, share, priority, status and the reason for
it, its capacity, its retry and preemption settings, every attempt with its
training job, start, stop and reason, and the attempts that were preempted.

JOB is a job id, a job ARN, or a job name that names one job.`,
	Example: `  # By name, by id or by ARN:
  qshare describe qs1-med
  qshare describe qs1-med -o yaml`,
	Args:              cobra.ExactArgs(1),
	ValidArgsFunction: completeJobs,
	RunE: jobRun(&describeQueue, func(cmd *cobra.Command, s *session, _, id string) error {
		out, err := s.api.DescribeServiceJob(cmd.Context(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			return err
		}
		return s.emit(out, func(w io.Writer) error { return s.printJob(w, out) })
	}),
}

func init() {
	describeCmd.Flags().StringVarP(&describeQueue, "queue", "q", "", "look a job name up in this job queue only")
	addClientFlags(describeCmd)
	rootCmd.AddCommand(describeCmd)
}

// printJob prints one job as a block of fields and tables.
func (s *session) printJob(w io.Writer, j *batch.DescribeServiceJobOutput) error {
	now := s.now()
	tw := table(w)
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	field("Name", aws.ToString(j.JobName))
	field("ID", aws.ToString(j.JobId))
	field("ARN", aws.ToString(j.JobArn))
	field("Queue", nameOfARN(aws.ToString(j.JobQueue)))
	field("Quota share", aws.ToString(j.QuotaShareName))
	field("Share identifier", aws.ToString(j.ShareIdentifier))
	field("Priority", fmt.Sprint(aws.ToInt32(j.SchedulingPriority)))
	field("Status", string(j.Status))
	field("Reason", aws.ToString(j.StatusReason))
	if j.IsTerminated != nil && *j.IsTerminated {
		field("Terminated", "yes")
	}
	field("Instances", usage(j.CapacityUsage))
	field("Created", fmt.Sprintf("%s (%s ago)", clock(j.CreatedAt), shareview.Age(now, msTime(j.CreatedAt))))
	if j.ScheduledAt != nil {
		field("Scheduled", clock(j.ScheduledAt))
	}
	if j.StartedAt != nil {
		field("Started", clock(j.StartedAt))
	}
	if j.StoppedAt != nil {
		field("Stopped", clock(j.StoppedAt))
	}
	field("Retry strategy", retryText(j.RetryStrategy))
	preempt := "survives any number of preemptions"
	if p := j.PreemptionConfiguration; p != nil && p.PreemptionRetriesBeforeTermination != nil {
		preempt = fmt.Sprintf("fails after %d preemption retries", *p.PreemptionRetriesBeforeTermination)
	}
	field("Preemption", preempt)
	if t := j.TimeoutConfig; t != nil && t.AttemptDurationSeconds != nil {
		field("Timeout", fmt.Sprintf("%ds per attempt", *t.AttemptDurationSeconds))
	}
	if len(j.Tags) > 0 {
		var tags []string
		for _, k := range sortedKeys(j.Tags) {
			tags = append(tags, k+"="+j.Tags[k])
		}
		field("Tags", strings.Join(tags, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	preempted := map[string]bool{}
	count := int32(0)
	if ps := j.PreemptionSummary; ps != nil {
		count = aws.ToInt32(ps.PreemptedAttemptCount)
		for _, a := range ps.RecentPreemptedAttempts {
			if a.ServiceResourceId != nil {
				preempted[aws.ToString(a.ServiceResourceId.Value)] = true
			}
		}
	}
	fmt.Fprintf(w, "\nAttempts (%d, %d preempted):\n", len(j.Attempts), count)
	if len(j.Attempts) == 0 {
		fmt.Fprintln(w, "  none yet")
	} else {
		tw = table(w)
		execs := s.attemptExecutors(aws.ToString(j.JobId), len(j.Attempts))
		head := "  #\tTRAINING JOB\tSTARTED\tSTOPPED\tPREEMPTED\tREASON"
		if execs != nil {
			head += "\tEXECUTOR"
		}
		fmt.Fprintln(tw, head)
		for i, a := range j.Attempts {
			res := resourceID(a.ServiceResourceId)
			p := "no"
			if preempted[res] {
				p = "yes"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s", i+1, orDash(nameOfARN(res)), clock(a.StartedAt), clock(a.StoppedAt), p, orDash(aws.ToString(a.StatusReason)))
			if execs != nil {
				fmt.Fprintf(tw, "\t%s", execs[i])
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if ps := j.PreemptionSummary; ps != nil && len(ps.RecentPreemptedAttempts) > 0 {
		fmt.Fprintln(w, "\nPreemptions (newest first):")
		tw = table(w)
		fmt.Fprintln(tw, "  TRAINING JOB\tSTARTED\tSTOPPED\tREASON")
		for _, a := range ps.RecentPreemptedAttempts {
			res := resourceID(a.ServiceResourceId)
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", orDash(nameOfARN(res)), clock(a.StartedAt), clock(a.StoppedAt), orDash(aws.ToString(a.StatusReason)))
		}
		return tw.Flush()
	}
	return nil
}

// retryText says what a retry strategy allows. retryStrategy.attempts is, as
// in AWS Batch, the number of attempts a job may make in all, the first
// included, when attempts fail; an attempt that was preempted does not
// count (preemptionConfiguration bounds those), so the listing of attempts
// may well hold more than this number.
func retryText(r *types.ServiceJobRetryStrategy) string {
	n := int32(1)
	if r != nil && aws.ToInt32(r.Attempts) > 1 {
		n = aws.ToInt32(r.Attempts)
	}
	var text string
	switch n {
	case 1:
		text = "1 attempt (no retry after a failure)"
	case 2:
		text = "2 attempts (1 retry after a failure)"
	default:
		text = fmt.Sprintf("%d attempts (%d retries after a failure)", n, n-1)
	}
	text += "; preempted attempts do not count"
	if r != nil {
		for _, e := range r.EvaluateOnExit {
			text += fmt.Sprintf("; %s on %q", e.Action, aws.ToString(e.OnStatusReason))
		}
	}
	return text
}

// resourceID is the value of a service resource identifier (an attempt's
// training job ARN), "" when there is none.
func resourceID(r *types.ServiceResourceId) string {
	if r == nil {
		return ""
	}
	return aws.ToString(r.Value)
}

// attemptExecutors returns the executor that ran each of the job's n
// attempts (docs/executors.md), read from DescribeServiceJob's qshare
// extension attempts[].executor, which the SDK does not decode; nil when
// every attempt ran on the default executor, or the answer cannot be read
// (the table then has no executor column).
func (s *session) attemptExecutors(id string, n int) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"jobId": id})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint+"/v1/describeservicejob", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out struct {
		Attempts []struct {
			Executor string `json:"executor"`
		} `json:"attempts"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out) != nil || len(out.Attempts) != n {
		return nil
	}
	names, named := make([]string, n), false
	for i, a := range out.Attempts {
		names[i] = a.Executor
		if a.Executor == "" {
			names[i] = "default"
		} else {
			named = true
		}
	}
	if !named {
		return nil
	}
	return names
}

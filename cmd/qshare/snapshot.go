package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/spf13/cobra"

	"qshare/shareview"
)

var snapshotCmd = &cobra.Command{
	Use:   "snapshot QUEUE",
	Short: "Show a job queue's snapshot: the front of the queue and of each share, and utilization",
	Long: `Show GetJobQueueSnapshot for a job queue in a readable form: the first
RUNNABLE jobs in dispatch order, the first RUNNABLE job of each quota share,
and the capacity in use, in total and per share. Job ARNs are shown with the
job's name.`,
	Example: `  qshare snapshot training
  qshare snapshot training -o json`,
	Args:              cobra.ExactArgs(1),
	ValidArgsFunction: completeQueues,
	RunE: clientRun(func(cmd *cobra.Command, s *session, args []string) error {
		out, err := s.api.GetJobQueueSnapshot(cmd.Context(), &batch.GetJobQueueSnapshotInput{JobQueue: aws.String(args[0])})
		if err != nil {
			return err
		}
		return s.emit(out, func(w io.Writer) error { return s.printSnapshot(cmd, w, args[0], out) })
	}),
}

func init() {
	addClientFlags(snapshotCmd)
	rootCmd.AddCommand(snapshotCmd)
}

// printSnapshot prints a snapshot as tables, naming each job.
func (s *session) printSnapshot(cmd *cobra.Command, w io.Writer, queue string, out *batch.GetJobQueueSnapshotOutput) error {
	ctx := cmd.Context()
	// Name every job the snapshot mentions.
	var arns []string
	if f := out.FrontOfQueue; f != nil {
		for _, j := range f.Jobs {
			arns = append(arns, aws.ToString(j.JobArn))
		}
	}
	if f := out.FrontOfQuotaShares; f != nil {
		for _, js := range f.QuotaShares {
			for _, j := range js {
				arns = append(arns, aws.ToString(j.JobArn))
			}
		}
	}
	type info struct {
		name, share string
		priority    int32
	}
	infos := make([]info, len(arns))
	if err := parallel(len(arns), 8, func(i int) error {
		d, err := s.api.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(arns[i])})
		if err != nil {
			infos[i] = info{name: nameOfARN(arns[i]), share: "?"}
			return nil // a job that ended since the snapshot; keep its id
		}
		infos[i] = info{name: aws.ToString(d.JobName), share: orDash(aws.ToString(d.QuotaShareName)), priority: aws.ToInt32(d.SchedulingPriority)}
		return nil
	}); err != nil {
		return err
	}
	byARN := map[string]info{}
	for i, a := range arns {
		byARN[a] = infos[i]
	}
	now := s.now()

	fmt.Fprintf(w, "Job queue %s\n\n", queue)
	// section prints a title and then none, when empty, or else a table of
	// header and the rows that rows writes.
	section := func(title, none string, empty bool, header string, rows func(tw io.Writer)) error {
		fmt.Fprintln(w, title)
		if empty {
			fmt.Fprintln(w, "  "+none)
			return nil
		}
		tw := table(w)
		fmt.Fprintln(tw, header)
		rows(tw)
		return tw.Flush()
	}
	fq, fs := out.FrontOfQueue, out.FrontOfQuotaShares
	if err := section("Front of the queue (RUNNABLE, in dispatch order):", "no job waits", fq == nil || len(fq.Jobs) == 0,
		"  #\tJOB\tSHARE\tPRIORITY\tAT THIS POSITION FOR", func(tw io.Writer) {
			for i, j := range fq.Jobs {
				in := byARN[aws.ToString(j.JobArn)]
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", i+1, in.name, in.share, in.priority, shareview.Age(now, msTime(j.EarliestTimeAtPosition)))
			}
		}); err != nil {
		return err
	}
	if err := section("\nFront of each quota share:", "no share has a waiting job", fs == nil || len(fs.QuotaShares) == 0,
		"  SHARE\tJOB\tPRIORITY\tAT THIS POSITION FOR", func(tw io.Writer) {
			for _, name := range sortedKeys(fs.QuotaShares) {
				for _, j := range fs.QuotaShares[name] {
					in := byARN[aws.ToString(j.JobArn)]
					fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", name, in.name, in.priority, shareview.Age(now, msTime(j.EarliestTimeAtPosition)))
				}
			}
		}); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nCapacity in use:")
	u := out.QueueUtilization
	if u == nil {
		fmt.Fprintln(w, "  not reported")
		return nil
	}
	tw := table(w)
	fmt.Fprintf(tw, "  total\t%s\n", usage(u.TotalCapacityUsage))
	if qs := u.QuotaShareUtilization; qs != nil {
		shares := append(qs.TopCapacityUtilization[:0:0], qs.TopCapacityUtilization...)
		sort.SliceStable(shares, func(i, j int) bool {
			return aws.ToString(shares[i].QuotaShareName) < aws.ToString(shares[j].QuotaShareName)
		})
		for _, sh := range shares {
			fmt.Fprintf(tw, "  %s\t%s\n", aws.ToString(sh.QuotaShareName), usage(sh.CapacityUsage))
		}
	}
	if fs := u.FairshareUtilization; fs != nil {
		for _, sh := range fs.TopCapacityUtilization {
			var c []string
			for _, cu := range sh.CapacityUsage {
				c = append(c, fmt.Sprintf("%g×%s", aws.ToFloat64(cu.Quantity), aws.ToString(cu.CapacityUnit)))
			}
			fmt.Fprintf(tw, "  %s\t%v\n", aws.ToString(sh.ShareIdentifier), c)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if u.LastUpdatedAt != nil {
		fmt.Fprintf(w, "\nas of %s\n", clock(u.LastUpdatedAt))
	}
	return nil
}

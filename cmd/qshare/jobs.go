package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"qshare"
	"qshare/shareview"
)

// jobsOptions are the flags of `qshare jobs`.
type jobsOptions struct {
	queue    string
	share    string
	statuses []string
	name     string
}

var jobsOpts jobsOptions

var jobsCmd = &cobra.Command{
	Use:     "jobs [--queue Q] [--share S] [--status STATUS,...] [--name NAME]",
	Aliases: []string{"ls"},
	Short:   "List jobs with their share, priority, status and reason",
	Long: `List the service jobs of one job queue, or of every queue, oldest first:
name, id, quota share, priority, status, instances, age and the reason of
the status.

Without filters every job is listed, whatever its status. --share and
--status are sent to ListServiceJobs (QUOTA_SHARE_NAME and jobStatus);
--name matches job names without regard to case, and a trailing * makes it
a prefix.

Each reason is printed whole: on one line, or on a terminal, when it is
longer than the line leaves, wrapped onto more lines within its column.`,
	Example: `  # Every job of queue training:
  qshare jobs --queue training

  # The jobs of share QS1 that wait:
  qshare jobs --queue training --share QS1 --status RUNNABLE

  # Jobs whose name starts with qs1, as JSON:
  qshare jobs --name 'qs1*' -o json`,
	Args: cobra.NoArgs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, _ []string) error {
		rows, err := s.listJobs(cmd.Context(), jobsOpts)
		if err != nil {
			return err
		}
		return s.emit(rowsWire(rows), func(w io.Writer) error { return s.printJobs(w, rows, jobsOpts.queue == "") })
	}),
}

func init() {
	f := jobsCmd.Flags()
	f.StringVarP(&jobsOpts.queue, "queue", "q", "", "list the jobs of this job queue only (default: every queue)")
	f.StringVarP(&jobsOpts.share, "share", "s", "", "list the jobs of this quota share only")
	f.StringSliceVar(&jobsOpts.statuses, "status", nil, "list jobs in these statuses only: "+strings.Join(statusNames(), ", "))
	f.StringVar(&jobsOpts.name, "name", "", "list the jobs with this name (a trailing * matches a prefix)")
	addClientFlags(jobsCmd)
	_ = jobsCmd.RegisterFlagCompletionFunc("queue", completeQueues)
	_ = jobsCmd.RegisterFlagCompletionFunc("share", completeShares)
	_ = jobsCmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statusNames(), cobra.ShellCompDirectiveNoFileComp))
	rootCmd.AddCommand(jobsCmd)
}

func statusNames() []string {
	var out []string
	for _, s := range qshare.JobStatuses {
		out = append(out, string(s))
	}
	return out
}

// jobRow is one job of the listing.
type jobRow struct {
	Queue    string
	Summary  types.ServiceJobSummary
	Priority int32
}

// rowsWire is the JSON and YAML form of the listing: the API's job
// summaries, with their queue and priority added.
func rowsWire(rows []jobRow) []any {
	out := make([]any, 0, len(rows))
	for _, r := range rows {
		m, _ := wire(r.Summary).(map[string]any)
		m["jobQueue"] = r.Queue
		m["schedulingPriority"] = r.Priority
		out = append(out, m)
	}
	return out
}

// listJobs lists the jobs that the options select, following nextToken,
// with each job's priority (which DescribeServiceJob has and the summary
// lacks), oldest first.
func (s *session) listJobs(ctx context.Context, o jobsOptions) ([]jobRow, error) {
	want := map[types.ServiceJobStatus]bool{}
	for _, st := range o.statuses {
		st = strings.ToUpper(strings.TrimSpace(st))
		if st == "" {
			continue
		}
		if !qshare.JobStatus(st).Valid() {
			return nil, qshare.Errorf(qshare.EINVALID, "--status %s is not a job status: use %s", st, strings.Join(statusNames(), ", "))
		}
		want[types.ServiceJobStatus(st)] = true
	}
	queues := []string{o.queue}
	if o.queue == "" {
		var err error
		if queues, err = s.queueNames(ctx); err != nil {
			return nil, err
		}
	}

	// ListServiceJobs takes one filter; a filter returns every status,
	// except that QUOTA_SHARE_NAME combines with jobStatus. AFTER_CREATED_AT
	// 0 selects every job. What the server cannot filter is filtered here.
	type call struct {
		filter *types.KeyValuesPair
		status types.ServiceJobStatus
	}
	var calls []call
	switch {
	case o.name != "":
		calls = []call{{filter: &types.KeyValuesPair{Name: aws.String("JOB_NAME"), Values: []string{o.name}}}}
	case o.share != "" && len(want) > 0:
		for st := range want {
			calls = append(calls, call{filter: &types.KeyValuesPair{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{o.share}}, status: st})
		}
	case o.share != "":
		calls = []call{{filter: &types.KeyValuesPair{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{o.share}}}}
	case len(want) > 0:
		for st := range want {
			calls = append(calls, call{status: st})
		}
	default:
		calls = []call{{filter: &types.KeyValuesPair{Name: aws.String("AFTER_CREATED_AT"), Values: []string{"0"}}}}
	}

	var rows []jobRow
	seen := map[string]bool{}
	for _, q := range queues {
		for _, c := range calls {
			in := &batch.ListServiceJobsInput{JobQueue: aws.String(q), JobStatus: c.status}
			if c.filter != nil {
				in.Filters = []types.KeyValuesPair{*c.filter}
			}
			jobs, err := allPages(ctx, batch.NewListServiceJobsPaginator(s.api, in),
				func(out *batch.ListServiceJobsOutput) []types.ServiceJobSummary { return out.JobSummaryList })
			if err != nil {
				return nil, err
			}
			for _, j := range jobs {
				id := aws.ToString(j.JobId)
				if seen[id] || (len(want) > 0 && !want[j.Status]) || (o.share != "" && aws.ToString(j.QuotaShareName) != o.share) {
					continue
				}
				seen[id] = true
				rows = append(rows, jobRow{Queue: q, Summary: j})
			}
		}
	}
	err := parallel(len(rows), 8, func(i int) error {
		out, err := s.api.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: rows[i].Summary.JobId})
		if err != nil {
			var ce *types.ClientException
			if errors.As(err, &ce) {
				return nil // deleted between the list and now
			}
			return err
		}
		rows[i].Priority = aws.ToInt32(out.SchedulingPriority)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := aws.ToInt64(rows[i].Summary.CreatedAt), aws.ToInt64(rows[j].Summary.CreatedAt)
		if a != b {
			return a < b
		}
		return aws.ToString(rows[i].Summary.JobName) < aws.ToString(rows[j].Summary.JobName)
	})
	return rows, nil
}

// printJobs prints the listing as a table. The REASON column is last, and a
// reason is printed whole on one line, except on a terminal, where a long
// one is wrapped at word boundaries onto more lines within its column (see
// reasonWidth and wrap), so that no part of it is cut off.
func (s *session) printJobs(w io.Writer, rows []jobRow, withQueue bool) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	header := []string{"NAME", "ID", "SHARE", "PRIORITY", "STATUS", "INSTANCES", "AGE"}
	if withQueue {
		header = append([]string{"QUEUE"}, header...)
	}
	now := s.now()
	cells := make([][]string, 0, len(rows))
	reasons := make([]string, 0, len(rows))
	for _, r := range rows {
		j := r.Summary
		share := aws.ToString(j.QuotaShareName)
		if share == "" {
			share = orDash(aws.ToString(j.ShareIdentifier))
		}
		row := []string{aws.ToString(j.JobName), aws.ToString(j.JobId), share, fmt.Sprint(r.Priority), string(j.Status),
			usage(j.CapacityUsage), shareview.Age(now, msTime(j.CreatedAt))}
		if withQueue {
			row = append([]string{r.Queue}, row...)
		}
		cells = append(cells, row)
		reasons = append(reasons, orDash(aws.ToString(j.StatusReason)))
	}
	return writeJobTable(w, header, cells, reasons, reasonWidth(w, append([][]string{header}, cells...)))
}

// writeJobTable writes the listing's table: the header and the cells of
// each row, then REASON, each reason wrapped to width (0: one line).
func writeJobTable(w io.Writer, header []string, cells [][]string, reasons []string, width int) error {
	tw := table(w)
	fmt.Fprintln(tw, strings.Join(append(header, "REASON"), "\t"))
	blank := strings.Repeat("\t", len(header))
	for i, row := range cells {
		lines := wrap(reasons[i], width)
		fmt.Fprintln(tw, strings.Join(append(row, lines[0]), "\t"))
		for _, l := range lines[1:] {
			fmt.Fprintln(tw, blank+l)
		}
	}
	return tw.Flush()
}

// minReasonWidth is the least width the REASON column wraps to on a
// terminal, however narrow; defaultTermWidth is the terminal's width when
// it cannot be asked.
const (
	minReasonWidth   = 40
	defaultTermWidth = 160
)

// reasonWidth returns how many runes of a reason fit on a line after the
// other columns (rows, the header among them, as table lays them out): 0,
// no limit, when w is not a terminal.
func reasonWidth(w io.Writer, rows [][]string) int {
	f, ok := w.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) {
		return 0
	}
	cols := terminalWidth(f)
	if cols <= 0 {
		cols = defaultTermWidth
	}
	used := 0
	for c := range rows[0] {
		widest := 0
		for _, r := range rows {
			widest = max(widest, utf8.RuneCountInString(r[c]))
		}
		used += widest + 2 // table's padding
	}
	return max(minReasonWidth, cols-used-1)
}

// wrap breaks s into lines of at most n runes at spaces (n <= 0: one
// line); a word longer than n gets a line of its own.
func wrap(s string, n int) []string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return []string{s}
	}
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= n:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

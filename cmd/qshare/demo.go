package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/spf13/cobra"

	"qshare/internal/serveproc"
	"qshare/internal/transcript"
)

// demoConfig is examples/three-shares.yaml (a test keeps the two equal):
// the worked example of the AWS quota-management docs.
//
//go:embed demo-three-shares.yaml
var demoConfig string

var demoOpts struct {
	keep bool
	wait time.Duration
}

var demoCmd = &cobra.Command{
	Use:   "demo",
	Short: "Watch quota shares borrow, reclaim and preempt, on a private server",
	Long: `Start a private qshare server in a temporary directory, with the simulated
executor, and play the worked example of the AWS Batch quota-management
docs on it, one step at a time:

  1. a LEND_AND_BORROW share borrows the idle instance of a LEND share;
  2. the lender gets work and takes its instance back (cross-share
     preemption of the borrower);
  3. a priority change preempts a job inside a share (in-share preemption).

Every step is a qshare command you could type yourself; the demo shows each
one, what it printed, and the shares view after it, with a sentence or two
on what happened. Then it stops the server and deletes its data (unless
--keep). It takes a few seconds and needs nothing but the qshare binary.`,
	Example: `  qshare demo
  qshare demo --keep   # leave the server running afterwards, to explore`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find the qshare binary to start the server with: %w", err)
		}
		return runDemo(ctx, exe, cmd.OutOrStdout(), demoOpts.keep, demoOpts.wait)
	},
}

func init() {
	demoCmd.Flags().BoolVar(&demoOpts.keep, "keep", false, "leave the server running at the end, until Ctrl-C")
	demoCmd.Flags().DurationVar(&demoOpts.wait, "wait", 30*time.Second, "how long to wait for each step's outcome before giving up")
	rootCmd.AddCommand(demoCmd)
}

// runDemo plays the demo with the qshare binary exe, writing to out.
func runDemo(ctx context.Context, exe string, out interface{ Write([]byte) (int, error) }, keep bool, wait time.Duration) (err error) {
	dir, err := os.MkdirTemp("", "qshare-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	srv, err := serveproc.Start(ctx, serveproc.Options{Binary: exe, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn"}, StopWait: 10 * time.Second})
	if err != nil {
		return err
	}
	defer func() {
		if keep && err == nil {
			fmt.Fprintf(out, "\nThe server keeps running at %s (data in %s).\nTry: QSHARE_ENDPOINT=%s qshare jobs\nPress Ctrl-C to stop it.\n", srv.Endpoint, dir, srv.Endpoint)
			<-ctx.Done()
		}
		if serr := srv.Stop(); err == nil && serr != nil {
			err = serr
		}
		if keep {
			os.RemoveAll(dir)
		}
	}()
	s := &transcript.Session{Exe: exe, Endpoint: srv.Endpoint, Dir: dir, Out: out, Format: transcript.Text}
	api := newClient(srv.Endpoint, "us-east-1")
	return playExample(ctx, s, api, wait)
}

// demoJob is what the demo expects of a job after a step.
type demoJob struct {
	status      types.ServiceJobStatus
	preemptions int32
	// head marks the job at the head of its share: the demo waits until
	// the scheduler has said why it waits, so that the picture shows it.
	head bool
}

// playExample plays the three steps of the worked example on s, checking
// after each step that the jobs reached the outcome the AWS docs describe.
func playExample(ctx context.Context, s *transcript.Session, api *batch.Client, wait time.Duration) error {
	fmt.Fprintf(s.Out, "qshare demo: a private server is running at %s, with the simulated executor.\n", s.Endpoint)
	s.Heading("The set-up")
	s.Say(`One service environment with 3 ml.g5.xlarge instances feeds one job queue,
		split into three quota shares of one instance each. QS1 lends what it does
		not use and may borrow up to 200% more, and preempts inside itself by
		priority. QS2 lends its idle instance and never borrows. QS3 keeps its idle
		instance to itself.`)
	if err := s.File("three-shares.yaml", demoConfig); err != nil {
		return err
	}
	if _, err := s.Run(ctx, "apply", "-f", "three-shares.yaml"); err != nil {
		return err
	}

	submit := func(share, name string, priority int) error {
		_, err := s.Run(ctx, "submit", "--queue", "training", "--share", share, "--instance-type", "ml.g5.xlarge",
			"--priority", fmt.Sprint(priority), "--name", name, "--env", "QSHARE_SIM_DURATION=1h")
		return err
	}
	// outcome waits for the jobs to reach want and shows the shares.
	outcome := func(want map[string]demoJob) error {
		if err := awaitJobs(ctx, api, wait, want); err != nil {
			return err
		}
		_, err := s.Run(ctx, "shares")
		return err
	}

	s.Heading("Step 1: QS1 borrows")
	s.Say(`Three jobs arrive in QS1, with priorities 3, 2 and 1, each needing one
		ml.g5.xlarge. (QSHARE_SIM_DURATION tells the simulated executor how long a
		job runs.)`)
	for _, j := range []struct {
		name string
		p    int
	}{{"qs1-high", 3}, {"qs1-med", 2}, {"qs1-low", 1}} {
		if err := submit("QS1", j.name, j.p); err != nil {
			return err
		}
	}
	if err := outcome(map[string]demoJob{
		"qs1-high": {types.ServiceJobStatusRunning, 0, false},
		"qs1-med":  {types.ServiceJobStatusRunning, 0, false},
		"qs1-low":  {types.ServiceJobStatusRunnable, 0, true},
	}); err != nil {
		return err
	}
	s.Say(`qs1-high runs on QS1's own instance and qs1-med on the instance QS2 lends.
		qs1-low waits: QS1 may still borrow, but the only idle instance is QS3's,
		and QS3 reserves it.`)

	s.Heading("Step 2: QS2 takes its instance back")
	s.Say(`A job arrives in QS2, whose instance QS1 is borrowing.`)
	if err := submit("QS2", "qs2-job-1", 1); err != nil {
		return err
	}
	if err := outcome(map[string]demoJob{
		"qs1-high":  {types.ServiceJobStatusRunning, 0, false},
		"qs1-med":   {types.ServiceJobStatusRunnable, 1, true},
		"qs1-low":   {types.ServiceJobStatusRunnable, 0, false},
		"qs2-job-1": {types.ServiceJobStatusRunning, 0, false},
	}); err != nil {
		return err
	}
	s.Say(`qshare reclaimed the lent instance: it preempted qs1-med, the
		lowest-priority job running on borrowed capacity, and gave the instance to
		qs2-job-1. qs1-med is back in the queue, preempted once; qs1-high keeps
		QS1's own instance.`)

	s.Heading("Step 3: a priority change preempts inside QS1")
	s.Say(`qs1-low's priority rises from 1 to 4, above every job of QS1.`)
	if _, err := s.Run(ctx, "priority", "qs1-low", "4"); err != nil {
		return err
	}
	if err := outcome(map[string]demoJob{
		"qs1-high":  {types.ServiceJobStatusRunnable, 1, true},
		"qs1-med":   {types.ServiceJobStatusRunnable, 1, false},
		"qs1-low":   {types.ServiceJobStatusRunning, 0, false},
		"qs2-job-1": {types.ServiceJobStatusRunning, 0, false},
	}); err != nil {
		return err
	}
	s.Say(`QS1 has in-share preemption ENABLED, so qs1-low (now priority 4) preempted
		qs1-high (priority 3) on QS1's own instance. qs1-high and qs1-med wait, each
		preempted once, in priority order.`)
	if _, err := s.Run(ctx, "jobs", "--queue", "training"); err != nil {
		return err
	}
	s.Heading("Done")
	s.Say(`That is the whole example of the AWS docs: borrowing, reclaim, and in-share
		preemption. To run it yourself, start "qshare serve", then apply
		examples/three-shares.yaml and submit jobs as above; docs/tour.md walks
		through it.`)
	return nil
}

// awaitJobs waits until every named job of queue training has the status
// and preemption count given, and fails with what it saw if they do not
// within wait.
func awaitJobs(ctx context.Context, api *batch.Client, wait time.Duration, want map[string]demoJob) error {
	deadline := time.Now().Add(wait)
	for {
		got := map[string]demoJob{}
		out, err := api.ListServiceJobs(ctx, &batch.ListServiceJobsInput{
			JobQueue: aws.String("training"),
			Filters:  []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{"0"}}},
		})
		if err != nil {
			return userError(err, "")
		}
		ok := true
		for _, j := range out.JobSummaryList {
			name := aws.ToString(j.JobName)
			w, tracked := want[name]
			if !tracked {
				continue
			}
			g := demoJob{status: j.Status}
			if w.head && !strings.HasPrefix(aws.ToString(j.StatusReason), "waiting for capacity:") {
				ok = false // the scheduler has not yet said why it waits
			}
			if w.preemptions > 0 {
				d, err := api.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: j.JobId})
				if err != nil {
					return userError(err, "")
				}
				if d.PreemptionSummary != nil {
					g.preemptions = aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount)
				}
			}
			got[name] = g
		}
		for name, w := range want {
			if g, seen := got[name]; !seen || g.status != w.status || (w.preemptions > 0 && g.preemptions != w.preemptions) {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			var diffs []string
			for _, name := range sortedKeys(want) {
				w, g := want[name], got[name]
				diffs = append(diffs, fmt.Sprintf("%s is %s (preempted %d×), expected %s (preempted %d×)", name, orNone(string(g.status)), g.preemptions, w.status, w.preemptions))
			}
			sort.Strings(diffs)
			return fmt.Errorf("the example did not reach the outcome the AWS docs describe within %s: %s", wait, strings.Join(diffs, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

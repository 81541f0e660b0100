package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"qshare/internal/soak"
)

func init() {
	var o soak.Options
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run a random workload for a long while, killing the server with SIGKILL now and then",
		Long: `soak starts qshare serve (process executor, fake GPUs, --events) on a
temporary data directory, applies a fleet of three quota shares on six
instances, and for --duration runs a random workload: checkpointing shell
jobs of 0.3 to 2.3 s submitted from two clients with a bounded backlog,
priority updates and terminations. About every --kill-every it kills the
server with SIGKILL and starts it again on the same data.

At the end it waits for every job to finish and counts violations: an
acknowledged job missing (checked after every restart too), a job that ran
two attempts at once or lost its checkpoint (from the jobs' own traces), a
job that failed although nobody terminated it, a job never finished, and
every broken guarantee in the server's event log (qshare check-events). It
prints the jobs, restarts and violations, and the server's resident memory
a moment after the start and at the end, and exits with status 1 if there
was a violation (the files are then kept for inspection).`,
		Example: `  qshare bench soak --duration 10m
  qshare bench soak --duration 3m --kill-every 10s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := benchContext()
			defer cancel()
			o.Progress = cmd.ErrOrStderr()
			r, err := soak.Run(ctx, o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if benchOpts.json {
				b, _ := json.MarshalIndent(r, "", "  ")
				fmt.Fprintln(out, string(b))
			} else {
				mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
				fmt.Fprintf(out, "duration            %s (then the drain)\n", r.Duration.Round(time.Second))
				fmt.Fprintf(out, "restarts (kill -9)  %d\n", r.Restarts)
				fmt.Fprintf(out, "jobs                %d stored, %d acknowledged of %d submits sent\n", r.Jobs, r.Acknowledged, r.SubmitsSent)
				fmt.Fprintf(out, "outcomes            %d succeeded, %d failed (%d of them terminated by the soak)\n", r.Succeeded, r.Failed, r.Terminated)
				fmt.Fprintf(out, "priority updates    %d sent\n", r.PriorityOps)
				fmt.Fprintf(out, "checkpoint resumes  %d\n", r.Resumes)
				fmt.Fprintf(out, "event log           %d lines, %d starts, %d preemptions\n", r.EventLines, r.Starts, r.Preemptions)
				fmt.Fprintf(out, "server RSS          %s at start, %s at end (peak %s)\n", mib(r.RSSStartBytes), mib(r.RSSEndBytes), mib(r.RSSPeakBytes))
				fmt.Fprintf(out, "violations          %d\n", r.Violations)
				for _, p := range r.Problems {
					fmt.Fprintln(out, "  "+p)
				}
				if r.Dir != "" {
					fmt.Fprintf(out, "files               %s\n", r.Dir)
				}
			}
			if r.Violations > 0 {
				return errors.New("the soak found violations")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long the workload runs (the drain comes after)")
	f.DurationVar(&o.KillEvery, "kill-every", 20*time.Second, "mean time between two kill -9 of the server")
	f.StringVar(&o.Dir, "dir", "", "keep the data, event log and traces here (default: a temporary directory, removed after a clean run)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the workload and the kill moments (0: from the clock)")
	benchCmd.AddCommand(cmd)
}

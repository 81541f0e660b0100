package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
	"qshare/sim"
)

func init() {
	for _, k := range []struct {
		use, short, example string
		workload            func() *sim.Workload
		pub                 bench.KueuePublished
		target, largeTarget float64
		timeout             time.Duration
	}{
		{"kueue-baseline", "Kueue's baseline scheduler benchmark (30 shares, 15,000 jobs) against a real server",
			"  qshare bench kueue-baseline\n  qshare bench kueue-baseline --runs 3 --json",
			sim.KueueBaseline, bench.KueueBaselinePublished, 1.15, 2, 15 * time.Minute},
		{"kueue-large-scale", "Kueue's large-scale scheduler benchmark (1,000 shares, 50,000 jobs) against a real server",
			"  qshare bench kueue-large-scale\n  qshare bench kueue-large-scale --endpoint http://127.0.0.1:8750 --json",
			sim.KueueLargeScale, bench.KueueLargeScalePublished, 1.25, 0, 60 * time.Minute},
	} {
		opt := bench.KueueOptions{Timeout: k.timeout}
		var svg string
		workload, pub, target, largeTarget := k.workload, k.pub, k.target, k.largeTarget
		cmd := &cobra.Command{
			Use:   k.use,
			Short: k.short,
			Long: k.short + `.

Kueue's scheduler benchmark (kubernetes-sigs/kueue, test/performance/scheduler)
mapped onto qshare as ../shared/BENCHMARKS.md §2 says: a cohort is a service
environment with one job queue, a ClusterQueue is a quota share (maxCapacity 20,
LEND_AND_BORROW, borrowLimit 500, in-share preemption ENABLED), a workload is a
job of its size and priority. The harness starts a temporary qshare serve with
the simulated executor (unless --endpoint is given), creates the resources and
submits every job through the AWS SDK at its scheduled time, with its run time
in the payload (QSHARE_SIM_DURATION). When all have finished it reads every
job back and reports:

  wall_s            first submit to the last job's stoppedAt
  ideal_s           the same workload through the simulator (same engine, virtual clock)
  ideal_at_arrivals_s
                    the same jobs through the simulator, each due when the
                    server created it rather than at its scheduled time: the
                    ideal for the arrivals this run got, so that wall_s over
                    it is the scheduling's own share of wall_s over ideal_s
  min_share_usage   lowest share's instance-seconds used over nominal × wall_s (%)
  usage             the same over all shares (Kueue's class usage, %)
  mean_admission_s  mean createdAt → first admission per class
  preemptions       preempted attempts

next to Kueue's published means, and how the harness kept up: the submit lag
(how late it sent submits), the submits per second reached, and the CPU that
the harness and the server (when it is a child process) used while it
submitted. The jobs' requests are built before the schedule starts; one
timer releases them as they fall due, to --submitters clients that share one
SDK client. Requests go unsigned unless --sign is given (qshare checks no
signatures; signing costs the harness about a tenth of its CPU). A server given with --endpoint must use the
simulated executor, and for kueue-large-scale --max-quota-shares-per-queue 100.`,
			Example: k.example,
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				w := workload()
				report, err := runBench(cmd, "qshare bench "+w.Name, bench.KueueRows(pub, target, largeTarget), func(ctx context.Context, _ int) (any, error) {
					so := opt.Server
					so.Executor = "simulated"
					return withServerFor(ctx, opt.Endpoint, so, w.MaxSharesPerQueue, func(ep string) (any, error) {
						o := opt
						o.Workload = w
						o.Endpoint = ep
						o.ServerInProcess = inProcess && opt.Endpoint == ""
						return bench.RunKueue(ctx, o)
					})
				})
				if err != nil || svg == "" {
					return err
				}
				f, err := os.Create(svg)
				if err != nil {
					return err
				}
				if err := bench.WriteKueueAdmissionSVG(f, report, pub); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			},
		}
		f := cmd.Flags()
		f.IntVar(&opt.Submitters, "submitters", 64, "clients that submit the jobs at their scheduled times")
		f.DurationVar(&opt.Timeout, "timeout", opt.Timeout, "longest wait for every job to finish")
		f.StringVar(&svg, "svg", "", "also write a chart of mean admission per class (ideal, qshare, Kueue) to this SVG `FILE`")
		serverFlags(cmd, &opt.Endpoint, &opt.Server, &opt.Sign)
		benchCmd.AddCommand(cmd)
	}
}

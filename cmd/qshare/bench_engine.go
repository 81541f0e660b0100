package main

import (
	"context"

	"github.com/spf13/cobra"

	"qshare/bench"
)

func init() {
	opt := bench.DefaultEngineOptions()
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "The scheduling engine alone: 1,000,000 pending jobs over 1,000 shares",
		Long: `engine loads the scheduling engine with pending jobs spread over quota shares
(50 queues of 20 shares by default, each queue on its own service environment),
runs the first pass, then a steady state of passes: before each, --churn
running jobs finish and as many new jobs arrive. It reports decisions per
second spent in Schedule, the latency of one pass (p50, p99), and the
engine's heap per pending job. No server, store or clock is involved.`,
		Example: `  qshare bench engine
  qshare bench engine --pending 100000 --runs 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := runBench(cmd, "qshare bench engine", bench.EngineRows(), func(_ context.Context, i int) (any, error) {
				o := opt
				o.Seed += uint64(i)
				return bench.RunEngine(o)
			})
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Pending, "pending", opt.Pending, "pending jobs kept in the engine")
	f.IntVar(&opt.Queues, "queues", opt.Queues, "job queues, each on its own service environment")
	f.IntVar(&opt.SharesPerQueue, "shares-per-queue", opt.SharesPerQueue, "quota shares in each queue")
	f.IntVar(&opt.Passes, "passes", opt.Passes, "steady-state passes measured")
	f.IntVar(&opt.Churn, "churn", opt.Churn, "jobs that finish, and new jobs that arrive, before each pass")
	f.Uint64Var(&opt.Seed, "seed", opt.Seed, "seed of the workload (run i uses seed+i)")
	benchCmd.AddCommand(cmd)
}

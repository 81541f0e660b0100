package main

import (
	"context"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

func init() {
	opt := bench.DefaultEngineOptions()
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "The scheduling engine alone: 1,000,000 pending jobs over 1,000 shares",
		Long: `engine loads the scheduling engine with pending jobs spread over quota shares
(50 queues of 20 shares by default, each queue on its own service environment),
runs the first pass, then two steady states. In the trickle phase one running
job finishes and one arrives before each pass (the server's loop under a
steady trickle of events): it gives the latency of one pass (p50, p99). In
the batch phase --batch jobs finish and as many arrive before each pass: it
gives admissions per second of engine time and decisions per second spent in
Schedule. Preempted jobs stop at once. It also reports the engine's heap per
pending job. No server, store or clock is involved; the workload has the shape
of the engine's own benchmarks (engine/bench_test.go).`,
		Example: `  qshare bench engine
  qshare bench engine --pending 100000 --runs 3 --json`,
		Args: cobra.NoArgs,
		RunE: benchRunE("qshare bench engine", bench.RowsOf(bench.EngineResult{}), func(_ context.Context, i int) (any, error) {
			o := opt
			o.Seed += uint64(i)
			return bench.RunEngine(o)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opt.Pending, "pending", opt.Pending, "pending jobs kept in the engine")
	f.IntVar(&opt.Queues, "queues", opt.Queues, "job queues, each on its own service environment")
	f.IntVar(&opt.SharesPerQueue, "shares-per-queue", opt.SharesPerQueue, "quota shares in each queue")
	f.IntVar(&opt.LatencyPasses, "passes", opt.LatencyPasses, "passes of the trickle phase (one finish and one arrival before each), for pass latency")
	f.IntVar(&opt.BatchPasses, "batch-passes", opt.BatchPasses, "passes of the batch phase, for admissions per second")
	f.IntVar(&opt.Batch, "batch", opt.Batch, "finishes, and arrivals, before each pass of the batch phase")
	f.Uint64Var(&opt.Seed, "seed", opt.Seed, "seed of the workload (run i uses seed+i)")
	benchCmd.AddCommand(cmd)
}

package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"qshare/bench"
)

// serverFlags adds the flags of the benchmarks that talk to a server.
func serverFlags(cmd *cobra.Command, endpoint *string, so *bench.ServerOptions) {
	f := cmd.Flags()
	f.StringVar(endpoint, "endpoint", "", "benchmark a running server at this URL (http://127.0.0.1:8750) instead of starting a temporary one")
	f.StringVar(&so.Binary, "qshare", "", "qshare binary to run as the temporary server (default: this one)")
	f.StringVar(&so.LogLevel, "server-log-level", "warn", "--log-level of the temporary server")
}

func init() {
	opt := bench.SubmitOptions{Clients: 64, Duration: 10 * time.Second, Warmup: time.Second, LatencyJobs: 200}
	cmd := &cobra.Command{
		Use:   "submit",
		Short: "Durable SubmitServiceJob throughput and latency over HTTP",
		Long: `submit starts a temporary qshare serve (simulated executor, fresh data
directory, loopback port) unless --endpoint is given, and has --clients AWS SDK
clients submit jobs in a closed loop for --duration after a --warmup. Every
acknowledged submit is durable. The jobs go to a queue with one instance of
capacity, so they wait: this measures the submit path, not the executor.
It then submits --latency-jobs jobs one at a time into free capacity and
reports the server's time from createdAt to scheduledAt.`,
		Example: `  qshare bench submit --clients 64 --duration 10s
  qshare bench submit --endpoint http://127.0.0.1:8750 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := runBench(cmd, "qshare bench submit", bench.SubmitRows(), func(ctx context.Context, _ int) (any, error) {
				return bench.RunSubmit(ctx, opt)
			})
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Clients, "clients", opt.Clients, "concurrent clients")
	f.DurationVar(&opt.Duration, "duration", opt.Duration, "how long submits are measured")
	f.DurationVar(&opt.Warmup, "warmup", opt.Warmup, "how long clients submit before measuring starts")
	f.IntVar(&opt.LatencyJobs, "latency-jobs", opt.LatencyJobs, "jobs submitted one at a time to measure submit → SCHEDULED (0: skip)")
	serverFlags(cmd, &opt.Endpoint, &opt.Server)
	benchCmd.AddCommand(cmd)
}

package main

import (
	"context"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

func init() {
	opt := bench.FailoverOptions{Jobs: 100000, Failovers: 10, Clients: 64, LogLevel: "warn"}
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Time from the leader's death to the standby acknowledging a submit, on PostgreSQL",
		Long: `failover starts two qshare servers (simulated executor, loopback ports) on
the PostgreSQL store --store names, which should be an empty database: the
first leads, the second stands by. It stores --jobs waiting jobs through the
leader, then --failovers times kills the leader with SIGKILL and measures
the time until the standby, which takes the store over, loads it and
recovers, acknowledges a submit (tried every 5 ms); the killed server is
started again as a standby each time. It reports the median, fastest and
slowest takeover. See docs/high-availability.md.`,
		Example: `  qshare bench failover --store 'postgres://qshare@127.0.0.1:5432/bench?sslmode=disable'
  qshare bench failover --store "$STORE" --jobs 10000 --failovers 3 --json`,
		Args: cobra.NoArgs,
		RunE: benchRunE("qshare bench failover", bench.RowsOf(bench.FailoverResult{}), func(ctx context.Context, _ int) (any, error) {
			return bench.RunFailover(ctx, opt)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opt.Store, "store", "", "postgres:// `URL` of the (empty) database the two servers share; required")
	f.IntVar(&opt.Jobs, "jobs", opt.Jobs, "waiting jobs stored before the first failover")
	f.IntVar(&opt.Failovers, "failovers", opt.Failovers, "how many times the leader is killed")
	f.IntVar(&opt.Clients, "clients", opt.Clients, "concurrent clients that store the jobs")
	f.StringVar(&opt.Binary, "qshare", "", "qshare binary to run as the servers (default: this one)")
	f.StringVar(&opt.LogLevel, "server-log-level", opt.LogLevel, "--log-level of the servers")
	benchCmd.AddCommand(cmd)
}

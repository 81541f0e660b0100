package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
	"qshare/server"
)

// submitStore is bench submit's --store.
var submitStore string

// inProcess is --in-process: the temporary server runs inside the bench
// process, so that --cpuprofile sees the server's time too.
var inProcess bool

// serverFlags adds the flags of the benchmarks that talk to a server.
func serverFlags(cmd *cobra.Command, endpoint *string, so *bench.ServerOptions, sign *bool) {
	f := cmd.Flags()
	f.BoolVar(sign, "sign", false, "sign every request with SigV4 (placeholder credentials), as a client of AWS Batch would; by default requests go unsigned, since qshare checks no signatures and signing costs the harness CPU on the cores it shares with the server")
	f.StringVar(endpoint, "endpoint", "", "benchmark a running server at this URL (http://127.0.0.1:8750) instead of starting a temporary one")
	f.StringVar(&so.Binary, "qshare", "", "qshare binary to run as the temporary server (default: this one)")
	f.StringVar(&so.LogLevel, "server-log-level", "warn", "--log-level of the temporary server")
	f.BoolVar(&inProcess, "in-process", false, "run the temporary server inside this process (same code as qshare serve), so that --cpuprofile profiles server and clients together")
}

// withServerFor runs f against the endpoint the user gave, or, with
// --in-process, against a server started in this process for the call
// (fresh data directory, loopback port, stopped and removed afterwards).
// Otherwise f gets the empty endpoint and bench starts a child process.
func withServerFor(ctx context.Context, endpoint string, so bench.ServerOptions, maxShares int, f func(endpoint string) (any, error)) (any, error) {
	if endpoint != "" || !inProcess {
		return f(endpoint)
	}
	dir, err := os.MkdirTemp("", "qshare-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := server.DefaultSettings()
	s.Addr = "127.0.0.1:0"
	s.DataDir = filepath.Join(dir, "data")
	s.Executor = so.Executor
	s.ContainerHost = so.ContainerHost
	s.LogLevel = so.LogLevel
	if maxShares > 0 {
		s.MaxSharesPerQueue = maxShares
	}
	found := make(chan string, 1)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- server.RunReady(sctx, s, io.Discard, func(addr string) { found <- "http://" + addr }) }()
	defer func() { cancel(); <-done }()
	select {
	case ep := <-found:
		return f(ep)
	case err := <-done:
		done <- err
		return nil, fmt.Errorf("the in-process server stopped before listening: %v", err)
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("the in-process server did not listen within 30 s")
	}
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
		RunE: benchRunE("qshare bench submit", bench.SubmitRows(), func(ctx context.Context, _ int) (any, error) {
			so := opt.Server
			so.Executor = "simulated"
			if submitStore != "" {
				if opt.Endpoint != "" || inProcess {
					return nil, fmt.Errorf("--store is for the temporary server of a child process: leave out --endpoint and --in-process")
				}
				so.Args = append(so.Args[:len(so.Args):len(so.Args)], "--store", submitStore)
			}
			if so.Auth && inProcess {
				return nil, fmt.Errorf("--auth needs the temporary server of a child process: leave out --in-process")
			}
			return withServerFor(ctx, opt.Endpoint, so, 0, func(ep string) (any, error) {
				o := opt
				o.Endpoint, o.Server = ep, so
				return bench.RunSubmit(ctx, o)
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opt.Clients, "clients", opt.Clients, "concurrent clients")
	f.DurationVar(&opt.Duration, "duration", opt.Duration, "how long submits are measured")
	f.DurationVar(&opt.Warmup, "warmup", opt.Warmup, "how long clients submit before measuring starts")
	f.IntVar(&opt.LatencyJobs, "latency-jobs", opt.LatencyJobs, "jobs submitted one at a time to measure submit → SCHEDULED (0: skip)")
	serverFlags(cmd, &opt.Endpoint, &opt.Server, &opt.Sign)
	f.StringVar(&submitStore, "store", "", "the temporary server's --store `URL` (postgres://... to measure PostgreSQL; give an empty database per run); default: SQLite in its data directory")
	f.BoolVar(&opt.Server.Auth, "auth", false, "start the temporary server with authentication on (--auth: an auth file of one principal allowed everything) and sign every request with its key, to measure SigV4 verification against --sign alone or unsigned requests")
	benchCmd.AddCommand(cmd)
}

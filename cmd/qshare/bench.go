package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

// benchFlags are the flags every bench subcommand takes.
type benchFlags struct {
	json       bool
	runs       int
	cpuProfile string
}

var benchOpts benchFlags

var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure qshare against Kueue's benchmark, Slurm, and its own targets",
	Long: `bench runs one benchmark and prints a table of its figures, or with --json
one JSON object. With --runs N it repeats the benchmark N times and reports
the median of each figure with its spread (min–max).

  kueue-baseline     Kueue's scheduler benchmark (15,000 jobs) against a real server
  kueue-large-scale  the same at 1,000 shares and 50,000 jobs
  e2e                trivial jobs end to end through the process executor (--vs-slurm)
  kube               one-pod jobs through the Kubernetes executor into a test API server
  submit             durable SubmitServiceJob throughput and latency over HTTP
  engine             the scheduling engine alone at 1,000,000 pending jobs

docs/performance.md records the figures of each, with the command
(docs/kubernetes.md those of kube).`,
	Example: `  qshare bench engine --runs 3
  qshare bench e2e --jobs 600 --clients 4 --vs-slurm --json`,
}

func init() {
	pf := benchCmd.PersistentFlags()
	pf.BoolVar(&benchOpts.json, "json", false, "print one JSON object instead of a table")
	pf.IntVar(&benchOpts.runs, "runs", 1, "repeat the benchmark this many times and report medians with their spread")
	pf.StringVar(&benchOpts.cpuProfile, "cpuprofile", "", "write a CPU profile of this process to `FILE` (go tool pprof FILE)")
	rootCmd.AddCommand(benchCmd)
}

// benchContext is cancelled on SIGINT and SIGTERM, so that a benchmark
// stops its servers and clusters before exiting.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// runBench runs a benchmark benchOpts.runs times, aggregates the results,
// prints them as a table or JSON, and returns the aggregated report. With
// several runs it tells the user on stderr which run is going.
func runBench(cmd *cobra.Command, title string, rows []bench.Row, run func(ctx context.Context, i int) (any, error)) (map[string]any, error) {
	if benchOpts.runs < 1 {
		return nil, fmt.Errorf("--runs must be at least 1, got %d", benchOpts.runs)
	}
	ctx, cancel := benchContext()
	defer cancel()
	if benchOpts.cpuProfile != "" {
		f, err := os.Create(benchOpts.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	var results []any
	for i := range benchOpts.runs {
		if benchOpts.runs > 1 {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: run %d of %d\n", title, i+1, benchOpts.runs)
		}
		r, err := run(ctx, i)
		if err != nil && benchOpts.runs > 1 {
			return nil, fmt.Errorf("run %d of %d: %w", i+1, benchOpts.runs, err)
		}
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	report, err := bench.Aggregate(results)
	if err != nil {
		return nil, err
	}
	return report, printReport(cmd.OutOrStdout(), title, report, rows)
}

// benchRunE is the RunE of a bench subcommand that only prints the report
// of runBench.
func benchRunE(title string, rows []bench.Row, run func(ctx context.Context, i int) (any, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		_, err := runBench(cmd, title, rows, run)
		return err
	}
}

func printReport(w io.Writer, title string, report map[string]any, rows []bench.Row) error {
	if benchOpts.json {
		return bench.WriteJSON(w, report)
	}
	return bench.Table(w, title, report, rows)
}

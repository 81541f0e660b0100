package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"qshare"
	"qshare/event"
)

func init() {
	var (
		cfgPath   string
		settle    float64
		maxShares int
		output    string
	)
	cmd := &cobra.Command{
		Use:   "check-events FILE --config CONFIG",
		Short: "Check an event log against the scheduler's guarantees",
		Long: `check-events replays an event log (from "qshare simulate --events" or
"qshare serve --events") against a configuration, and reports every moment
the scheduler broke one of its guarantees, with the time and the jobs
involved:

  environment-capacity   usage of a type above the environment's limit
  share-limit            a LEND or RESERVE share above its own maxCapacity
  borrow-cap             a LEND_AND_BORROW share above maxCapacity + borrowLimit
  borrow-source          borrowed capacity that came from a RESERVE share's
                         idle capacity (or from nowhere)
  head-waits             a share's head job waiting while it fits its share's
                         own maxCapacity and the environment has free room
                         (capacity held by a stopping job is not free)
  reserve-preempted      a job of a RESERVE share without in-share
                         preemption preempted
  in-share-priority      an in-share preemption of an equal or higher priority
  reclaim-victim         a cross-share victim from a share within its own capacity
  preempted-for-nothing  a job preempted for another that then never started
  double-hold            a job holding capacity twice at once
  log                    an inconsistent log (time going back, a job giving
                         back what it does not hold, an unknown share)

It exits with status 1 when it finds a violation. The configuration is the
file that "qshare apply" takes; it must be the one the log was made under
(a log that spans configuration changes is checked against one of them).
Reading the configuration from a server (--endpoint) is not there yet.`,
		Example: `  qshare simulate --config examples/three-shares.yaml --trace examples/three-shares-trace.csv --events events.jsonl
  qshare check-events events.jsonl --config examples/three-shares.yaml

  # A server's log: its pass runs a moment after the change that allows it
  qshare check-events /var/lib/qshare/events.jsonl --config fleet.yaml --settle 1 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfigFile(cfgPath, maxShares)
			if err != nil {
				return err
			}
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return qshare.Errorf(qshare.EINVALID, "cannot read the event log: %v", err)
				}
				defer f.Close()
				in = f
			}
			vs, sum, err := event.Check(cfg, in, event.CheckOptions{Settle: settle})
			if err != nil {
				return qshare.Errorf(qshare.EINVALID, "%s: %v", args[0], err)
			}
			out := cmd.OutOrStdout()
			if vs == nil {
				vs = []event.Violation{}
			}
			result := struct {
				Summary    event.Summary     `json:"summary"`
				Violations []event.Violation `json:"violations"`
			}{sum, vs}
			err = emitAs(out, output, result, func(w io.Writer) error {
				for _, v := range vs {
					fmt.Fprintln(w, v)
				}
				if sum.Violations > len(vs) {
					fmt.Fprintf(w, "... and %d more\n", sum.Violations-len(vs))
				}
				_, err := fmt.Fprintf(w, "%d lines, %d jobs, %d starts, %d preemptions, %d finishes, %d failures: %d violations\n",
					sum.Lines, sum.Jobs, sum.Starts, sum.Preempts, sum.Finishes, sum.Fails, sum.Violations)
				return err
			})
			if err != nil {
				return err
			}
			if sum.Violations > 0 {
				return errViolations
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfgPath, "config", "", "the configuration the log was made under (YAML or JSON)")
	fl.Float64Var(&settle, "settle", 0, "seconds a fitting head job may wait before it counts (0 for a simulation's log)")
	fl.IntVar(&maxShares, "max-shares-per-queue", qshare.DefaultQuotaSharesPerQueue, "the most quota shares a job queue may have (a server's configured limit)")
	fl.StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	cmd.MarkFlagRequired("config")
	cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	rootCmd.AddCommand(cmd)
}

// errViolations makes check-events exit non-zero after it has printed them.
var errViolations = violationsError{}

type violationsError struct{}

func (violationsError) Error() string { return "the event log breaks the scheduler's guarantees" }

// Command qshare is the one binary of qshare: the server (serve), the
// command line that drives it through the AWS Batch API, the guided demo,
// the simulator and the benchmarks.
//
// Each subcommand lives in its own file and adds itself to rootCmd in an
// init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"qshare/executor/process"
)

// rootCmd is the qshare command; subcommands register themselves on it.
var rootCmd = &cobra.Command{
	Use:   "qshare",
	Short: "Quota-share GPU scheduling with the AWS Batch service-job API",
	Long: `qshare splits a shared GPU fleet between teams. Each team gets a quota
share: a capacity limit per instance type and a rule for its idle capacity
(RESERVE, LEND, LEND_AND_BORROW). qshare lends idle capacity, takes it back
when the lender's jobs arrive, and preempts within a share by priority.

It speaks the AWS Batch service-job API, so the AWS SDKs and CLI drive it.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	// No descriptor this process was started with reaches a supervisor,
	// and so a job (the supervisor and the step runner do it again).
	process.CloseInheritedOnExec()
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "qshare:", err)
		os.Exit(1)
	}
}

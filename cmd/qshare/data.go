package main

import (
	"os"

	"github.com/spf13/cobra"

	"qshare/executor/kubernetes"
)

var dataCmd = &cobra.Command{
	Use:   "data",
	Short: "SageMaker's data contract inside a pod (the Kubernetes executor's init container)",
	Long: `data holds what qshare's own image runs inside the pods of the Kubernetes
executor (docs/kubernetes.md, "S3 data"). You do not run it by hand.`,
}

var dataStageCmd = &cobra.Command{
	Use:   "stage --config FILE [--instance K] [--install DIR]",
	Short: "Stage a pod's share of a job's S3 channels, and install qshare for its data wrapper",
	Long: `stage is the init container of a Kubernetes pod whose job has S3 data: it
reads the attempt's data configuration (--config, a file of the attempt's
Secret), copies this binary into --install for the training container's data
wrapper, and downloads instance K's share of the job's S3 channels beneath
/opt/ml/input/data. A failure is written to /opt/ml/output/failure, the pod's
termination message, in SageMaker's words.`,
	DisableFlagParsing: true,
	Run: func(cmd *cobra.Command, args []string) {
		os.Exit(kubernetes.StageMain(args, cmd.ErrOrStderr()))
	},
}

func init() {
	dataCmd.AddCommand(dataStageCmd)
	rootCmd.AddCommand(dataCmd)
}

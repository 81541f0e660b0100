package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"qshare"
	"qshare/config"
	"qshare/plan"
)

// The apply command is flag wiring and output: package plan reads the
// server, plans and carries out the changes.

var applyOpts struct {
	file      string
	dryRun    bool
	prune     bool
	wait      time.Duration
	maxShares int
}

var applyCmd = &cobra.Command{
	Use:   "apply -f FILE [--dry-run] [--prune]",
	Short: "Make the server's environments, policies, queues and shares match a file",
	Long: `Declare service environments, scheduling policies, job queues and their quota
shares in one YAML (or JSON) file, with the AWS Batch API's own names as keys
(see docs/configuration.md), and apply it: qshare creates what is missing,
updates what differs, and prints what it did.

The file is checked as a whole first; every problem is reported with its
line and field, and nothing is changed until there are none.

With --prune, apply also deletes every quota share, job queue, scheduling
policy and service environment that the file does not name, disabling each
first where the API requires it and waiting for it to be gone. With
--dry-run it prints what it would do and changes nothing.

Tags in the file replace the resource's tags; a resource whose entry has no
tags keeps the tags it has.`,
	Example: `  # See what would change, then change it:
  qshare apply -f examples/three-shares.yaml --dry-run
  qshare apply -f examples/three-shares.yaml

  # Also delete what the file no longer names:
  qshare apply -f examples/three-shares.yaml --prune`,
	Args: cobra.NoArgs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, _ []string) error {
		if applyOpts.file == "" {
			return qshare.Errorf(qshare.EINVALID, "-f FILE is required: name the configuration file to apply (- for standard input)")
		}
		data, err := readConfigFile(applyOpts.file, cmd.InOrStdin())
		if err != nil {
			return err
		}
		opts := plan.Options{DryRun: applyOpts.dryRun, Prune: applyOpts.prune, Wait: applyOpts.wait,
			Plans: &plan.PlanClient{Endpoint: s.endpoint, HTTP: s.http}}
		if s.output == "table" {
			opts.Progress = s.out
		}
		a := plan.New(s.api, opts)
		actions, err := a.Apply(cmd.Context(), applyOpts.file, data, config.Options{MaxSharesPerQueue: applyOpts.maxShares, AllowExternalReferences: true})
		var ae *plan.ActionError
		if errors.As(err, &ae) {
			return fmt.Errorf("%s %s: %w", ae.Kind, ae.Name, userError(ae.Err, s.endpoint))
		}
		if err != nil {
			return err
		}
		return s.emit(actions, func(w io.Writer) error {
			if len(actions) == 0 {
				_, err := fmt.Fprintln(w, "the file declares nothing")
				return err
			}
			return nil // printed as they happened
		})
	}),
}

func init() {
	f := applyCmd.Flags()
	f.StringVarP(&applyOpts.file, "filename", "f", "", "the configuration file (YAML or JSON; - for standard input)")
	f.BoolVar(&applyOpts.dryRun, "dry-run", false, "print what would change, and change nothing")
	f.BoolVar(&applyOpts.prune, "prune", false, "also delete every resource that the file does not name")
	f.DurationVar(&applyOpts.wait, "wait", time.Minute, "how long to wait for a resource to reach the state the next step needs")
	f.IntVar(&applyOpts.maxShares, "max-quota-shares-per-queue", qshare.DefaultQuotaSharesPerQueue, "the server's limit of quota shares per job queue")
	_ = applyCmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	addClientFlags(applyCmd)
	rootCmd.AddCommand(applyCmd)
}

// readConfigFile reads the file to apply, or standard input for "-".
func readConfigFile(path string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the configuration: %v", err)
	}
	return b, nil
}

package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"qshare/shareview"
)

var sharesQueue string

var sharesCmd = &cobra.Command{
	Use:   "shares [--queue QUEUE]",
	Short: "Show who owns, uses, lends and borrows capacity, and why jobs wait",
	Long: `Show each quota share's capacity, per instance type, as one bar:

  [█▓░]▒   █ in use by its own jobs, ▓ lent to another share, ░ idle,
           [ ] what the share owns, ▒ borrowed beyond it

with, in words, whom it lends to and borrows from, its running jobs, how
many jobs wait, and the job at its head with why it waits.

Who lends to whom is the scheduler's own attribution, which the AWS Batch
API does not report: qshare reads it from the server's extension endpoint
GET /qshare/v1/lending (see docs/api.md). Borrowed capacity is charged, per
instance type, to the environment's capacity that no share owns first, then
to the idle capacity of lending shares in name order (see docs/concepts.md).`,
	Example: `  qshare shares
  qshare shares --queue training -o json`,
	Args: cobra.NoArgs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, _ []string) error {
		views, err := s.shareViews(cmd.Context(), sharesQueue)
		if err != nil {
			return err
		}
		return s.emit(views, func(w io.Writer) error { return shareview.Render(w, views) })
	}),
}

func init() {
	sharesCmd.Flags().StringVarP(&sharesQueue, "queue", "q", "", "show this job queue only (default: every queue with quota shares)")
	addClientFlags(sharesCmd)
	_ = sharesCmd.RegisterFlagCompletionFunc("queue", completeQueues)
	rootCmd.AddCommand(sharesCmd)
}

// shareViews fetches and computes the view of one queue, or of all.
func (s *session) shareViews(ctx context.Context, queue string) ([]shareview.View, error) {
	inputs, err := shareview.Fetch(ctx, s.api, &shareview.LendingClient{Endpoint: s.endpoint, HTTP: s.http}, queue)
	if err != nil {
		return nil, err
	}
	views := make([]shareview.View, 0, len(inputs))
	for _, in := range inputs {
		views = append(views, shareview.Compute(in))
	}
	return views, nil
}

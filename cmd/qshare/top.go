package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"qshare"
	"qshare/shareview"
)

var topOpts struct {
	queue      string
	interval   time.Duration
	iterations int
}

var topCmd = &cobra.Command{
	Use:   "top [--queue QUEUE] [--interval D]",
	Short: "Watch the shares view, refreshed until interrupted",
	Long: `Show the picture of qshare shares and redraw it every --interval until you
press Ctrl-C. With -o json or -o yaml it writes one document per refresh
instead, for a program to read.`,
	Example: `  qshare top --queue training --interval 1s`,
	Args:    cobra.NoArgs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, _ []string) error {
		if topOpts.interval <= 0 {
			return qshare.Errorf(qshare.EINVALID, "--interval %s is not valid: give a positive duration such as 2s", topOpts.interval)
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		for i := 0; topOpts.iterations <= 0 || i < topOpts.iterations; i++ {
			if i > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(topOpts.interval):
				}
			}
			views, err := s.shareViews(ctx, topOpts.queue)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			err = s.emit(views, func(w io.Writer) error {
				if isTerminal(w) {
					// Home the cursor and clear the screen, then draw.
					fmt.Fprint(w, "\x1b[H\x1b[2J")
				} else if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "%s  (every %s; Ctrl-C to stop)\n\n", s.now().Format("15:04:05"), topOpts.interval)
				return shareview.Render(w, views)
			})
			if err != nil {
				return err
			}
			if s.output == "json" {
				continue
			}
			if s.output == "yaml" {
				fmt.Fprintln(s.out, "---")
			}
		}
		return nil
	}),
}

// isTerminal reports whether w is a terminal (a character device), where
// top redraws in place; elsewhere it appends one picture after another.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func init() {
	f := topCmd.Flags()
	f.StringVarP(&topOpts.queue, "queue", "q", "", "show this job queue only (default: every queue with quota shares)")
	f.DurationVar(&topOpts.interval, "interval", 2*time.Second, "how often to refresh")
	f.IntVarP(&topOpts.iterations, "iterations", "n", 0, "stop after this many refreshes (default: until interrupted)")
	addClientFlags(topCmd)
	_ = topCmd.RegisterFlagCompletionFunc("queue", completeQueues)
	rootCmd.AddCommand(topCmd)
}

package slurm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"qshare/executor"
)

// Logs returns the attempt's output: the batch job's --output file in the
// shared directory, opened without following links. Without follow it ends
// at what was written by the call; with follow it ends once Slurm reports
// the job ended and all its output is read. An attempt whose job has not
// started has an empty log.
func (e *Executor) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	if pathComponent("attempt ID", attemptID) != nil {
		return nil, executor.ErrUnknownAttempt
	}
	e.mu.Lock()
	a := e.attempts[attemptID]
	e.mu.Unlock()
	dir := e.attemptDir(attemptID)
	if a == nil && !e.fs.IsFile(filepath.Join(dir, "job.json")) {
		return nil, executor.ErrUnknownAttempt
	}
	path := filepath.Join(dir, "output.log")
	lf, err := executor.OpenLogFile(func() (*os.File, error) { return e.fs.OpenLog(attemptID, path) }, a.ended)
	if err != nil {
		return nil, err
	}
	if !follow {
		lf.StopHere()
	}
	return executor.NewLogTail(ctx, lf, follow, 100*time.Millisecond), nil
}

// ended reports whether attempt a has ended; an attempt not watched by this
// executor (nil) is not followed.
func (a *attempt) ended() bool {
	if a == nil {
		return true
	}
	select {
	case <-a.Done:
		return true
	default:
		return false
	}
}

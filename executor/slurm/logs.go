package slurm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/process"
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
	r := &logReader{e: e, a: a, path: filepath.Join(dir, "output.log"), follow: follow, ctx: ctx, limit: -1}
	if err := r.open(); err != nil {
		return nil, err
	}
	if !follow {
		r.limit = 0
		if r.f != nil {
			if st, err := r.f.Stat(); err == nil {
				r.limit = st.Size()
			}
		}
	}
	return r, nil
}

type logReader struct {
	e      *Executor
	a      *attempt // nil: not watched by this executor, so not followed
	path   string
	follow bool
	ctx    context.Context
	f      *os.File
	limit  int64 // bytes left without follow; -1 with follow
	closed bool
}

func (r *logReader) open() error {
	f, err := r.e.fs.OpenFile(r.path, os.O_RDONLY, 0)
	switch {
	case err == nil:
		r.f = f
	case process.IsLinkError(err):
		return qshare.Errorf(qshare.EINVALID, "the attempt's output.log in the shared directory is a link, or not what Slurm wrote there: it is not served")
	case !isNotExist(err):
		return qshare.Errorf(qshare.EINTERNAL, "slurm executor: opening the attempt's log: %v", err)
	}
	return nil
}

func (r *logReader) ended() bool {
	if r.a == nil {
		return true
	}
	select {
	case <-r.a.Done:
		return true
	default:
		return false
	}
}

func (r *logReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, os.ErrClosed
	}
	if !r.follow {
		if r.f == nil || r.limit <= 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > r.limit {
			p = p[:r.limit]
		}
		n, err := r.f.Read(p)
		r.limit -= int64(n)
		if err == io.EOF && n > 0 {
			err = nil
		}
		return n, err
	}
	for {
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		// Whether the job had ended is asked before reading, so that what
		// it wrote before its end is all read before io.EOF.
		done := r.ended()
		if r.f == nil {
			if err := r.open(); err != nil {
				return 0, err
			}
		}
		if r.f != nil {
			n, err := r.f.Read(p)
			if n > 0 {
				return n, nil
			}
			if err != nil && err != io.EOF {
				return 0, err
			}
		}
		if done {
			return 0, io.EOF
		}
		select {
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *logReader) Close() error {
	r.closed = true
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

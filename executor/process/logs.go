package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"qshare"
	"qshare/executor"
)

// MaxRotated is the most rotated files (output.log.MaxRotated …
// output.log.1) that Logs returns before the current one: more than any
// LogKeep a server was started with is looked for, so that a log written
// under another setting is served whole.
const MaxRotated = 20

// Logs returns the output of an attempt from its files in the attempt's
// directory: the files rotated out (output.log.K … output.log.1), then
// output.log. Every file is opened beneath the data directory without
// following links, and must be a regular file: a job that replaced one with
// a link (or a FIFO) gets a *qshare.Error EINVALID instead of what the link
// points to. With follow, the reader polls for what is written next (every
// PollInterval), takes the next file when the log rotates, and ends once
// the attempt has ended (for an attempt this executor does not hold in
// memory, once its records say so, or nothing of it is alive). It serves
// attempts that were forgotten or started before a restart, from disk.
func (e *Executor) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	if pathComponent("attempt ID", attemptID) != nil {
		return nil, executor.ErrUnknownAttempt
	}
	var a *attempt
	e.mu.Lock()
	if x, ok := e.attempts[attemptID]; ok {
		select {
		case <-x.Ready:
			if x.StartErr == nil {
				a = x
			}
		default:
		}
	}
	e.mu.Unlock()
	dir := ""
	if a != nil {
		e.mu.Lock()
		dir = a.st.Dir
		e.mu.Unlock()
	}
	if dir == "" || !e.fs.IsDir(dir) {
		dir = e.findDir(attemptID)
	}
	if dir == "" {
		return nil, executor.ErrUnknownAttempt
	}
	path := filepath.Join(dir, fileOutput)
	r := &logReader{e: e, ctx: ctx, a: a, id: attemptID, dir: dir, path: path, follow: follow, closed: make(chan struct{})}
	if _, err := r.reopen(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// openLog opens one file of an attempt's log; nil and no error when it does
// not exist (the current file is created at the job's first output).
func (e *Executor) openLog(attemptID, path string) (*os.File, error) {
	f, err := e.fs.OpenFile(path, os.O_RDONLY, 0)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case isLinkErr(err):
		return nil, qshare.Errorf(qshare.EINVALID, "the log of attempt %s is not served: %s is not a regular file that qshare wrote (a link or another file was planted in its place)", attemptID, filepath.Base(path))
	}
	return nil, qshare.Errorf(qshare.EINTERNAL, "process executor: reading the log of attempt %s: %v", attemptID, err)
}

// logReader reads an attempt's log files in turn. files holds the files not
// yet read to their end, oldest first; a follow goes on reading the last of
// them until reopen finds a newer one.
type logReader struct {
	e      *Executor
	ctx    context.Context
	a      *attempt // nil: not in memory; its end is judged from disk
	id     string
	dir    string
	path   string
	follow bool

	files []*os.File
	last  os.FileInfo // the newest file queued (read or not), to tell the files after it
	done  bool        // the attempt has ended and the files were read once more since

	mu        sync.Mutex // held by Read except while it waits; Close takes it to close the files
	closed    chan struct{}
	closeOnce sync.Once
}

// Read implements io.Reader. It may block, with follow, until more output
// is written; Close from another goroutine ends the wait.
func (r *logReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		select {
		case <-r.closed:
			return 0, io.EOF
		default:
		}
		if len(r.files) > 0 {
			n, err := r.files[0].Read(p)
			if n > 0 {
				return n, nil
			}
			if err != nil && err != io.EOF {
				return 0, err
			}
			if len(r.files) > 1 || !r.follow {
				r.files[0].Close()
				r.files = r.files[1:]
				continue
			}
		}
		// At the end of what is written.
		if !r.follow || r.done {
			return 0, io.EOF
		}
		ended := r.ended()
		rotated, err := r.reopen()
		if err != nil {
			return 0, err
		}
		if rotated {
			continue
		}
		if ended {
			r.done = true // read what is left once more, then stop
			continue
		}
		r.mu.Unlock()
		executor.PollPause(r.ctx, r.closed, r.e.o.PollInterval)
		r.mu.Lock()
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// reopen looks whether output.log is a new file (it was created, or the log
// rotated) and queues it after the one being read, which is drained first.
// The log may have rotated more than once since the last look: the files
// rotated out after the one being read (output.log.K-1 … output.log.1, where
// that one is now output.log.K) are queued before it, so no output is lost
// while the rotated files are kept. The first call, with nothing read yet,
// queues every file of the log.
//
// The log may also rotate while reopen looks. output.log is opened first and
// the rotated files are then opened upward from output.log.1: a rotation
// only moves files to higher numbers, so one that moves during the look is
// met again (and queued once, by its identity) rather than skipped.
func (r *logReader) reopen() (bool, error) {
	f, err := r.e.openLog(r.id, r.path)
	if err != nil {
		return false, err
	}
	held := r.last
	if f != nil && held != nil {
		if b, err := f.Stat(); err == nil && os.SameFile(held, b) {
			f.Close()
			return false, nil
		}
	}
	found := []*os.File{} // newest first: output.log, output.log.1, … up to the one held
	if f != nil {
		found = append(found, f)
	}
	closeAll := func() {
		for _, g := range found {
			g.Close()
		}
	}
	for k := 1; k <= MaxRotated; k++ {
		g, err := r.e.openLog(r.id, fmt.Sprintf("%s.%d", r.path, k))
		if err != nil {
			closeAll()
			return false, err
		}
		if g == nil {
			continue
		}
		if st, err := g.Stat(); err == nil && held != nil && os.SameFile(held, st) {
			g.Close()
			break
		}
		found = append(found, g)
	}
	if len(found) == 0 {
		return false, nil
	}
	var seen []os.FileInfo
	for i := len(found) - 1; i >= 0; i-- {
		g := found[i]
		st, err := g.Stat()
		if err != nil {
			g.Close()
			continue
		}
		dup := false
		for _, s := range seen {
			if os.SameFile(s, st) {
				dup = true
				break
			}
		}
		if dup {
			g.Close() // met twice: the log rotated while reopen looked
			continue
		}
		seen = append(seen, st)
		r.files = append(r.files, g)
		r.last = st
	}
	return true, nil
}

// ended reports whether the attempt has ended, so that its log is complete.
func (r *logReader) ended() bool {
	if r.a != nil {
		select {
		case <-r.a.Done:
			return true
		default:
			return false
		}
	}
	rec := readRecords(r.e.fs, r.dir)
	switch {
	case rec.exit != nil:
		return true
	case rec.launch == nil || rec.launch.Lost:
		return true // never launched, or fenced off: nothing writes to it
	case rec.started != nil:
		return !rec.started.Supervisor.alive() && !rec.started.Job.alive()
	}
	return !rec.launch.Supervisor.alive()
}

// Close ends the reader (a Read waiting for output returns io.EOF) and
// closes its files.
func (r *logReader) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
	return nil
}

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	lf := &logFiles{e: e, a: a, id: attemptID, dir: dir, path: path}
	if _, err := lf.Reopen(); err != nil {
		lf.Close()
		return nil, err
	}
	return executor.NewLogTail(ctx, lf, follow, e.o.PollInterval), nil
}

// openLog opens one file of an attempt's log beneath fs's root; nil and no
// error when it does not exist (the current file is created at the job's
// first output). A link or anything else than a regular file in its place
// is refused with a *qshare.Error EINVALID that names only the file.
func openLog(fs dataFS, attemptID, path string) (*os.File, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case isLinkErr(err):
		return nil, qshare.Errorf(qshare.EINVALID, "the log of attempt %s is not served: %s is not the regular file that was written there (a link or another file was planted in its place)", attemptID, filepath.Base(path))
	}
	return nil, qshare.Errorf(qshare.EINTERNAL, "reading the log of attempt %s: %v", attemptID, err)
}

// logFiles are an attempt's log files. files holds the files not yet read
// to their end, oldest first; a follow goes on reading the last of them
// until Reopen finds a newer one.
type logFiles struct {
	e    *Executor
	a    *attempt // nil: not in memory; its end is judged from disk
	id   string
	dir  string
	path string

	files []*os.File
	last  os.FileInfo // the newest file queued (read or not), to tell the files after it
}

// Read reads the files in turn, closing each read to its end but the last.
func (r *logFiles) Read(p []byte) (int, error) {
	for len(r.files) > 0 {
		n, err := r.files[0].Read(p)
		if n > 0 || (err != nil && err != io.EOF) || len(r.files) == 1 {
			return n, err
		}
		r.files[0].Close()
		r.files = r.files[1:]
	}
	return 0, io.EOF
}

// Reopen looks whether output.log is a new file (it was created, or the log
// rotated) and queues it after the one being read, which is drained first.
// The log may have rotated more than once since the last look: the files
// rotated out after the one being read (output.log.K-1 … output.log.1, where
// that one is now output.log.K) are queued before it, so no output is lost
// while the rotated files are kept. The first call, with nothing read yet,
// queues every file of the log.
//
// The log may also rotate while Reopen looks. output.log is opened first and
// the rotated files are then opened upward from output.log.1: a rotation
// only moves files to higher numbers, so one that moves during the look is
// met again (and queued once, by its identity) rather than skipped.
func (r *logFiles) Reopen() (bool, error) {
	f, err := openLog(r.e.fs, r.id, r.path)
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
		g, err := openLog(r.e.fs, r.id, fmt.Sprintf("%s.%d", r.path, k))
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
			g.Close() // met twice: the log rotated while Reopen looked
			continue
		}
		seen = append(seen, st)
		r.files = append(r.files, g)
		r.last = st
	}
	return true, nil
}

// Ended reports whether the attempt has ended, so that its log is complete.
func (r *logFiles) Ended() bool {
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

// Close closes the files.
func (r *logFiles) Close() error {
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
	return nil
}

package executor

import (
	"context"
	"io"
	"os"
	"sync"
	"time"
)

// LogFiles are the files of an attempt's log, which the attempt may still
// be writing, as an executor keeps them; a LogTail reads them.
type LogFiles interface {
	// Read reads from the files opened so far: io.EOF at the end of what
	// they hold now.
	Read(p []byte) (int, error)
	// Reopen opens what of the log is new since the last look (the file
	// was created, or the log rotated); true when it found more to read.
	Reopen() (bool, error)
	// Ended reports whether the attempt has ended, so that nothing more
	// will be written to the log.
	Ended() bool
	// Close closes the files.
	Close() error
}

// LogTail is the reader an executor's Logs returns over its LogFiles.
// Without follow it ends at the end of what the files hold. With follow
// it waits for more output, looking every poll, until the attempt has
// ended and its files were read once more since; until ctx is done; or
// until Close, from any goroutine, which ends a Read that waits.
type LogTail struct {
	ctx    context.Context
	files  LogFiles
	follow bool
	poll   time.Duration

	mu        sync.Mutex // held by Read except while it waits; Close takes it to close the files
	done      bool       // the attempt has ended and the files were read once more since
	closed    chan struct{}
	closeOnce sync.Once
}

// NewLogTail returns the reader of files, whose first look (Reopen) the
// caller has made.
func NewLogTail(ctx context.Context, files LogFiles, follow bool, poll time.Duration) *LogTail {
	return &LogTail{ctx: ctx, files: files, follow: follow, poll: poll, closed: make(chan struct{})}
}

// Read implements io.Reader.
func (t *LogTail) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		select {
		case <-t.closed:
			return 0, io.EOF
		default:
		}
		n, err := t.files.Read(p)
		if n > 0 {
			return n, nil
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
		// At the end of what is written.
		if !t.follow || t.done {
			return 0, io.EOF
		}
		// Whether the attempt had ended is asked before the look for new
		// files, so that what it wrote before its end is all read.
		ended := t.files.Ended()
		more, err := t.files.Reopen()
		if err != nil {
			return 0, err
		}
		if more {
			continue
		}
		if ended {
			t.done = true // read what is left once more, then stop
			continue
		}
		t.mu.Unlock()
		pollPause(t.ctx, t.closed, t.poll)
		t.mu.Lock()
		if err := t.ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// Close ends the reader (a Read that waits returns io.EOF) and closes its
// files.
func (t *LogTail) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files.Close()
}

// pollPause returns after d, or as soon as ctx ends or closed is closed
// (the reader was closed), whichever comes first.
func pollPause(ctx context.Context, closed <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-closed:
	}
}

// LogFile is the LogFiles of a log kept in one file, which may not be
// there yet.
type LogFile struct {
	open  func() (*os.File, error)
	ended func() bool
	f     *os.File // nil until the file is there
	limit int64    // bytes left to read; -1: no limit
}

// OpenLogFile returns the LogFile that open opens (nil and no error while
// the file is not there) and whose attempt has ended when ended says so;
// it opens the file if it is there.
func OpenLogFile(open func() (*os.File, error), ended func() bool) (*LogFile, error) {
	l := &LogFile{open: open, ended: ended, limit: -1}
	if _, err := l.Reopen(); err != nil {
		return nil, err
	}
	return l, nil
}

// StopHere ends the reads at what the file holds now, for a reader that
// does not follow.
func (l *LogFile) StopHere() {
	l.limit = 0
	if l.f != nil {
		if st, err := l.f.Stat(); err == nil {
			l.limit = st.Size()
		}
	}
}

// Read implements LogFiles.
func (l *LogFile) Read(p []byte) (int, error) {
	if l.f == nil || l.limit == 0 {
		return 0, io.EOF
	}
	if l.limit > 0 && int64(len(p)) > l.limit {
		p = p[:l.limit]
	}
	n, err := l.f.Read(p)
	if l.limit > 0 {
		l.limit -= int64(n)
	}
	return n, err
}

// Reopen implements LogFiles: it opens the file once it is there.
func (l *LogFile) Reopen() (bool, error) {
	if l.f != nil {
		return false, nil
	}
	f, err := l.open()
	l.f = f
	return f != nil, err
}

// Ended implements LogFiles.
func (l *LogFile) Ended() bool { return l.ended() }

// Close implements LogFiles.
func (l *LogFile) Close() error {
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	return f.Close()
}

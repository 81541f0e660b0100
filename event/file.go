package event

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"qshare/periodic"
)

// File is an event log on disk that a server appends to (qshare serve
// --events): lines are only ever added. It is the daemon's file sink
// (daemon.EventSink, whose contract it keeps). Each Append is one write, so
// a batch is in the file (in the kernel's hands) when Append returns and
// survives a crash of the process; the file is also fsync'd within
// SyncEvery of an append, and on Close, so that it survives a crash of the
// machine a moment later. A write that fails is cut off again, so a failed
// Append leaves nothing of its batch. A line that a crash cut short is
// removed at Open: it was never complete, so nothing read it. File is safe
// for concurrent use.
type File struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	buf   []byte
	size  int64 // the file's length after the last whole batch
	dirty bool
	// broken, once set, fails every later Append: a failed write could not
	// be cut off, so what follows would not be whole lines.
	broken error
	stop   chan struct{}
	done   chan struct{}
}

// SyncEvery is how long an appended batch may wait for its fsync.
const SyncEvery = 200 * time.Millisecond

// OpenFile opens (creating if needed, 0600: it names every job and share)
// the event log at path for appending.
func OpenFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	if err := dropTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("event log %s: %w", path, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("event log %s: %w", path, err)
	}
	l := &File{f: f, path: path, size: size, stop: make(chan struct{}), done: make(chan struct{})}
	go l.syncer()
	return l, nil
}

// dropTornLine truncates the file after its last newline.
func dropTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(0, end-chunk)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := start + int64(i) + 1
			if keep == size {
				return nil
			}
			return f.Truncate(keep)
		}
		end = start
	}
	return f.Truncate(0)
}

// Path returns the file's path.
func (l *File) Path() string { return l.path }

// BadLinesError says which lines of a log could not be read (and were
// skipped).
type BadLinesError struct {
	Path  string
	Lines []*LineError
}

func (e *BadLinesError) Error() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event log %s: %d unreadable lines skipped:", e.Path, len(e.Lines))
	for i, l := range e.Lines {
		if i == 10 {
			fmt.Fprintf(&b, " ...")
			break
		}
		fmt.Fprintf(&b, " %s;", l)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte(";")))
}

// Events calls fn with every event in the file, oldest first. A line that
// cannot be read is skipped: the rest are still passed to fn, and Events
// then returns a *BadLinesError that names the skipped lines.
func (l *File) Events(fn func(Event)) error {
	f, err := os.Open(l.path)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	defer f.Close()
	var bad []*LineError
	err = NewReader(f).each(func(e Event, _ int) { fn(e) }, func(le *LineError) { bad = append(bad, le) })
	if err != nil {
		return fmt.Errorf("event log %s: %w", l.path, err)
	}
	if len(bad) > 0 {
		return &BadLinesError{Path: l.path, Lines: bad}
	}
	return nil
}

// Append writes evs as one batch of lines, with one write. If the write
// fails, whatever part of the batch it wrote is cut off again, so the file
// keeps only whole batches; if even that fails, this and every later Append
// return the error (a restart drops a torn last line and goes on).
func (l *File) Append(evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("event log: closed")
	}
	if l.broken != nil {
		return l.broken
	}
	l.buf = l.buf[:0]
	for _, e := range evs {
		l.buf = Append(l.buf, e)
		l.buf = append(l.buf, '\n')
	}
	n, err := l.f.Write(l.buf)
	if err != nil {
		err = fmt.Errorf("event log %s: %w", l.path, err)
		if n > 0 {
			if terr := l.cutOff(); terr != nil {
				l.broken = fmt.Errorf("%w; and the partly written batch could not be cut off (%v), so nothing more is appended until a restart", err, terr)
				return l.broken
			}
		}
		return err
	}
	l.size += int64(n)
	l.dirty = true
	return nil
}

// cutOff truncates the file to its last whole batch and writes from there.
func (l *File) cutOff() error {
	if err := l.f.Truncate(l.size); err != nil {
		return err
	}
	_, err := l.f.Seek(l.size, io.SeekStart)
	return err
}

func (l *File) syncer() {
	defer close(l.done)
	periodic.Run(SyncEvery, func() { _ = l.Sync() }, l.stop)
}

// Sync fsyncs what was appended.
func (l *File) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || !l.dirty {
		return nil
	}
	l.dirty = false
	return l.f.Sync()
}

// Close syncs and closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	if l.f == nil {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	err := l.Sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

package process

import (
	"fmt"
	"os"
)

// rotatingLog is an attempt's output file. When the current file reaches
// max bytes it becomes path.1 (path.1 becomes path.2, and so on, up to keep
// old files; the oldest is deleted), so an attempt never holds more than
// (keep+1)*max bytes of log however much its job writes.
//
// The file is created at the first write: a job that prints nothing costs
// no file (creating one is among the dearest things an attempt does), and
// a reader of the log treats a missing file as an empty one.
type rotatingLog struct {
	fs   dataFS
	path string
	max  int64
	keep int
	f    *os.File
	n    int64
}

func openRotatingLog(fs dataFS, path string, max int64, keep int) *rotatingLog {
	return &rotatingLog{fs: fs, path: path, max: max, keep: keep}
}

func (l *rotatingLog) open() error {
	f, err := l.fs.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.n = f, st.Size()
	return nil
}

func (l *rotatingLog) Write(p []byte) (int, error) {
	if l.f == nil && len(p) > 0 {
		if err := l.open(); err != nil {
			return 0, err
		}
	}
	written := 0
	for len(p) > 0 {
		if l.n >= l.max {
			if err := l.rotate(); err != nil {
				return written, err
			}
		}
		chunk := p
		if room := l.max - l.n; int64(len(chunk)) > room {
			chunk = chunk[:room]
		}
		n, err := l.f.Write(chunk)
		written += n
		l.n += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

func (l *rotatingLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if l.keep <= 0 {
		l.fs.Remove(l.path)
	} else {
		l.fs.Remove(fmt.Sprintf("%s.%d", l.path, l.keep))
		for i := l.keep - 1; i >= 1; i-- {
			l.fs.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1))
		}
		if err := l.fs.Rename(l.path, l.path+".1"); err != nil {
			return err
		}
	}
	f, err := l.fs.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	l.f, l.n = f, 0
	return nil
}

func (l *rotatingLog) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

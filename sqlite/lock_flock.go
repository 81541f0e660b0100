//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"qshare/store"
)

// fileLock is an exclusive advisory lock (flock) on a file beside the
// database. The kernel drops it when its process dies, so a crash never
// leaves a stale lock behind.
type fileLock struct{ f *os.File }

// lockFile takes the lock at path, or fails at once, with an error that
// wraps store.ErrLocked, if another open DB holds it. It writes the holder's pid into the file, for the error message
// the next one gets.
func lockFile(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create lock file (is the data directory writable?): %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s, lock %s); stop that server or use another data directory", store.ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) //nolint:errcheck // informational only
	}
	return &fileLock{f: f}, nil
}

// unlock releases the lock. The file stays: removing it would race with
// another process that has opened it and is about to lock it.
func (l *fileLock) unlock() {
	if l == nil || l.f == nil {
		return
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it anyway
	l.f.Close()
	l.f = nil
}

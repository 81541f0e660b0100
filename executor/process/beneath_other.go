//go:build unix && !linux

package process

import (
	"errors"
	"os"
	"sync/atomic"
)

// noOpenat2 says walkOpen must do openat2's work: here always, whatever
// it holds (the tests set it to compare the two ways on Linux).
var noOpenat2 atomic.Bool

// openat2 exists on Linux only: elsewhere walkOpen resolves every path.
func openat2(dirfd int, rel string, flags int, mode uint32) (int, bool, error) {
	return -1, false, nil
}

// CreateUnnamed is unavailable here: the caller writes a named temporary
// file instead.
func (fs dataFS) CreateUnnamed(dir string, perm os.FileMode) (*os.File, bool, error) {
	return nil, false, nil
}

// LinkAs is never called where CreateUnnamed is unavailable.
func (fs dataFS) LinkAs(f *os.File, path string) error {
	return errors.New("unnamed files are Linux only")
}

// Chown is Linux's (it needs O_PATH, see the Linux build); the process
// executor, its only caller, runs on Linux only.
func (fs dataFS) Chown(path string, uid, gid int) error {
	return &fsError{"chown", path, errors.New("ownership changes through a descriptor need Linux's O_PATH")}
}

//go:build unix && !linux

package process

import (
	"errors"
	"os"
)

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

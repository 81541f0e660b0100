//go:build !unix

package datadir

import (
	"fmt"
	"os"
	"path/filepath"
)

// StateDir is the server's private directory in the data directory.
const StateDir = "state"

// Options say how Prepare lays out a data directory (see the unix build).
type Options struct {
	Shared    bool
	MoveStore bool
}

// StorePath returns the path of the default store's database in dir.
func StorePath(dir string) string { return filepath.Join(dir, StateDir, "qshare.db") }

// Prepare creates dir and its state/ directory, each its owner's alone as
// far as this system's modes go; modes an earlier version left are kept.
func Prepare(dir string, o Options) error {
	if err := os.MkdirAll(filepath.Join(dir, StateDir), 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return nil
}

// CheckPrivateFile checks the modes and owners of a private file and its
// directories where the system has them (see the unix build); here it
// checks nothing.
func CheckPrivateFile(flag, path string, create bool) error { return nil }

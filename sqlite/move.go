package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// companions are the files SQLite keeps beside a database, by suffix: the
// write-ahead log, its shared-memory index, and a rollback journal. A
// database moved without them loses what its log held.
var companions = []string{"-wal", "-shm", "-journal"}

// Move moves the database at from, with its companion files, to to (both
// absolute paths in one file system), under the database's lock: it fails
// with an error wrapping store.ErrLocked while a server holds it, so a
// database is never moved from under a running server. Nothing is ever
// replaced or lost: a file already at a destination makes Move fail before
// anything moves (unless it is the very same file, the mark of a move that
// was cut short, which is then finished). Each file is linked to its new
// name before its old name is removed, the companions first and the
// database last, so a Move cut short at any point leaves the database
// where a later Move (or Open of from) finds it with its log. A database
// absent from from is no error: there is nothing to move.
func Move(from, to string) error {
	if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lock, err := lockFile(lockPath(from))
	if err != nil {
		return fmt.Errorf("sqlite: move %s: %w", from, err)
	}
	defer lock.unlock()
	names := append(append([]string(nil), companions...), "")
	// First look, then move: a conflict changes nothing.
	for _, s := range names {
		if err := checkMove(from+s, to+s); err != nil {
			return fmt.Errorf("sqlite: move %s to %s: %w", from, to, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return fmt.Errorf("sqlite: move %s: %w", from, err)
	}
	for _, s := range names {
		if err := moveFile(from+s, to+s); err != nil {
			return fmt.Errorf("sqlite: move %s to %s: %w", from, to, err)
		}
	}
	return errors.Join(syncDir(filepath.Dir(to)), syncDir(filepath.Dir(from)))
}

// checkMove fails when both from and to exist and are not one file.
func checkMove(from, to string) error {
	a, err := os.Lstat(from)
	if err != nil {
		return nil
	}
	if !a.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", from)
	}
	b, err := os.Lstat(to)
	if err != nil || os.SameFile(a, b) {
		return nil
	}
	return fmt.Errorf("both %s and %s exist: keep the one that holds the data, and remove or rename the other", from, to)
}

// moveFile gives from the name to and removes the name from; a from that
// is gone is no error.
func moveFile(from, to string) error {
	a, err := os.Lstat(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.Link(from, to); err != nil {
		b, serr := os.Lstat(to)
		if serr != nil || !os.SameFile(a, b) {
			return err
		}
	}
	return os.Remove(from)
}

// syncDir makes the names of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

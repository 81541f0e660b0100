//go:build unix

package process

import (
	"errors"
	"os"
	"time"
)

// Beneath opens and creates files beneath one root directory without
// following links, as the process executor does for its data directory (see
// dataFS): every path is taken relative to the root and resolved beneath it
// with no symbolic link followed, and what must be a regular file or a
// directory is checked to be one once opened. Other executors whose jobs can
// write to the directories qshare reads (the Slurm executor's shared
// directory) use it rather than a copy. Paths given to its methods are
// absolute paths inside the root; a path outside it is refused. It is safe
// for concurrent use.
type Beneath struct{ fs dataFS }

// NewBeneath returns a Beneath for root, an absolute path that the operator
// (not a job) controls; it is opened by its path at the first use.
func NewBeneath(root string) *Beneath { return &Beneath{fs: newDataFS(root)} }

// OpenFile opens a regular file beneath the root; a link, FIFO, device or
// directory in its place is refused with an error for which IsLinkError is
// true.
func (b *Beneath) OpenFile(path string, flags int, perm os.FileMode) (*os.File, error) {
	return b.fs.OpenFile(path, flags, perm)
}

// OpenLog opens a file of an attempt's log beneath the root: nil and no
// error while it does not exist; a *qshare.Error EINVALID, naming only the
// file, for a link or anything else than a regular file in its place.
func (b *Beneath) OpenLog(attemptID, path string) (*os.File, error) {
	return openLog(b.fs, attemptID, path)
}

// ReadFile reads a regular file beneath the root.
func (b *Beneath) ReadFile(path string) ([]byte, error) { return b.fs.ReadFile(path) }

// WriteFile replaces path with a new regular file holding data, removing
// (never writing through) whatever was there.
func (b *Beneath) WriteFile(path string, data []byte, perm os.FileMode) error {
	return b.fs.WriteFile(path, data, perm)
}

// WriteFileAtomic writes data to path so that a reader sees the old file or
// the whole new one: a temporary file beside it, then a rename over it.
func (b *Beneath) WriteFileAtomic(path string, data []byte) error {
	return writeFileAtomic(b.fs, path, data)
}

// KeepStop records at path (a file of an attempt's directory) a stop with
// the given grace period, asked for now, unless a stop is recorded there
// already, and returns the grace period that the recorded stop has left:
// a stop asked for again after the server's restart keeps the deadline of
// the first, as the process executor's stop.json does.
func (b *Beneath) KeepStop(path string, grace time.Duration, now time.Time) (time.Duration, error) {
	return keepStop(b.fs, path, grace, now)
}

// MkdirAll creates path and the missing directories above it, down from the
// root, refusing a link on the way.
func (b *Beneath) MkdirAll(path string, perm os.FileMode) error {
	return b.fs.MkdirAll(path, perm, nil)
}

// ReadDir lists a directory beneath the root.
func (b *Beneath) ReadDir(path string) ([]os.DirEntry, error) { return b.fs.ReadDir(path) }

// IsFile reports whether path is a regular file (not a link to one).
func (b *Beneath) IsFile(path string) bool { return b.fs.IsFile(path) }

// Close closes the root's descriptor; later calls open the root again.
func (b *Beneath) Close() { b.fs.close() }

// IsLinkError reports whether err is a Beneath's refusal of a link (or of
// something else than qshare made) in a path's place.
func IsLinkError(err error) bool { return isLinkErr(err) }

// RelPath returns the path, relative to the root, that an error of a
// Beneath is about, so that a message built from it exposes no server path;
// "" if err is not one.
func RelPath(err error) string {
	var fe *fsError
	if errors.As(err, &fe) {
		return fe.Rel
	}
	return ""
}

// Chown gives path (not a link's target) to uid and gid.
func (b *Beneath) Chown(path string, uid, gid int) error { return b.fs.Chown(path, uid, gid) }

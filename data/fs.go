package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FS opens, creates and lists files beneath one root directory without
// following links: executor/process.Beneath is one (for a server that runs
// as root and writes into a job's directory), DirFS another (for the
// wrapper, which runs with the job's own rights). Paths are absolute and
// lie beneath the root; OpenFile refuses a link, or anything but a regular
// file, in a path's place, and MkdirAll a link on the way.
type FS interface {
	OpenFile(path string, flags int, perm os.FileMode) (*os.File, error)
	MkdirAll(path string, perm os.FileMode) error
	ReadDir(path string) ([]os.DirEntry, error)
}

// ErrLink is the refusal of a link (or of something else than a regular
// file or a directory) in a path's place.
var ErrLink = errors.New("is a link or not a regular file: qshare follows no links in a job's directory")

// dirFS is an FS over an os.Root: the root keeps every path beneath the
// directory, and a check of each component refuses links inside it too.
type dirFS struct {
	dir  string
	root *os.Root
}

// DirFS returns an FS beneath dir, an absolute path, opened now. Close it
// with CloseFS.
func DirFS(dir string) (FS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &dirFS{dir: filepath.Clean(dir), root: r}, nil
}

// CloseFS closes an FS that DirFS returned; it does nothing to others.
func CloseFS(f FS) {
	if d, ok := f.(*dirFS); ok {
		d.root.Close()
	}
}

// rel returns path relative to the root, refusing one outside it.
func (d *dirFS) rel(p string) (string, error) {
	r, err := filepath.Rel(d.dir, filepath.Clean(p))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r) {
		return "", fmt.Errorf("%s is outside %s", p, d.dir)
	}
	return r, nil
}

// noLinks refuses a link at any component of rel below the root, and
// anything but a directory above its last. The os.Root keeps every path
// beneath the root whatever this finds; this keeps a job's link from
// redirecting a write inside its own directory.
func (d *dirFS) noLinks(rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i := 1; i <= len(parts); i++ {
		p := filepath.Join(parts[:i]...)
		st, err := d.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 || (i < len(parts) && !st.IsDir()) {
			return &fs.PathError{Op: "open", Path: p, Err: ErrLink}
		}
	}
	return nil
}

func (d *dirFS) OpenFile(p string, flags int, perm os.FileMode) (*os.File, error) {
	rel, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	if err := d.noLinks(rel); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(rel, flags|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrLink}
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrLink}
	}
	return f, nil
}

func (d *dirFS) MkdirAll(p string, perm os.FileMode) error {
	rel, err := d.rel(p)
	if err != nil {
		return err
	}
	if err := d.noLinks(rel); err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	return d.root.MkdirAll(rel, perm)
}

func (d *dirFS) ReadDir(p string) ([]os.DirEntry, error) {
	rel, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	if err := d.noLinks(rel); err != nil {
		return nil, err
	}
	f, err := d.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

//go:build unix

package process

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A job runs in its directory under the data directory, as the server's
// user or (--run-as) as a user who owns that directory: either way it can
// replace anything in it with a symbolic link, a hard link or a FIFO before
// the executor next touches it. So every file the executor and the
// supervisor open under the data directory goes through dataFS: the path is
// taken relative to the data directory and resolved beneath it without
// following any link (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where
// the kernel has it, else openat with O_NOFOLLOW on every component), and
// what must be a directory or a regular file is checked to be one after it
// is opened. Only the data directory itself is opened by its path: it is the
// operator's, not a job's.

// errLink is the cause of a refusal to follow a link (or a path that would
// leave the data directory): a job planted it.
var errLink = errors.New("is a link, or not what qshare made there")

// fsError is an error of dataFS. Rel is the path relative to the data
// directory, so that a message built from it exposes no server path.
type fsError struct {
	Op  string
	Rel string
	Err error
}

func (e *fsError) Error() string { return e.Op + " " + e.Rel + ": " + e.Err.Error() }
func (e *fsError) Unwrap() error { return e.Err }

// isLinkErr reports whether err is a refusal to follow a planted link.
func isLinkErr(err error) bool { return errors.Is(err, errLink) }

// noTmpfile is set once unnamed files (CreateUnnamed) turned out to be
// unavailable here: the file system has no O_TMPFILE, or there is no /proc
// to name them through.
var noTmpfile atomic.Bool

// dataFS opens files beneath a data directory without following links. The
// zero value is unusable; root is an absolute, clean path. Copies share one
// descriptor of the root, opened at the first use (opening the root's path
// for every call would cost a lookup of each of its components); after
// close, each call opens the root again.
type dataFS struct {
	root string
	h    *rootHandle
}

// rootHandle is the descriptor of a dataFS's root. Calls hold mu for
// reading while they use fd, so that close never ends a descriptor in use
// (whose number could then name another file).
type rootHandle struct {
	mu     sync.RWMutex
	fd     int // -1: not open
	closed bool
}

func newDataFS(root string) dataFS {
	return dataFS{root: filepath.Clean(root), h: &rootHandle{fd: -1}}
}

// withRoot calls fn with a descriptor of the root, valid during the call.
func (fs dataFS) withRoot(fn func(root int) error) error {
	if h := fs.h; h != nil {
		h.mu.RLock()
		if h.fd < 0 && !h.closed {
			h.mu.RUnlock()
			h.mu.Lock()
			if h.fd < 0 && !h.closed {
				if fd, err := fs.openRoot(); err == nil {
					h.fd = fd
				}
			}
			h.mu.Unlock()
			h.mu.RLock()
		}
		if h.fd >= 0 {
			defer h.mu.RUnlock()
			return fn(h.fd)
		}
		h.mu.RUnlock()
	}
	fd, err := fs.openRoot()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd)
}

// close closes the root's descriptor; later calls open the root each time.
func (fs dataFS) close() {
	if h := fs.h; h != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fd >= 0 {
			unix.Close(h.fd)
		}
		h.fd, h.closed = -1, true
	}
}

// rel returns path relative to the root; it fails for a path outside it.
func (fs dataFS) rel(op, path string) (string, error) {
	p := filepath.Clean(path)
	if p == fs.root {
		return ".", nil
	}
	r, ok := strings.CutPrefix(p, fs.root+string(filepath.Separator))
	if !ok || r == "" {
		return "", &fsError{op, filepath.Base(p), errors.New("is outside the data directory")}
	}
	return r, nil
}

// openRoot opens the data directory itself.
func (fs dataFS) openRoot() (int, error) {
	return unix.Open(fs.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// linkErr turns the errors that a link on the way produces into errLink.
func linkErr(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EMLINK) {
		return errLink
	}
	return err
}

// openBeneath opens rel beneath the directory dirfd without following any
// link, and returns the new descriptor. O_NOFOLLOW and O_CLOEXEC are added.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if fd, ok, err := openat2(dirfd, rel, flags, mode); ok {
		return fd, linkErr(err)
	}
	return walkOpen(dirfd, rel, flags, mode)
}

// walkOpen is openBeneath without openat2: one openat per component, each
// with O_NOFOLLOW, and no "..".
func walkOpen(dirfd int, rel string, flags int, mode uint32) (int, error) {
	parts := strings.Split(rel, "/")
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}
	for i, p := range parts {
		if p == ".." {
			closeCur()
			return -1, errLink
		}
		last := i == len(parts)-1
		if p == "" || p == "." {
			if !last {
				continue
			}
			p = "."
		}
		f, m := unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(0)
		if last {
			f, m = flags, mode
		}
		fd, err := unix.Openat(cur, p, f, m)
		if err != nil && !last {
			// A link in the middle answers ELOOP or ENOTDIR: tell which.
			var st unix.Stat_t
			if unix.Fstatat(cur, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = errLink
			}
		}
		closeCur()
		if err != nil {
			return -1, linkErr(err)
		}
		cur = fd
	}
	return cur, nil
}

// open opens path, which must lie beneath the root, without following links.
func (fs dataFS) open(op, path string, flags int, mode uint32) (int, string, error) {
	rel, err := fs.rel(op, path)
	if err != nil {
		return -1, "", err
	}
	fd := -1
	err = fs.withRoot(func(root int) (err error) {
		fd, err = openBeneath(root, rel, flags, mode)
		return err
	})
	if err != nil {
		return -1, rel, &fsError{op, rel, err}
	}
	return fd, rel, nil
}

// parent opens the directory holding path and returns it with path's last
// element, for the *at calls that act on a name in a directory.
func (fs dataFS) parent(op, path string) (int, string, string, error) {
	rel, err := fs.rel(op, path)
	if err != nil {
		return -1, "", "", err
	}
	if rel == "." {
		return -1, "", rel, &fsError{op, rel, errors.New("is the data directory")}
	}
	dir, name := filepath.Split(rel)
	fd := -1
	err = fs.withRoot(func(root int) (err error) {
		if dir == "" {
			fd, err = unix.Dup(root) // the caller closes it
			return err
		}
		fd, err = openBeneath(root, strings.TrimSuffix(dir, "/"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		return err
	})
	if err != nil {
		return -1, "", rel, &fsError{op, rel, err}
	}
	return fd, name, rel, nil
}

// OpenFile opens a regular file beneath the root. A link, a FIFO, a device
// or a directory in its place is refused (errLink), and so is a file with
// other hard links when the file is opened for writing without O_EXCL: a job
// could have linked a file it cannot write to in its place.
func (fs dataFS) OpenFile(path string, flags int, perm os.FileMode) (*os.File, error) {
	fd, rel, err := fs.open("open", path, flags|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fsError{"open", rel, err}
	}
	writes := flags&(os.O_WRONLY|os.O_RDWR) != 0
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (writes && flags&os.O_EXCL == 0 && st.Nlink > 1) {
		unix.Close(fd)
		return nil, &fsError{"open", rel, errLink}
	}
	// Regular files ignore O_NONBLOCK; clear it anyway for what follows.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadFile reads a regular file beneath the root, at most limit bytes
// (0: no limit).
func (fs dataFS) ReadFile(path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile replaces path with a new regular file holding b: whatever was
// there (a link a job planted, a hard link to another file) is removed
// first, never written through.
func (fs dataFS) WriteFile(path string, b []byte, perm os.FileMode) error {
	if err := fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fs.CreateFile(path, b, perm)
}

// CreateFile creates path as a new regular file holding b. It fails with an
// error wrapping os.ErrExist when anything (a link included) is there: it is
// WriteFile without the removal, for a directory that the caller has just
// created and that no one else has written to yet (one system call fewer,
// and none that fails, per file).
func (fs dataFS) CreateFile(path string, b []byte, perm os.FileMode) error {
	f, err := fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Holds reports whether path is a regular file, reached without a link and
// with no other hard link, whose content is exactly b: a file that
// WriteFile(path, b) would only write again.
func (fs dataFS) Holds(path string, b []byte) bool {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != int64(len(b)) || nlink(st) != 1 {
		return false
	}
	got := make([]byte, len(b)+1) // one more: the file may have grown since
	n, err := io.ReadFull(f, got)
	if err != io.ErrUnexpectedEOF && !(err == io.EOF && len(b) == 0) {
		return false
	}
	return string(got[:n]) == string(b)
}

// CreateTemp creates a new file in dir with a name made of prefix and a
// random suffix, open for reading and writing.
func (fs dataFS) CreateTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		var r [6]byte
		rand.Read(r[:])
		f, err := fs.OpenFile(filepath.Join(dir, prefix+hex.EncodeToString(r[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, os.ErrExist) || try == 100 {
			return f, err
		}
	}
}

// Mkdir creates a directory. When something exists at path, it returns an
// error wrapping os.ErrExist if that is a directory, and errLink otherwise.
func (fs dataFS) Mkdir(path string, perm os.FileMode) error {
	dfd, name, rel, err := fs.parent("mkdir", path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	err = unix.Mkdirat(dfd, name, uint32(perm.Perm()))
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err = errLink
		}
	}
	if err != nil {
		return &fsError{"mkdir", rel, linkErr(err)}
	}
	return nil
}

// MkdirAll creates path and the directories above it that are missing,
// down from the root, and calls made (if not nil) for each one it created.
func (fs dataFS) MkdirAll(path string, perm os.FileMode, made func(string) error) error {
	rel, err := fs.rel("mkdir", path)
	if err != nil || rel == "." {
		return err
	}
	return fs.mkdirEach(fs.root, strings.Split(rel, "/"), perm, made)
}

// MkdirBelow creates the directories of path that are missing below base,
// an existing directory that holds path, down from base, and calls made (if
// not nil) for each one it created. It is MkdirAll without the lookups of
// the directories from the root to base, which the caller knows exist.
func (fs dataFS) MkdirBelow(base, path string, perm os.FileMode, made func(string) error) error {
	base, path = filepath.Clean(base), filepath.Clean(path)
	rel, ok := strings.CutPrefix(path, base+string(filepath.Separator))
	if !ok || rel == "" {
		return fs.MkdirAll(path, perm, made)
	}
	return fs.mkdirEach(base, strings.Split(rel, string(filepath.Separator)), perm, made)
}

// mkdirEach creates the directories dir/parts[0], dir/parts[0]/parts[1]…
// that are missing, in that order, and calls made (if not nil) for each one
// it created. dir must exist.
func (fs dataFS) mkdirEach(dir string, parts []string, perm os.FileMode, made func(string) error) error {
	p := dir
	for _, part := range parts {
		p = filepath.Join(p, part)
		err := fs.Mkdir(p, perm)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if made != nil {
			if err := made(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove removes a file or an empty directory (a link itself, not what it
// points to).
func (fs dataFS) Remove(path string) error {
	dfd, name, rel, err := fs.parent("remove", path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	err = unix.Unlinkat(dfd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		if derr := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); derr == nil || !errors.Is(derr, unix.ENOTDIR) {
			err = derr
		}
	}
	if err != nil {
		return &fsError{"remove", rel, linkErr(err)}
	}
	return nil
}

// Rename renames oldpath to newpath; both lie beneath the root.
func (fs dataFS) Rename(oldpath, newpath string) error {
	return fs.twoPaths("rename", oldpath, newpath, func(ofd int, oname string, nfd int, nname string) error {
		return linkErr(unix.Renameat(ofd, oname, nfd, nname))
	})
}

// Link makes newpath a hard link of oldpath; it fails with an error
// wrapping os.ErrExist when newpath exists.
func (fs dataFS) Link(oldpath, newpath string) error {
	return fs.twoPaths("link", oldpath, newpath, func(ofd int, oname string, nfd int, nname string) error {
		return unix.Linkat(ofd, oname, nfd, nname, 0)
	})
}

// twoPaths runs sys, an operation on two names (Renameat, Linkat), on
// oldpath and newpath, each named in its parent directory opened beneath
// the root. An error of sys is an *fsError of op at oldpath.
func (fs dataFS) twoPaths(op, oldpath, newpath string, sys func(ofd int, oname string, nfd int, nname string) error) error {
	ofd, oname, orel, err := fs.parent(op, oldpath)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	nfd, nname, _, err := fs.parent(op, newpath)
	if err != nil {
		return err
	}
	defer unix.Close(nfd)
	if err := sys(ofd, oname, nfd, nname); err != nil {
		return &fsError{op, orel, err}
	}
	return nil
}

// Symlink makes path a symbolic link to target (earlier versions' live/
// entries; qshare reads them with Readlink, never through them).
func (fs dataFS) Symlink(target, path string) error {
	dfd, name, rel, err := fs.parent("symlink", path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Symlinkat(target, dfd, name); err != nil {
		return &fsError{"symlink", rel, err}
	}
	return nil
}

// Readlink returns the target of the symbolic link at path.
func (fs dataFS) Readlink(path string) (string, error) {
	dfd, name, rel, err := fs.parent("readlink", path)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", &fsError{"readlink", rel, err}
	}
	return string(buf[:n]), nil
}

// kind returns the type bits of what is at path, without following a link
// (0 and an error when nothing is there or it cannot be reached).
func (fs dataFS) kind(path string) (uint32, error) {
	dfd, name, rel, err := fs.parent("stat", path)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, &fsError{"stat", rel, err}
	}
	return uint32(st.Mode) & unix.S_IFMT, nil
}

// Exists reports whether something (a link included) is at path.
func (fs dataFS) Exists(path string) bool {
	_, err := fs.kind(path)
	return err == nil
}

// IsDir reports whether path is a directory (not a link to one).
func (fs dataFS) IsDir(path string) bool {
	k, err := fs.kind(path)
	return err == nil && k == unix.S_IFDIR
}

// IsFile reports whether path is a regular file (not a link to one).
func (fs dataFS) IsFile(path string) bool {
	k, err := fs.kind(path)
	return err == nil && k == unix.S_IFREG
}

// ReadDir lists the directory at path.
func (fs dataFS) ReadDir(path string) ([]os.DirEntry, error) {
	fd, _, err := fs.open("readdir", path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return f.ReadDir(-1)
}

// GiveDir makes the directory path belong to uid and gid with mode perm,
// through one descriptor opened beneath the root as a directory without
// following links (see Chown): a name that a job swapped for a file or a
// link is refused (errLink), and a swap after the open changes nothing
// but the directory that was opened.
func (fs dataFS) GiveDir(path string, uid, gid int, perm os.FileMode) error {
	fd, rel, err := fs.open("chown", path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return &fsError{"chown", rel, errLink}
		}
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fsError{"chown", rel, err}
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return &fsError{"chown", rel, err}
		}
	}
	if os.FileMode(st.Mode&0o7777) != perm.Perm() {
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
			return &fsError{"chmod", rel, err}
		}
	}
	return nil
}

// nlink returns the number of hard links of the file st describes (1 where
// the system does not say).
func nlink(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}

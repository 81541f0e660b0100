package process

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out to be missing (a kernel before
// 5.6, or a seccomp filter that refuses it): walkOpen does its work then.
var noOpenat2 atomic.Bool

// openat2 opens rel beneath dirfd with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS.
// ok is false when the kernel has no openat2, and the caller must walk.
func openat2(dirfd int, rel string, flags int, mode uint32) (fd int, ok bool, err error) {
	if noOpenat2.Load() {
		return -1, false, nil
	}
	fd, err = unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		noOpenat2.Store(true)
		return -1, false, nil
	}
	return fd, true, err
}

// CreateUnnamed opens a new, unnamed regular file in the directory dir
// (O_TMPFILE), beneath the root and without following links, for LinkAs
// to give it its names once it holds its content: a reader then finds no
// file, or the file with all of it, and no temporary name is ever made or
// removed. ok is false where the file system or the kernel cannot make
// unnamed files (and /proc, through which LinkAs names them, is absent):
// the caller then writes a named temporary file instead.
func (fs dataFS) CreateUnnamed(dir string, perm os.FileMode) (f *os.File, ok bool, err error) {
	if noTmpfile.Load() {
		return nil, false, nil
	}
	f, err = fs.OpenFile(dir, unix.O_TMPFILE|os.O_RDWR, perm)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			noTmpfile.Store(true)
			return nil, false, nil
		}
		return nil, true, err
	}
	return f, true, nil
}

// LinkAs gives the open file f (from CreateUnnamed, or any file it opened)
// the name path beneath the root. It fails with an error wrapping
// os.ErrExist when path exists: link(2) never replaces a file, so the first
// name given is the one an exclusive creation would have made.
func (fs dataFS) LinkAs(f *os.File, path string) error {
	dfd, name, rel, err := fs.parent("link", path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, src, dfd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &fsError{"link", rel, err}
	}
	return nil
}

// Chown gives path (never a link's target) to uid and gid. The change is
// made through a descriptor: path is opened beneath the root without
// following links (O_PATH), what it is is checked on that descriptor, and
// the descriptor is changed. A check of the name followed by a change of
// the name would give away whatever a job swapped in between
// (renameat2(RENAME_EXCHANGE) with a hard link to a file of root's): here
// a swap changes only what was checked. A directory is given; a regular
// file only when it has no other hard link and belongs to this process's
// user (a file qshare made); anything else is refused (errLink).
func (fs dataFS) Chown(path string, uid, gid int) error {
	fd, rel, err := fs.open("chown", path, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fsError{"chown", rel, err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFREG:
		if st.Nlink != 1 || st.Uid != uint32(os.Geteuid()) {
			return &fsError{"chown", rel, errLink}
		}
	default:
		return &fsError{"chown", rel, errLink}
	}
	if int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return &fsError{"chown", rel, err}
	}
	return nil
}

package process

import (
	"errors"
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

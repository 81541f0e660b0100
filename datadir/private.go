//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CheckPrivateFile checks a file that the server keeps private wherever
// it is given (an --events or --audit log, the --auth file; flag names
// it in errors), before the server opens it, as ssh checks a user's
// authorized_keys (StrictModes): a file that someone else could read,
// change or replace is refused, with the reason and the fix. Inside
// DATA/state/ each check passes by construction.
//
//   - The file, if it exists, is a regular file, not a link; it is owned
//     by the server's user (or root); and neither its group nor others may
//     read or write it (mode 0600 or less).
//   - A missing file is created here, 0600, when create is set (never
//     through a link), so that nobody else can create it first between
//     this check and the server's open; a missing auth file is left to the
//     server's own error.
//   - Every directory above it, as given and as its links resolve, is
//     owned by the server's user or root, and is writable by neither its
//     group nor others, unless it has the sticky bit (as /tmp has): there
//     only a file's owner may remove or rename it, and the file itself is
//     checked above.
func CheckPrivateFile(flag, path string, create bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	fix := fmt.Sprintf("keep it in the data directory's %s/, which only the server's user may enter (docs/security.md)", StateDir)
	me := os.Geteuid()
	ours := func(uid uint32) bool { return uid == 0 || int(uid) == me }
	// The directories first: nothing is created where it is refused.
	dir := filepath.Dir(abs)
	dirs := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		dirs = append(dirs, real)
	}
	for _, d := range dirs {
		for ; ; d = filepath.Dir(d) {
			var ds unix.Stat_t
			if err := unix.Stat(d, &ds); err == nil {
				if !ours(ds.Uid) {
					return fmt.Errorf("%s %s: the directory %s is owned by uid %d, neither the server's user (uid %d) nor root, who could replace the file: %s", flag, abs, d, ds.Uid, me, fix)
				}
				if ds.Mode&0o022 != 0 && ds.Mode&unix.S_ISVTX == 0 {
					return fmt.Errorf("%s %s: the directory %s may be written by its group or others (mode %04o), who could replace the file: take that away with chmod go-w %s, or %s", flag, abs, d, ds.Mode&0o7777, d, fix)
				}
			} else if !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("%s %s: %w", flag, abs, err)
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	if create {
		fd, err := unix.Open(abs, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		} else if !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s %s: %w", flag, abs, err)
		}
	}
	var st unix.Stat_t
	switch err := unix.Lstat(abs, &st); {
	case errors.Is(err, unix.ENOENT):
		// Its directory does not exist yet (DATA/state/ on a first start):
		// the directories above are checked below.
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, abs, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s %s is a symbolic link, which whoever may write its directory could point elsewhere: give the file's own path, and %s", flag, abs, fix)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s %s is not a regular file", flag, abs)
	case !ours(st.Uid):
		return fmt.Errorf("%s %s is owned by uid %d, neither the server's user (uid %d) nor root: its owner can read it and change it; chown it to the server's user, or %s", flag, abs, st.Uid, me, fix)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%s %s may be read or changed by others than its owner (mode %04o): make it private with chmod 600 %s, or %s", flag, abs, st.Mode&0o7777, abs, fix)
	}
	return nil
}

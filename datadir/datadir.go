//go:build unix

// Package datadir lays out qshare serve's data directory and keeps it as
// private as the API: the server's own files (the store, and the event and
// audit logs an operator keeps there) in a state/ directory that only the
// server's user may enter, beside the executor's jobs/ tree, which the jobs'
// users traverse to their own directories (each 0700 to its user). cmd/qshare
// calls Prepare once, before anything opens a file in the directory.
//
//	DATA/            0700; 0711 when jobs run as other users (--auth, --run-as)
//	  state/         0700: qshare.db and its log, and what the operator keeps
//	                 there (--events, --audit, --auth)
//	  jobs/          0700; 0711 when jobs run as other users
//	    <jobID>/     0700 to the job's user when jobs run as other users
//	  attempts/ live/ 0700: every attempt's records and log
//
// Earlier versions made DATA 0755 and its files 0644, and kept the database
// at DATA/qshare.db, where every job's user could read every payload's
// Environment. Prepare brings such a directory to the layout above: it
// moves the database (sqlite.Move, under the database's lock, never over
// another file) and tightens the modes, every change of mode through a
// descriptor opened without following links.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"qshare/sqlite"
)

// StateDir is the server's private directory in the data directory.
const StateDir = "state"

// storeFile is the default store's database file name.
const storeFile = "qshare.db"

// Options say how Prepare lays out a data directory.
type Options struct {
	// Shared is set when jobs run as other Unix users than the server's
	// (--auth with the process executor, or --run-as): they must traverse
	// the data directory and jobs/ (o+x, never o+r) to reach their own
	// job's directory.
	Shared bool
	// MoveStore is set when the server uses the default store: a database
	// that an earlier version left at DATA/qshare.db is moved to
	// state/qshare.db.
	MoveStore bool
}

// StorePath returns the path of the default store's database in the data
// directory dir.
func StorePath(dir string) string { return filepath.Join(dir, StateDir, storeFile) }

// Prepare creates the data directory dir if it is missing, and brings it to
// the layout and modes of the package comment. It refuses a directory that
// is shared by design (the sticky bit, as /tmp has) or that is the root of
// the file system, whose mode it must not change.
func Prepare(dir string, o Options) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %q: %w", dir, err)
	}
	top, jobs := os.FileMode(0o700), os.FileMode(0o700)
	if o.Shared {
		top, jobs = 0o711, 0o711
	}
	if err := os.MkdirAll(abs, top); err != nil {
		return fmt.Errorf("--data-dir %s: cannot create it: %w", abs, err)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", abs, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("--data-dir %s: %w", abs, err)
	}
	if st.Mode&unix.S_ISVTX != 0 || abs == "/" {
		return fmt.Errorf("--data-dir %s is a directory that every user shares (it has the sticky bit, as /tmp has): give a directory of qshare's own, such as %s", abs, filepath.Join(abs, "qshare-data"))
	}
	if err := setMode(fd, &st, top); err != nil {
		return fmt.Errorf("--data-dir %s: cannot set its mode to %#o: %w", abs, top, err)
	}
	if err := mkdirMode(fd, StateDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %s: %w", abs, StateDir, err)
	}
	if o.MoveStore {
		if err := sqlite.Move(filepath.Join(abs, storeFile), StorePath(abs)); err != nil {
			return fmt.Errorf("--data-dir %s: moving the database into %s/ (where no job's user can read it): %w", abs, StateDir, err)
		}
	}
	return tighten(fd, abs, jobs, o.Shared)
}

// tighten brings what an earlier version left in the data directory (open
// as dfd) to the modes of the layout: directories of the server's to 0700
// (jobs/ to jobsMode), each job's directory to 0700 when shared, and the
// regular files of the server's user in the data directory and in state/
// to no access for group and others.
func tighten(dfd int, abs string, jobsMode os.FileMode, shared bool) error {
	var errs []error
	for name, mode := range map[string]os.FileMode{"attempts": 0o700, "live": 0o700, "jobs": jobsMode} {
		if err := chmodAt(dfd, name, mode, true); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	for _, d := range []string{".", StateDir} {
		errs = append(errs, privateFiles(dfd, d))
	}
	if shared {
		errs = append(errs, eachEntry(dfd, "jobs", func(jfd int, name string, st *unix.Stat_t) error {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o077 == 0 {
				return nil
			}
			return chmodAt(jfd, name, 0o700, true)
		}))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("--data-dir %s: tightening the modes an earlier version left: %w", abs, err)
	}
	return nil
}

// privateFiles takes group and other access away from the regular files of
// the server's user in the directory rel of dfd.
func privateFiles(dfd int, rel string) error {
	euid := uint32(os.Geteuid())
	return eachEntry(dfd, rel, func(d int, name string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != euid || st.Mode&0o077 == 0 {
			return nil
		}
		return chmodAt(d, name, os.FileMode(st.Mode&0o700), false)
	})
}

// eachEntry calls fn for each entry of the directory rel of dfd, with a
// descriptor of that directory and the entry's lstat; a missing directory
// is no error.
func eachEntry(dfd int, rel string, fn func(d int, name string, st *unix.Stat_t) error) error {
	d, err := unix.Openat(dfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(d), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	var errs []error
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(d, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if err := fn(d, n, &st); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(rel, n), err))
		}
	}
	return errors.Join(errs...)
}

// mkdirMode creates the directory name in dfd with mode, or gives the one
// there mode; a link or another file in its place is refused.
func mkdirMode(dfd int, name string, mode os.FileMode) error {
	if err := unix.Mkdirat(dfd, name, uint32(mode)); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return chmodAt(dfd, name, mode, true)
}

// chmodAt gives name in dfd the mode, through a descriptor opened without
// following a link (and, for dir, only if it is a directory): a name that a
// job swapped for a link changes nothing.
func chmodAt(dfd int, name string, mode os.FileMode, dir bool) error {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dfd, name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("is a link or not a directory, not what qshare made there")
		}
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if !dir && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // a FIFO or a device: not qshare's, not changed
	}
	return setMode(fd, &st, mode)
}

// setMode gives the open file fd (whose stat is st) the permission bits
// mode, if it has others.
func setMode(fd int, st *unix.Stat_t, mode os.FileMode) error {
	if os.FileMode(st.Mode&0o7777) == mode {
		return nil
	}
	return unix.Fchmod(fd, uint32(mode))
}

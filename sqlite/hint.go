package sqlite

import (
	"errors"

	sqlite3 "modernc.org/sqlite"
	lib "modernc.org/sqlite/lib"
)

// hint returns advice for the person running qshare when err is one of the
// SQLite failures that come from the machine rather than from qshare, or ""
// for any other error.
func hint(err error) string {
	var e *sqlite3.Error
	if !errors.As(err, &e) {
		return ""
	}
	switch e.Code() & 0xff { // the primary result code
	case lib.SQLITE_FULL, lib.SQLITE_IOERR:
		return "; check that the disk holding the data directory has free space and works (nothing of this commit was applied; later commits are tried afresh)"
	case lib.SQLITE_READONLY, lib.SQLITE_CANTOPEN, lib.SQLITE_PERM:
		return "; check that the data directory and its files are writable by this user"
	case lib.SQLITE_BUSY, lib.SQLITE_LOCKED:
		return "; another process holds the database: run one qshare per data directory"
	case lib.SQLITE_CORRUPT, lib.SQLITE_NOTADB:
		return "; the database file is damaged or is not a qshare database: restore it from a backup or use another data directory"
	}
	return ""
}

//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

// fileLock does nothing on this platform: two processes opening one
// database are not prevented from doing so (SQLite's own locking still
// keeps the file consistent).
type fileLock struct{}

func lockFile(string) (*fileLock, error) { return &fileLock{}, nil }

func (*fileLock) unlock() {}

//go:build unix && !linux

package process

// openat2 exists on Linux only: elsewhere walkOpen resolves every path.
func openat2(dirfd int, rel string, flags int, mode uint32) (int, bool, error) {
	return -1, false, nil
}

package bench

import "golang.org/x/sys/unix"

// FileSystem names the file system dir is on ("tmpfs", "ext4", ...; the
// magic number in hex when it is none of fsNames), or "" when it cannot be
// asked.
func FileSystem(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ""
	}
	return fsName(int64(st.Type))
}

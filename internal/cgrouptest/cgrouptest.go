// Package cgrouptest mounts a cgroup v2 hierarchy for a test, so that the
// process executor's cgroup v2 path runs for real on a host whose own
// hierarchy is v1 or hybrid (Linux lets a cgroup2 hierarchy be mounted
// anywhere beside it).
package cgrouptest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountV2 mounts a cgroup2 hierarchy in a new temporary directory and
// returns it. Its cleanup kills and removes every cgroup left in it, then
// unmounts it. It skips the test, with the reason, where that cannot be
// done: not root, or no cgroup2 in the kernel.
func MountV2(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a cgroup2 hierarchy needs root; run the tests as root to cover cgroup v2")
	}
	dir, err := os.MkdirTemp("", "qshare-cgroup2-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a cgroup2 hierarchy at %s (%v): the cgroup v2 path is not covered here", dir, err)
	}
	t.Cleanup(func() {
		// Deepest first: a cgroup can be removed only once it has no children.
		var dirs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && p != dir {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.WriteFile(filepath.Join(dirs[i], "cgroup.kill"), []byte("1"), 0)
			for deadline := time.Now().Add(5 * time.Second); os.Remove(dirs[i]) != nil && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the test's cgroup2 at %s: %v", dir, err)
			return
		}
		os.Remove(dir)
	})
	return dir
}

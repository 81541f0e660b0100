// Package cgrouptest mounts a cgroup v2 hierarchy for a test, so that the
// process executor's cgroup v2 path runs for real on a host whose own
// hierarchy is v1 or hybrid (Linux lets a cgroup2 hierarchy be mounted
// anywhere beside it).
package cgrouptest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountV2 mounts the cgroup2 hierarchy in a new temporary directory and
// returns a cgroup of the test's own in it, to be the test's cgroup root.
// Its cleanup kills and removes every cgroup under that one, and it, then
// unmounts the hierarchy. It skips the test, with the reason, where that
// cannot be done: not root, or no cgroup2 in the kernel.
//
// The hierarchy is not the test's: there is one cgroup2 hierarchy per
// host, and a new mount shows it whole, with what others keep in it (on a
// hybrid host Docker's runc puts each container in docker/<id>; on a v2
// host it is every service). So the test works, and cleans up, only
// beneath its own cgroup: a cleanup that killed every cgroup of the mount
// killed every container on the machine (exit code 137 in other
// packages' container tests, which ran beside it).
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
	own, err := os.MkdirTemp(dir, "qshare-test-")
	if err != nil {
		unix.Unmount(dir, 0)
		os.Remove(dir)
		t.Fatalf("making the test's cgroup in the cgroup2 hierarchy: %v", err)
	}
	// The pids controller, where the hierarchy has it, reaches the test's
	// cgroup only if its parent passes it down (on a v2 host it already
	// does; on a hybrid one pids is v1's).
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); strings.Contains(" "+string(b)+" ", " pids ") {
		os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0) //nolint:errcheck // best effort: the executor counts threads without it
	}
	t.Cleanup(func() {
		// Deepest first: a cgroup can be removed only once it has no
		// children. Only the test's own cgroup and what is under it.
		var dirs []string
		filepath.WalkDir(own, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
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
		// A descriptor of the hierarchy that a process or the executor
		// closes as the attempt's end is learned (under -race, later)
		// keeps the mount busy a moment: wait for it, as for the removes.
		err := unix.Unmount(dir, 0)
		for deadline := time.Now().Add(5 * time.Second); err == unix.EBUSY && time.Now().Before(deadline); err = unix.Unmount(dir, 0) {
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("unmounting the test's cgroup2 at %s: %v (for 5 s)", dir, err)
			return
		}
		os.Remove(dir)
	})
	return own
}

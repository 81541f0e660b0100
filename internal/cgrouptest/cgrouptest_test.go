package cgrouptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCleanupKeepsOthersCgroups: the cgroup2 hierarchy is the host's, so
// MountV2's cleanup must leave every cgroup that is not the test's alone.
// A bystander (as Docker's docker/<id> is) holds a process; after a test
// that used MountV2, and put a process of its own in its cgroup, has
// cleaned up, the bystander's process runs and its cgroup is there, and
// the test's process and cgroup are gone. Before, the cleanup killed every
// cgroup of the mount, and so every container on the machine.
func TestCleanupKeepsOthersCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a cgroup2 hierarchy needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		t.Skipf("cannot mount a cgroup2 hierarchy (%v)", err)
	}
	defer unix.Unmount(dir, 0)
	bystander, err := os.MkdirTemp(dir, "qshare-bystander-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(bystander)
	other := sleepIn(t, bystander, "100011")
	defer other.Process.Kill()

	var own string
	var mine *exec.Cmd
	t.Run("user", func(t *testing.T) {
		own = MountV2(t)
		mine = sleepIn(t, own, "100012")
	})
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(other.Process.Pid) + "/stat"); err != nil || strings.Contains(string(st), ") Z") {
		t.Errorf("the bystander's process is gone after MountV2's cleanup: %q, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(bystander, "cgroup.procs")); err != nil {
		t.Errorf("the bystander's cgroup is gone after MountV2's cleanup: %v", err)
	}
	if mine != nil {
		done := make(chan error, 1)
		go func() { done <- mine.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			mine.Process.Kill()
			t.Errorf("the test's own process outlived MountV2's cleanup")
		}
	}
	if own != "" && strings.HasPrefix(filepath.Base(own), "qshare-test-") {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(own))); err == nil {
			t.Errorf("the test's cgroup %s is left", own)
		}
	}
}

// sleepIn starts a sleep (marker its length, to tell it apart) and moves
// it into the cgroup dir.
func sleepIn(t *testing.T, dir, marker string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("moving the sleep into %s: %v", dir, err)
	}
	return cmd
}
